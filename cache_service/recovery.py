"""Start-up recovery: delete every cache an earlier process created and did
not see deleted (after a crash or kill -9 nothing is left on the provider
beyond its TTL, and usually not even that).

Journal records with a resource name are deleted through the cleanup
workers. Records with only an intent (the process died while a create was
in flight) are looked up by display name in the provider's list; a match is
deleted, no match means nothing was created. A provider that cannot be
reached or is not configured keeps its records for the next start.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass

from cache_service.domain.cleanup import Janitor
from cache_service.domain.ports import Journal, JournalRecord, Provider, ProviderError

log = logging.getLogger("agentctx.cache.recovery")


@dataclass(frozen=True)
class RecoveryReport:
    queued_deletes: int
    intents_cleared: int
    kept: int


async def recover(journal: Journal, providers: Mapping[str, Provider], janitor: Janitor) -> RecoveryReport:
    queued = cleared = kept = 0
    intents: dict[str, list[JournalRecord]] = {}
    for record in journal.pending():
        if record.provider not in providers:
            kept += 1
        elif record.name is not None:
            janitor.delete(record.provider, record.entry_id, record.name, "recovered")
            queued += 1
        else:
            intents.setdefault(record.provider, []).append(record)
    for provider_name, records in intents.items():
        named = providers[provider_name].named_caches
        if named is None:
            # Only NAMED providers journal their creates; nothing to look up.
            for record in records:
                await journal.deleted(record.entry_id)
                cleared += 1
            continue
        try:
            listed = {c.display_name: c for c in await named.list_caches()}
        except ProviderError as exc:
            log.warning("recovery could not list caches", extra={"provider": provider_name,
                                                                  "error_type": type(exc).__name__})
            kept += len(records)
            continue
        for record in records:
            found = listed.get(record.display_name)
            if found is not None:
                janitor.delete(provider_name, record.entry_id, found.name, "recovered")
                queued += 1
            else:
                await journal.deleted(record.entry_id)
                cleared += 1
    report = RecoveryReport(queued, cleared, kept)
    if queued or cleared or kept:
        log.info("journal recovered", extra={"queued_deletes": queued, "intents_cleared": cleared, "kept": kept})
    return report
