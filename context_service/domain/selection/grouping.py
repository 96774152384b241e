"""The filtered, unit-grouped history of one window.

Building it touches every visible event; everything after (budgets, the
fingerprints) works on units or on contiguous byte ranges. A caller that
keeps a history between requests (``building.history``) passes a memo
dict, so a warm request with the same filter skips the per-event work.
Histories only grow by appends, so the memo keeps, per window (first
position and filter), the grouped state of the longest prefix seen: a
request on a longer list of the same records extends it with the new
records only, and a request on a prefix (a turn leaving its own input out)
is served by the state of that prefix. A memo stays valid while its list
only grows; anything else (a trimmed or re-created history) needs a fresh
memo, or ``carried`` when the list grew.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from context_service.domain.config import EventFilter
from context_service.domain.selection.filters import predicate
from context_service.domain.selection.records import ContentRecord, EventRecord
from context_service.domain.selection.units import Grouper, Units

_DEFAULT_FILTER = EventFilter()
MEMO_LIMIT = 32
# Grouped prefixes kept per window: the whole history, and the history
# without a turn's own input.
_WINDOW_STATES = 2
# Pinned variants (one per set of input response ids) kept per state.
_VARIANTS = 8


class _Layout:
    """The pruned counts of one history's bodies, as prefix sums; extended
    by copying (a layout in use is never changed). The bodies' canonical
    bytes and digests are joined when asked for, from the position asked
    for (``Grouping.joined_from``): the fingerprints hash from saved
    states, so a build after an append asks only for the new bodies, and
    no copy of the whole history is made per append."""

    __slots__ = ("count", "pruned")
    count: int
    pruned: list[int]

    def __init__(self, bodies: Sequence[ContentRecord], base: _Layout | None = None) -> None:
        """``bodies``: the whole history's (``base`` laid out a prefix of them)."""
        if base is None:
            pruned, running, done = [0], 0, 0
        else:
            pruned, running, done = base.pruned.copy(), base.pruned[-1], base.count
        for b in bodies[done:]:
            running += b.secrets_pruned
            pruned.append(running)
        self.count = len(bodies)
        self.pruned = pruned  # prefix sums: pruned[i] covers bodies[:i]


class _LazyLayout:
    """A state's layout, made on first use from an older state's layout
    (when that one was made) and the bodies added since."""

    __slots__ = ("base", "bodies", "derived", "layout", "older")

    def __init__(self, bodies: list[ContentRecord], base: _Layout | None, older: dict[str, Any] | None) -> None:
        self.bodies = bodies
        self.base = base
        self.layout: _Layout | None = None
        # Values edges derive from the bodies (``Grouping.derive``), and the
        # older states' by name, to extend (this state's own dict: each is
        # let go once its name is derived here).
        self.derived: dict[str, Any] = {}
        self.older = older

    def get(self) -> _Layout:
        layout = self.layout
        if layout is None:
            layout = self.layout = _Layout(self.bodies, self.base)
            self.base = None
        return layout

    def known(self) -> _Layout | None:
        return self.layout if self.layout is not None else self.base


class _State:
    """A window's grouping of ``records[:upto]``; never changed once
    published (an extension is a copy)."""

    __slots__ = ("filtered", "grouper", "lazy", "seen", "tail", "upto", "variants")

    def __init__(self) -> None:
        self.grouper = Grouper()
        self.seen = 0
        self.filtered = 0
        self.upto = 0
        self.tail: EventRecord | None = None
        self.lazy = _LazyLayout(self.grouper.bodies, None, None)
        self.variants: dict[tuple[str, ...], Grouping] = {}

    def extended(self, records: Sequence[EventRecord], upto: int, start: int, keep: Any) -> _State:
        new = _State()
        if self.upto:
            new.grouper = self.grouper.copy()
            new.seen, new.filtered = self.seen, self.filtered
            lazy = self.lazy
            # Each derived value to extend: the newest made, per name (a
            # name derived on this state, else the one it was to extend).
            older = {**lazy.older, **lazy.derived} if lazy.older else dict(lazy.derived)
            new.lazy = _LazyLayout(new.grouper.bodies, lazy.known(), older or None)
        begin = max(start, self.upto)
        window = [r for r in records[begin:upto] if not r.is_compaction]
        if keep is None:
            candidates = [r for r in window if not r.partial and r.body is not None]
        else:
            candidates = [r for r in window if r.body is not None and keep(r)]
        new.grouper.add(candidates)
        new.seen += len(window)
        new.filtered += len(window) - len(candidates)
        new.upto = upto
        new.tail = records[upto - 1] if upto else None
        return new


class Grouping:
    __slots__ = ("_lazy", "filtered", "seen", "total", "units")

    def __init__(self, state: _State, units: Units) -> None:
        self._lazy = state.lazy  # not the state: no cycle through its variants
        self.seen = state.seen
        self.filtered = state.filtered + units.orphan_responses
        self.units = units
        self.total = sum(units.sizes)

    def joined_from(self, position: int) -> bytes:
        """Comma-joined canonical JSON of ``events[position:]``."""
        return b",".join([b.canonical for b in self._lazy.bodies[position:]])

    def pruned_from(self, position: int) -> int:
        """Secret keys pruned from ``events[position:]``."""
        pruned = self._lazy.get().pruned
        return pruned[-1] - pruned[min(position, len(pruned) - 1)]

    def derive(self, name: str, make: Callable[[Sequence[ContentRecord], Any], Any]) -> Any:
        """A value an edge derives from ``units.bodies`` (which pinning does
        not change), made once for all groupings of the same records:
        ``make(bodies, older)``, where ``older`` is the value made for a
        shorter history this one extends (or None), so that ``make`` only
        has to add what was appended."""
        lazy = self._lazy
        hit = lazy.derived.get(name)
        if hit is None:
            # Each name takes its own older value (this state's copy), so
            # deriving one name first leaves the others theirs to extend.
            older = lazy.older.pop(name, None) if lazy.older is not None else None
            hit = lazy.derived[name] = make(lazy.bodies, older)
        return hit

    def digests_from(self, position: int) -> bytes:
        """Concatenated SHA-256 digests of ``events[position:]``."""
        return b"".join([b.digest for b in self._lazy.bodies[position:]])


def _valid(state: _State, records: Sequence[EventRecord]) -> bool:
    """``state`` grouped a prefix of ``records`` (the same record objects)."""
    upto = state.upto
    return upto <= len(records) and (upto == 0 or records[upto - 1] is state.tail)


def grouping(
    records: Sequence[EventRecord],
    start: int,
    event_filter: EventFilter | None,
    input_ids: tuple[str, ...],
    memo: dict[Any, Any] | None = None,
) -> Grouping:
    """Visible events from ``records[start:]`` (compaction entries left
    out), filtered and grouped into units."""
    default = event_filter is None or event_filter == _DEFAULT_FILTER
    keep = None if default else predicate(event_filter)
    n = len(records)
    slot = ("grouping", start, None if default else event_filter)
    states: list[_State] | None = memo.get(slot) if memo is not None else None
    state: _State | None = None
    if states is not None:
        usable = [s for s in states if _valid(s, records)]
        state = max(usable, key=lambda s: s.upto, default=None)
    if state is None or state.upto != n:
        state = (state or _State()).extended(records, n, start, keep)
        if memo is not None:
            if states is None:
                if len(memo) >= MEMO_LIMIT:
                    memo.clear()
                states = memo[slot] = []
            states.append(state)
            del states[:-_WINDOW_STATES]
    hit = state.variants.get(input_ids)
    if hit is None:
        if len(state.variants) >= _VARIANTS:
            state.variants.clear()
        hit = state.variants[input_ids] = Grouping(state, state.grouper.units(input_ids))
    return hit


def carried(memo: dict[Any, Any]) -> dict[Any, Any]:
    """A memo for the same records after appends: the grouped states carry
    over (they are extended on use), and whatever callers keep under a key
    starting with "carried" (state they extend themselves); the rest does
    not."""
    return {k: v for k, v in memo.items() if isinstance(k, tuple) and k and k[0] in ("grouping", "carried")}
