"""Retractions (``Event.retracts_event_id``) over lists of domain events:
what compaction and memory leave out. Built contexts apply the same rule to
their records (``building.retractions``)."""

from __future__ import annotations

from collections.abc import Sequence

from context_service.domain.model import Event


def retracted(events: Sequence[Event]) -> frozenset[str]:
    """Ids of the events a retraction among ``events`` takes back."""
    return frozenset(e.retracts_event_id for e in events if e.retracts_event_id)


def unretracted(events: Sequence[Event]) -> list[Event]:
    """``events`` without the retracted ones and the retractions."""
    gone = retracted(events)
    if not gone:
        return list(events)
    return [e for e in events if e.id not in gone and not e.retracts_event_id]
