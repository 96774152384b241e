"""A small local journal of the provider caches this service created, so a
restart after a crash (or kill -9) finds them and deletes them.

An append-only JSONL file, ``<data_dir>/cache-journal.jsonl``, mode 0600,
fsynced after every record:

- ``intent``: written before a create is sent (entry id, provider, the
  display name the cache carries, its expiry); a crash before the answer
  leaves only this, and recovery finds the cache by display name.
- ``created``: the answer arrived; holds the resource name. The file is
  therefore as secret as the resource names themselves: it stays inside the
  cache service's data directory and is never logged or returned.
- ``deleted``: the cache is gone (deleted, expired, or never created).

On open, a torn last line (a crash mid-write) is ignored, and the file is
rewritten with only the records still pending; it is also rewritten every
512 records and emptied whenever nothing is pending. ``pending()`` lists
the pending records.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import pathlib

from agentctx_common.files import PRIVATE_DIR, PRIVATE_FILE, make_dir, open_append
from cache_service.domain.model import ResourceName
from cache_service.domain.ports import JournalRecord

log = logging.getLogger("agentctx.cache.journal")
FILE_NAME = "cache-journal.jsonl"
_COMPACT_EVERY = 512


class FileJournal:
    def __init__(self, data_dir: pathlib.Path, file_name: str = FILE_NAME) -> None:
        self.path = pathlib.Path(data_dir) / file_name
        self._records: dict[str, JournalRecord] = {}
        self._lock = asyncio.Lock()
        self._appends = 0
        self._file: int | None = None

    @classmethod
    async def open(cls, data_dir: pathlib.Path, file_name: str = FILE_NAME) -> FileJournal:
        journal = cls(data_dir, file_name)
        await asyncio.to_thread(journal._load_and_compact)
        return journal

    def pending(self) -> list[JournalRecord]:
        return list(self._records.values())

    def holds(self, entry_id: str) -> bool:
        return entry_id in self._records

    async def intent(self, entry_id: str, provider: str, display_name: str, expire_time: float) -> None:
        self._records[entry_id] = JournalRecord(entry_id, provider, display_name, expire_time)
        await self._append({"op": "intent", "id": entry_id, "provider": provider, "display_name": display_name,
                            "expire": expire_time})

    async def created(self, entry_id: str, name: ResourceName, expire_time: float) -> None:
        known = self._records.get(entry_id)
        provider, display = (known.provider, known.display_name) if known else ("", "")
        self._records[entry_id] = JournalRecord(entry_id, provider, display, expire_time, name)
        await self._append({"op": "created", "id": entry_id, "provider": provider, "display_name": display,
                            "name": name.reveal(), "expire": expire_time})

    async def deleted(self, entry_id: str) -> None:
        if self._records.pop(entry_id, None) is None:
            return
        await self._append({"op": "deleted", "id": entry_id})
        if not self._records:
            # Nothing pending: keep no resource names on disk longer than needed.
            async with self._lock:
                if not self._records:
                    await asyncio.to_thread(self._rewrite, [])

    async def close(self) -> None:
        async with self._lock:
            if self._file is not None:
                os.close(self._file)
                self._file = None

    # --- file work (in a thread) ---------------------------------------------------

    async def _append(self, record: dict[str, object]) -> None:
        line = (json.dumps(record, separators=(",", ":")) + "\n").encode()
        async with self._lock:
            await asyncio.to_thread(self._write, line)
            self._appends += 1
            if self._appends >= _COMPACT_EVERY:
                self._appends = 0
                await asyncio.to_thread(self._rewrite, list(self._records.values()))

    def _write(self, line: bytes) -> None:
        if self._file is None:
            self._file = open_append(self.path, PRIVATE_FILE)
        os.write(self._file, line)
        os.fsync(self._file)

    def _load_and_compact(self) -> None:
        # A new directory (and its new parents) 0700 whatever the umask; an
        # existing one is the operator's.
        make_dir(self.path.parent, PRIVATE_DIR, tighten=False)
        if self.path.exists():
            torn = 0
            for raw in self.path.read_bytes().splitlines():
                try:
                    self._apply(json.loads(raw))
                except (ValueError, KeyError, TypeError):
                    torn += 1
            if torn:
                log.warning("journal lines skipped", extra={"count": torn})
        self._rewrite(list(self._records.values()))

    def _apply(self, record: dict[str, object]) -> None:
        entry_id = str(record["id"])
        op = record["op"]
        if op == "deleted":
            self._records.pop(entry_id, None)
            return
        name = record.get("name")
        self._records[entry_id] = JournalRecord(
            entry_id, str(record.get("provider", "")), str(record.get("display_name", "")),
            float(record.get("expire", 0.0)),  # type: ignore[arg-type]
            ResourceName(str(name)) if name else None,
        )

    def _rewrite(self, records: list[JournalRecord]) -> None:
        """Atomically replaces the file with the pending records only."""
        if self._file is not None:
            os.close(self._file)
            self._file = None
        tmp = self.path.with_suffix(".tmp")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, PRIVATE_FILE)
        try:
            os.fchmod(fd, PRIVATE_FILE)  # a leftover .tmp keeps its mode through O_TRUNC
            for r in records:
                row: dict[str, object] = {"op": "created" if r.name else "intent", "id": r.entry_id,
                                          "provider": r.provider, "display_name": r.display_name,
                                          "expire": r.expire_time}
                if r.name is not None:
                    row["name"] = r.name.reveal()
                os.write(fd, (json.dumps(row, separators=(",", ":")) + "\n").encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)
