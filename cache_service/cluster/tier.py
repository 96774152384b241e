"""Crash recovery for the tier (see docs/ARCHITECTURE.md, "Cache service").

Every replica keeps ``hb:<owner>`` alive (a key with a TTL of
``dead_after_s``) and, on a timer, looks for owners whose heartbeat is gone:
it adopts their journal (cluster.journal) in one script, then for each
record

- the registry still holds the entry: it stays served (adopted);
- it has a resource name: the cache is deleted (cleanup path);
- only an intent (the owner died mid-create): the provider's list is
  searched for its display name; a match is deleted, and the record is kept
  until its expiry so a create that lands late is still found.

Every pass first moves the records this replica spilled to its local file
while Redis was down into Redis (cluster.journal ``reconcile_spill``),
deleting the caches no entry knows. While Redis is unreachable both loops
skip their passes until the guard (cluster.guard) lets a step try it
again; the outage is logged once, by the guard.

Redis restarted empty (``epoch`` is gone): the replica that sets a new
epoch reconciles against the provider's list, deleting every cache whose
display name this service gives (``agentctx-<entry id>``) that no entry,
journal record or create of this process knows.
"""

from __future__ import annotations

import asyncio
import logging
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass

from redis.exceptions import RedisError

from cache_service.cluster.client import RedisClient
from cache_service.cluster.codec import text
from cache_service.cluster.guard import RegistryGuard, outage_cause
from cache_service.cluster.journal import RedisJournal
from cache_service.cluster.names import Names
from cache_service.domain.ports import Cleanup, Clock, JournalRecord, Provider, ProviderError, RegistryUnavailable

log = logging.getLogger("agentctx.cache.tier")
DISPLAY_NAME = re.compile(r"agentctx-([0-9a-f]{16})")


@dataclass
class TierReport:
    adopted: int = 0
    deleted: int = 0
    reconciled: int = 0
    spilled: int = 0  # spilled journal records moved into Redis


class TierKeeper:
    def __init__(self, client: RedisClient, names: Names, journal: RedisJournal, providers: Mapping[str, Provider],
                 cleanup: Cleanup, clock: Clock, *, heartbeat_s: float, dead_after_s: float, sweep_s: float,
                 guard: RegistryGuard | None = None) -> None:
        self._r = client
        self._g = guard or RegistryGuard(client, timeout_s=5.0, retry_s=1.0)
        self._n = names
        self._journal = journal
        self._providers = providers
        self._cleanup = cleanup
        self._clock = clock
        self._heartbeat_s = heartbeat_s
        self._dead_after_ms = int(dead_after_s * 1000)
        self._sweep_s = sweep_s
        self._epoch: str | None = None
        self._intents: dict[str, JournalRecord] = {}  # adopted intents still looked for
        self.report = TierReport()

    async def beat(self) -> None:
        async with self._r.pipeline(transaction=False) as pipe:  # one slot (cluster.names), order immaterial
            pipe.set(self._n.heartbeat(self._journal.owner), b"1", px=self._dead_after_ms)
            pipe.sadd(self._n.owners, self._journal.owner)
            await pipe.execute()

    async def heartbeat_forever(self) -> None:
        while True:
            try:
                await self._g.run(self.beat)
            except RegistryUnavailable:
                pass  # the guard logged the outage; beat again when it lets a step through
            except RedisError as exc:
                log.warning("heartbeat failed", extra={"error_type": type(exc).__name__})
            await asyncio.sleep(self._heartbeat_s)

    async def sweep_forever(self) -> None:
        while True:
            try:
                self._g.check()
                await self.sweep()
            except RegistryUnavailable:
                pass
            except (RedisError, ProviderError, OSError) as exc:
                if outage_cause(exc) is not None and not isinstance(exc, ProviderError):
                    self._g.failed(exc)  # logged once per outage
                else:
                    log.warning("tier sweep failed", extra={"error_type": type(exc).__name__})
            await asyncio.sleep(self._sweep_s)

    async def sweep(self) -> TierReport:
        """One pass: spilled records, a lost epoch, dead owners, intents still looked for."""
        self.report.spilled += await self._journal.reconcile_spill(self._registered, self._cleanup)
        await self._check_epoch()
        me = self._journal.owner
        for raw in await self._r.smembers(self._n.owners):
            owner = text(raw)
            if owner == me or await self._r.exists(self._n.heartbeat(owner)):
                continue
            records = await self._journal.adopt(owner)
            if records:
                log.info("dead replica's caches adopted", extra={"records": len(records)})
            for record in records:
                await self._settle(record)
        if self._intents:
            await self._look_for_intents()
        return self.report

    async def _registered(self, entry_id: str) -> bool:
        return bool(await self._g.run(lambda: self._r.exists(self._n.entry(entry_id))))

    async def _settle(self, record: JournalRecord) -> None:
        if await self._r.exists(self._n.entry(record.entry_id)):
            self.report.adopted += 1
        elif record.name is not None:
            self._cleanup.delete(record.provider, record.entry_id, record.name, "adopted")
            self.report.deleted += 1
        else:
            self._intents[record.entry_id] = record

    async def _look_for_intents(self) -> None:
        by_provider: dict[str, list[JournalRecord]] = {}
        for record in self._intents.values():
            by_provider.setdefault(record.provider, []).append(record)
        for name, records in by_provider.items():
            provider = self._providers.get(name)
            named = provider.named_caches if provider is not None else None
            if named is None:
                continue  # marked and automatic caches hold no resource to find
            listed = {c.display_name: c for c in await named.list_caches()}
            for record in records:
                found = listed.get(record.display_name)
                if found is not None:
                    self._cleanup.delete(name, record.entry_id, found.name, "adopted")
                    self.report.deleted += 1
                elif record.expire_time > self._clock.wall():
                    continue  # a create that lands late is still found
                else:
                    await self._journal.deleted(record.entry_id)
                del self._intents[record.entry_id]

    async def _check_epoch(self) -> None:
        raw = await self._r.get(self._n.epoch)
        current = text(raw) if raw is not None else None
        if current is not None and current == self._epoch:
            return
        if current is None:
            fresh = secrets.token_hex(8)
            if await self._r.set(self._n.epoch, fresh, nx=True):
                self._epoch = fresh
                await self.beat()
                await self.reconcile()
                return
            raw = await self._r.get(self._n.epoch)
            current = text(raw) if raw is not None else None
        self._epoch = current

    async def reconcile(self) -> int:
        """Deletes the provider's caches of this service that nothing in
        Redis (or this process's creates) knows."""
        creating = {r.entry_id for r in self._journal.pending() if r.name is None}
        deleted = 0
        for name, provider in self._providers.items():
            named = provider.named_caches
            if named is None:
                continue
            try:
                listed = await named.list_caches()
            except ProviderError as exc:
                log.warning("reconcile could not list caches", extra={"provider": name,
                                                                       "error_type": type(exc).__name__})
                continue
            for cache in listed:
                match = DISPLAY_NAME.fullmatch(cache.display_name)
                if match is None or match.group(1) in creating or await self._known(match.group(1)):
                    continue
                self._cleanup.delete(name, match.group(1), cache.name, "reconciled")
                deleted += 1
        self.report.reconciled += deleted
        if deleted:
            log.info("orphan caches reconciled", extra={"deleted": deleted})
        return deleted

    async def _known(self, entry_id: str) -> bool:
        async with self._r.pipeline(transaction=False) as pipe:  # two slots
            pipe.exists(self._n.entry(entry_id))
            pipe.hexists(self._n.journal_owner, entry_id)
            entry, journaled = await pipe.execute()
        return bool(entry) or bool(journaled)
