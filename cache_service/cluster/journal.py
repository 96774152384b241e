"""The Journal port on Redis: the caches this replica created, owned by it.

- ``j:<owner>``: entry id -> record (provider, display name, expiry, and
  the resource name sealed with cluster.cipher once it is known).
- ``jo``: entry id -> owner, so whichever replica deletes a cache clears
  its record, whoever created it.
- ``hb:<owner>`` (kept alive by cluster.tier) says the owner lives; a
  replica whose heartbeat is gone has its records adopted by a live one.

``pending()`` is this process's own records (a mirror of its hash), as the
port's start-up recovery reads them; a new process is a new owner, and the
records of the one before it are adopted by cluster.tier.

Redis unreachable (cluster.guard): with a ``spill`` journal (a FileJournal
in the replica's ``data_dir``, ``registry-spill.jsonl``) the record goes
there instead, so a cache created while Redis is down is still known, after
a crash too (start-up recovery reads ``pending()``, spill included); a
delete that cannot reach Redis is remembered and sent later.
``reconcile_spill`` (run by cluster.tier once Redis answers) moves the
spilled records into Redis and has the caches no registry entry knows
deleted. Without a spill, a Redis failure is raised as OSError, the
journal's failure in the port's contract.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Awaitable, Callable, Mapping
from functools import partial

from redis.exceptions import RedisError

from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.client import RedisClient, Scripts
from cache_service.cluster.guard import RegistryGuard
from cache_service.cluster.names import Names
from cache_service.domain.model import ResourceName
from cache_service.domain.ports import Cleanup, JournalRecord, RegistryUnavailable
from cache_service.journal import FileJournal

log = logging.getLogger("agentctx.cache.journal")
SPILL_FILE = "registry-spill.jsonl"

# KEYS: owner index. ARGV: entry id, key prefix of journals
_DELETED = """
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner then redis.call('HDEL', ARGV[2] .. owner, ARGV[1]) end
redis.call('HDEL', KEYS[1], ARGV[1])
return owner and 1 or 0
"""

# KEYS: my journal, owner index, owners. ARGV: entry id, record, me
_PUT = """
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSET', KEYS[2], ARGV[1], ARGV[3])
redis.call('SADD', KEYS[3], ARGV[3])
return 1
"""

# KEYS: dead journal, my journal, owner index, owners, dead heartbeat. ARGV: dead owner, me
_ADOPT = """
if redis.call('EXISTS', KEYS[5]) == 1 then return false end
local recs = redis.call('HGETALL', KEYS[1])
for i = 1, #recs, 2 do
  redis.call('HSET', KEYS[2], recs[i], recs[i + 1])
  redis.call('HSET', KEYS[3], recs[i], ARGV[2])
end
redis.call('DEL', KEYS[1])
redis.call('SREM', KEYS[4], ARGV[1])
return recs
"""


class RedisJournal:
    def __init__(self, client: RedisClient, names: Names, cipher: NameCipher, owner: str, *,
                 guard: RegistryGuard | None = None, spill: FileJournal | None = None) -> None:
        self.owner = owner
        self._r = client
        self._n = names
        self._cipher = cipher
        self._g = guard or RegistryGuard(client, timeout_s=5.0, retry_s=1.0)
        self._spill = spill
        self._records: dict[str, JournalRecord] = {}
        self._unsent_deletes: set[str] = set()  # deletes Redis missed, sent by reconcile_spill
        self._scripts = Scripts(client, {"DELETED": _DELETED, "ADOPT": _ADOPT, "PUT": _PUT})

    def pending(self) -> list[JournalRecord]:
        spilled = self._spill.pending() if self._spill is not None else []
        return list({**self._records, **{r.entry_id: r for r in spilled}}.values())

    def spilled(self) -> int:
        return len(self._spill.pending()) if self._spill is not None else 0

    async def intent(self, entry_id: str, provider: str, display_name: str, expire_time: float) -> None:
        record = JournalRecord(entry_id, provider, display_name, expire_time)
        if not await self._write_or_spill(record):
            await self._spilling().intent(entry_id, provider, display_name, expire_time)
        self._records[entry_id] = record

    async def created(self, entry_id: str, name: ResourceName, expire_time: float) -> None:
        known = self._records.get(entry_id)
        provider, display = (known.provider, known.display_name) if known else ("", "")
        record = JournalRecord(entry_id, provider, display, expire_time, name)
        if self._is_spilled(entry_id) or not await self._write_or_spill(record):
            spill = self._spilling()
            if not self._is_spilled(entry_id):
                await spill.intent(entry_id, provider, display, expire_time)
            await spill.created(entry_id, name, expire_time)
        self._records[entry_id] = record

    async def deleted(self, entry_id: str) -> None:
        if self._spill is not None and self._is_spilled(entry_id):
            await self._spill.deleted(entry_id)
        try:
            await self._g.run(partial(self._forget, entry_id))
        except (RegistryUnavailable, RedisError) as exc:
            if self._spill is None:
                raise OSError("the journal in Redis is unreachable") from exc
            self._unsent_deletes.add(entry_id)
        self._records.pop(entry_id, None)

    async def close(self) -> None:
        if self._spill is not None:
            await self._spill.close()

    async def reconcile_spill(self, registered: Callable[[str], Awaitable[bool]], cleanup: Cleanup) -> int:
        """Moves spilled records into Redis (Redis answers again): a cache
        the registry holds stays; one it does not (its install failed while
        Redis was down) is deleted. Returns how many records moved. Raises
        RegistryUnavailable while Redis is still down."""
        for entry_id in list(self._unsent_deletes):
            await self._g.run(partial(self._forget, entry_id))
            self._unsent_deletes.discard(entry_id)
        if self._spill is None:
            return 0
        moved = 0
        for record in self._spill.pending():
            await self._g.run(partial(self._put, record))
            self._records[record.entry_id] = record
            await self._spill.deleted(record.entry_id)
            moved += 1
            if record.name is not None and not await registered(record.entry_id):
                cleanup.delete(record.provider, record.entry_id, record.name, "spilled")
        if moved:
            log.info("spilled journal records reconciled", extra={"records": moved})
        return moved

    async def adopt(self, dead: str) -> list[JournalRecord]:
        """Takes over the records of ``dead`` unless its heartbeat is back."""
        n = self._n
        reply = await self._scripts("ADOPT", [n.journal(dead), n.journal(self.owner), n.journal_owner, n.owners,
                                              n.heartbeat(dead)], [dead, self.owner])
        if not reply:
            return []
        adopted = [self._decode(reply[i].decode(), reply[i + 1]) for i in range(0, len(reply), 2)]
        for record in adopted:
            self._records[record.entry_id] = record
        return adopted

    def _is_spilled(self, entry_id: str) -> bool:
        return self._spill is not None and self._spill.holds(entry_id)

    def _spilling(self) -> FileJournal:
        if self._spill is None:
            raise OSError("the journal in Redis is unreachable")
        return self._spill

    async def _write_or_spill(self, record: JournalRecord) -> bool:
        """Writes the record to Redis; False when it must be spilled."""
        try:
            await self._g.run(lambda: self._put(record))
        except (RegistryUnavailable, RedisError) as exc:
            if self._spill is None:
                raise OSError("the journal in Redis is unreachable") from exc
            return False
        return True

    async def _forget(self, entry_id: str) -> None:
        await self._scripts("DELETED", [self._n.journal_owner], [entry_id, self._n.journal("")])

    async def _put(self, record: JournalRecord) -> None:
        n = self._n
        await self._scripts("PUT", [n.journal(self.owner), n.journal_owner, n.owners],
                            [record.entry_id, self._encode(record), self.owner])

    def _encode(self, r: JournalRecord) -> str:
        body: Mapping[str, object] = {"p": r.provider, "d": r.display_name, "x": r.expire_time,
                                      "n": self._cipher.seal(r.name, r.entry_id) if r.name is not None else None}
        return json.dumps(body, separators=(",", ":"))

    def _decode(self, entry_id: str, raw: bytes) -> JournalRecord:
        body = json.loads(raw)
        name = self._cipher.open(body["n"], entry_id) if body.get("n") else None
        return JournalRecord(entry_id, str(body["p"]), str(body["d"]), float(body["x"]), name)
