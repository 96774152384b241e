"""A per-process cache of sessions' measured compaction views.

Triggers are evaluated at every turn boundary, so reading and measuring a
session's whole visible history each time would cost O(history) per turn.
Events are immutable and append-only: a cached view is extended with the
events appended since, and rebuilt when the session was compacted or
re-created (by any replica; the store checks). Bounded by sessions and by
the bytes of the histories it holds, least recently used out first.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

from context_service.compaction.slices import measured
from context_service.domain.compaction_rules.history import History
from context_service.domain.compaction_rules.plan import CompactionPlan
from context_service.domain.compaction_rules.sizing import Measure
from context_service.domain.model import Event, SessionKey
from context_service.ports import CompactionStore

MAX_SESSIONS = 256
MAX_BYTES = 64 * 1024 * 1024


@dataclass(frozen=True, slots=True)
class View:
    history: History
    measures: tuple[Measure, ...]  # aligned with history.visible
    size: int  # bytes held, roughly


def _view(history: History, measures: tuple[Measure, ...]) -> View:
    return View(history, measures, sum(m.size for m in measures) + 256 * len(measures))


class Views:
    def __init__(self, source: CompactionStore, *, max_sessions: int = MAX_SESSIONS, max_bytes: int = MAX_BYTES) -> None:
        self._source = source
        self._max_sessions = max_sessions
        self._max_bytes = max_bytes
        self._entries: OrderedDict[SessionKey, View] = OrderedDict()
        self._bytes = 0

    async def load(self, key: SessionKey) -> View:
        cached = self._entries.get(key)
        known = cached.history if cached is not None else None
        history = await self._source.load_history(key, known)
        if cached is not None and _extends(history, cached.history):
            fresh = history.visible[len(cached.history.visible):]
            view = _view(history, cached.measures + await measured(fresh))
        else:
            view = _view(history, await measured(history.visible))
        self._put(key, view)
        return view

    def committed(self, key: SessionKey, plan: CompactionPlan, measures: tuple[Measure, ...], stored: Event) -> None:
        """The view right after ``stored`` committed ``plan``: its kept tail.
        The next load adds what was appended since the plan was read."""
        history = History(plan.kept, stored, plan.read_last_sequence, plan.generation)
        self._put(key, _view(history, measures[plan.cut.index :]))

    def forget(self, key: SessionKey) -> None:
        """Drops ``key``'s view (it is rebuilt on the next load)."""
        old = self._entries.pop(key, None)
        if old is not None:
            self._bytes -= old.size

    def _put(self, key: SessionKey, view: View) -> None:
        self.forget(key)
        if view.size > self._max_bytes:
            return
        self._entries[key] = view
        self._bytes += view.size
        while len(self._entries) > self._max_sessions or self._bytes > self._max_bytes:
            _, evicted = self._entries.popitem(last=False)
            self._bytes -= evicted.size


def _extends(history: History, cached: History) -> bool:
    """True when ``history`` is ``cached`` plus appended events (the store
    extends a known view with the very same event objects)."""
    n = len(cached.visible)
    return (
        history.latest_compaction is cached.latest_compaction
        and history.generation == cached.generation
        and len(history.visible) >= n
        and (n == 0 or history.visible[n - 1] is cached.visible[-1])
    )
