"""A turn as the runner takes it and the result it gives back, in domain
terms (the servicer maps both)."""

from __future__ import annotations

from dataclasses import dataclass

from context_service.building.types import BuildRequest
from context_service.domain import turn_rules
from context_service.domain.model import Event
from context_service.domain.selection import Accounting
from context_service.tools.service import MintedToken


@dataclass(frozen=True, slots=True)
class Turn:
    """A validated Generate request: the input events (ids set), the turn's
    ids, the reply's author and branch, and the context to build for the
    model call (its input: the input events' contents). ``store`` False
    (TURN_STORAGE_NONE): neither the input nor the reply is appended; the
    agent's runner appends them itself."""

    inputs: tuple[Event, ...]
    ids: turn_rules.TurnIds
    author: str
    branch: str
    build: BuildRequest
    store: bool = True

    @property
    def input_ids(self) -> frozenset[str]:
        return frozenset(e.id for e in self.inputs)


@dataclass(frozen=True, slots=True)
class TurnResult:
    reply: Event
    accounting: Accounting | None = None
    compactions: tuple[Event, ...] = ()
    background_scheduled: bool = False
    deduplicated: bool = False
    # The tokens minted for the reply's function calls, stored with it.
    tokens: tuple[MintedToken, ...] = ()
