"""Contents already converted and hashed, keyed by their proto bytes.

An agent resends its whole conversation every turn, twice (AcquireLease,
then GenerateContent), so converting and hashing every content each time
costs linear work per call for what is, after the first turn, almost all
old. The memo maps a content's serialized proto bytes to its
``CanonicalContent`` (canonical dict, canonical bytes, digest): a call
serializes each content (C code, no canonicalization) and converts and
hashes only the contents it has not seen.

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
        self._entries: OrderedDict[bytes, tuple[CanonicalContent, int]] = OrderedDict()

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

    def put(self, key: bytes, content: CanonicalContent) -> None:
        if not self.budget_bytes or key in self._entries:
            return
        cost = entry_cost(key, content)
        if cost > self.budget_bytes:
            return
        self._entries[key] = (content, cost)
        self.bytes += cost
        while self.bytes > self.budget_bytes:
            _, (_, old_cost) = self._entries.popitem(last=False)
            self.bytes -= old_cost
