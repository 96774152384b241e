"""Contents already converted and hashed, keyed by their proto bytes.

An agent resends its whole conversation every turn, twice (AcquireLease,
then GenerateContent), so converting and hashing every content each time
costs linear work per call for what is, after the first turn, almost all
old. The memo maps a content's serialized proto bytes to its
``CanonicalContent`` (canonical dict, canonical bytes, digest): a call
cuts each content's bytes out of the request as it arrived (or out of
its serialization, without those) and converts and hashes only the
contents it has not seen.

The key is the exact byte string (the dict compares it in full on a hash
match), so two contents share an entry only when their bytes are equal,
and equal bytes parse to the same content: a hit can never return another
content's digest. Only contents that passed the input checks are stored,
so a hit is also known valid.

Memory is bounded by ``budget_bytes``: each entry is charged what it holds
(its key, its canonical bytes, the Python objects of its dict measured at
insertion, and a fixed allowance for digests, memoized hash state and the
table's own node), and the least recently used go first. A budget of 0
turns the memo off (contents are still converted once per call).

Runs: the contents of a call end to end, a view of the bytes they were cut
from (``convert._contents``: the request as received, kept whole and
charged whole, rather than a copy of most of it), keyed by the first
content's key, with the keys.
A conversation's next call starts with the same bytes: found equal in one
comparison, its keys and contents are taken as they are, with no scan
or look-up of them (a call
at a thousand contents spends most of its conversion there). A run is
only kept when every one of its contents is in the memo, is charged its
bytes, and the runs are dropped (before any entry) when the memo is over
its budget, and all of them whenever an entry goes, so a run never keeps
a content the memo let go alive.
"""

from __future__ import annotations

import sys
from collections import OrderedDict
from typing import Any

from cache_service.domain.keys import CanonicalContent

# Digest (65), chain link (tuple and digest, ~190), memoized hash state
# (tuple, digest, hasher and OpenSSL context, ~450), the table's node and
# slot (~150): an upper allowance, checked with tracemalloc in
# tests/cache/test_digests_memory.py.
ENTRY_OVERHEAD_BYTES = 1024
# Runs kept (one per live conversation, about), and each one's fixed
# allowance beyond its bytes and a pointer per key.
MAX_RUNS = 64
RUN_OVERHEAD_BYTES = 256


def _json_size(value: Any) -> int:
    # Iterative: content JSON can nest as deep as the request allows.
    size, stack = 0, [value]
    while stack:
        v = stack.pop()
        size += sys.getsizeof(v)
        if isinstance(v, dict):
            stack.extend(v.keys())
            stack.extend(v.values())
        elif isinstance(v, list):
            stack.extend(v)
    return size


def entry_cost(key: bytes, content: CanonicalContent) -> int:
    return sys.getsizeof(key) + sys.getsizeof(content.canonical) + _json_size(content) + ENTRY_OVERHEAD_BYTES


class ContentMemo:
    def __init__(self, budget_bytes: int) -> None:
        self.budget_bytes = budget_bytes
        self.bytes = 0
        self.hits = 0
        self.misses = 0
        self.evicted = 0  # entries let go, ever
        self._entries: OrderedDict[bytes, tuple[CanonicalContent, int]] = OrderedDict()
        # first key -> (the contents' bytes end to end, their keys, the contents, cost)
        self._runs: OrderedDict[bytes, tuple[memoryview, list[bytes], tuple[CanonicalContent, ...], int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def get(self, key: bytes) -> CanonicalContent | None:
        found = self._entries.get(key)
        if found is None:
            self.misses += 1
            return None
        self._entries.move_to_end(key)
        self.hits += 1
        return found[0]

    def get_many(self, keys: list[bytes]) -> list[CanonicalContent | None]:
        """``get`` for each key, in one call (one per request, not per content)."""
        entries = self._entries
        find, touch = entries.get, entries.move_to_end
        out: list[CanonicalContent | None] = []
        append = out.append
        for key in keys:
            found = find(key)
            if found is None:
                append(None)
            else:
                touch(key)
                append(found[0])
        missed = out.count(None)
        self.misses += missed
        self.hits += len(out) - missed
        return out

    def put(self, key: bytes, content: CanonicalContent) -> bool:
        """Memoizes ``content``; False when it is not held (no budget, or
        over the whole budget alone)."""
        if not self.budget_bytes:
            return False
        if key in self._entries:
            return True
        cost = entry_cost(key, content)
        if cost > self.budget_bytes:
            return False
        self._entries[key] = (content, cost)
        self.bytes += cost
        self._shrink()
        return True

    def run(self, first: bytes) -> tuple[memoryview, list[bytes], tuple[CanonicalContent, ...]] | None:
        """The run whose first content's key is ``first``: its bytes, its
        keys and its contents (every one held: runs go before any entry)."""
        found = self._runs.get(first)
        if found is None:
            return None
        self._runs.move_to_end(first)
        return found[0], found[1], found[2]

    def touch(self, keys: list[bytes]) -> None:
        """Hits on held keys (a run's) without looking their contents up."""
        touch = self._entries.move_to_end
        for key in keys:
            touch(key)
        self.hits += len(keys)

    def keep_run(self, region: memoryview, keys: list[bytes], contents: tuple[CanonicalContent, ...]) -> None:
        """Keeps a run (replacing the one with the same first key); every key
        must be held (``get_many`` found it or ``put`` returned True, and
        ``evicted`` has not moved since). ``region`` is a view of the bytes
        it was cut from, which the run keeps (and is charged) whole."""
        if not keys or not self.budget_bytes:
            return
        cost = sys.getsizeof(region.obj) + 16 * len(keys) + RUN_OVERHEAD_BYTES
        if cost > self.budget_bytes // 4:
            return
        old = self._runs.pop(keys[0], None)
        if old is not None:
            self.bytes -= old[3]
        self._runs[keys[0]] = (region, keys, contents, cost)
        self.bytes += cost
        if len(self._runs) > MAX_RUNS:
            self.bytes -= self._runs.popitem(last=False)[1][3]
        self._shrink()

    def _shrink(self) -> None:
        """Over the budget: runs go first, then entries, least recently
        used first (and with the first entry, every run)."""
        while self.bytes > self.budget_bytes and self._runs:
            self.bytes -= self._runs.popitem(last=False)[1][3]
        while self.bytes > self.budget_bytes:
            _, (_, old_cost) = self._entries.popitem(last=False)
            self.bytes -= old_cost
            self.evicted += 1
