"""The Journal port on Redis: the caches this replica created, owned by it.

- ``j:<owner>``: entry id -> record (provider, display name, expiry, and
  the resource name sealed with cluster.cipher once it is known).
- ``jo``: entry id -> owner, so whichever replica deletes a cache clears
  its record, whoever created it.
- ``hb:<owner>`` (kept alive by cluster.tier) says the owner lives; a
  replica whose heartbeat is gone has its records adopted by a live one.

``pending()`` is this process's own records (a mirror of its hash), as the
port's start-up recovery reads them; a new process is a new owner, and the
records of the one before it are adopted by cluster.tier. A Redis failure
is raised as OSError, the journal's failure in the port's contract.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

import redis.asyncio as aioredis
from redis.exceptions import RedisError

from cache_service.cluster.cipher import NameCipher
from cache_service.cluster.names import Names
from cache_service.domain.model import ResourceName
from cache_service.domain.ports import JournalRecord

# KEYS: owner index. ARGV: entry id, key prefix of journals
_DELETED = """
local owner = redis.call('HGET', KEYS[1], ARGV[1])
if owner then redis.call('HDEL', ARGV[2] .. owner, ARGV[1]) end
redis.call('HDEL', KEYS[1], ARGV[1])
return owner and 1 or 0
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
    def __init__(self, client: aioredis.Redis, names: Names, cipher: NameCipher, owner: str) -> None:
        self.owner = owner
        self._r = client
        self._n = names
        self._cipher = cipher
        self._records: dict[str, JournalRecord] = {}
        self._deleted = client.register_script(_DELETED)
        self._adopt = client.register_script(_ADOPT)

    def pending(self) -> list[JournalRecord]:
        return list(self._records.values())

    async def intent(self, entry_id: str, provider: str, display_name: str, expire_time: float) -> None:
        record = JournalRecord(entry_id, provider, display_name, expire_time)
        await self._write(record)
        self._records[entry_id] = record

    async def created(self, entry_id: str, name: ResourceName, expire_time: float) -> None:
        known = self._records.get(entry_id)
        provider, display = (known.provider, known.display_name) if known else ("", "")
        record = JournalRecord(entry_id, provider, display, expire_time, name)
        await self._write(record)
        self._records[entry_id] = record

    async def deleted(self, entry_id: str) -> None:
        try:
            await self._deleted(keys=[self._n.journal_owner], args=[entry_id, self._n.journal("")])
        except RedisError as exc:
            raise OSError("the journal in Redis is unreachable") from exc
        self._records.pop(entry_id, None)

    async def close(self) -> None:
        return None

    async def adopt(self, dead: str) -> list[JournalRecord]:
        """Takes over the records of ``dead`` unless its heartbeat is back."""
        n = self._n
        reply = await self._adopt(keys=[n.journal(dead), n.journal(self.owner), n.journal_owner, n.owners,
                                        n.heartbeat(dead)], args=[dead, self.owner])
        if not reply:
            return []
        adopted = [self._decode(reply[i].decode(), reply[i + 1]) for i in range(0, len(reply), 2)]
        for record in adopted:
            self._records[record.entry_id] = record
        return adopted

    async def _write(self, record: JournalRecord) -> None:
        try:
            async with self._r.pipeline(transaction=True) as pipe:
                pipe.hset(self._n.journal(self.owner), record.entry_id, self._encode(record))
                pipe.hset(self._n.journal_owner, record.entry_id, self.owner)
                pipe.sadd(self._n.owners, self.owner)
                await pipe.execute()
        except RedisError as exc:
            raise OSError("the journal in Redis is unreachable") from exc

    def _encode(self, r: JournalRecord) -> str:
        body: Mapping[str, object] = {"p": r.provider, "d": r.display_name, "x": r.expire_time,
                                      "n": self._cipher.seal(r.name, r.entry_id) if r.name is not None else None}
        return json.dumps(body, separators=(",", ":"))

    def _decode(self, entry_id: str, raw: bytes) -> JournalRecord:
        body = json.loads(raw)
        name = self._cipher.open(body["n"], entry_id) if body.get("n") else None
        return JournalRecord(entry_id, str(body["p"]), str(body["d"]), float(body["x"]), name)
