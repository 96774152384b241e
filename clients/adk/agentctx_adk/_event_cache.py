"""The ADK events of recently used sessions, so that get_session reads only
the events stored since the last read (ADK's Runner reads the whole session
at the start of every invocation).

Stored events never change: agentctx removes them only with their session,
and a session made again under the same name has another create_time. So a
session's history read up to sequence N stays true, and a later read asks
the context service only for events after N (``ListEvents.after_sequence``).
Each event is kept as ADK's JSON and validated afresh on every read, so
callers never share (and cannot mutate) one another's Event objects, as
with ADK's DatabaseSessionService. Bounded by a count of sessions and by
the bytes of JSON kept, least recently used dropped first.
"""

from __future__ import annotations

import collections
from dataclasses import dataclass, field

from google.protobuf import timestamp_pb2

from agentctx.context.v1 import session_pb2
from agentctx.type.v1 import event_pb2
from agentctx_adk import _convert


@dataclass
class History:
    """A session's events up to ``last_sequence``, as (sequence, ADK JSON)."""

    created: tuple[int, int]
    last_sequence: int = 0
    events: list[tuple[int, str]] = field(default_factory=list)
    size: int = 0  # bytes of JSON in ``events``


def _created(stamp: timestamp_pb2.Timestamp) -> tuple[int, int]:
    return stamp.seconds, stamp.nanos


class EventCache:
    def __init__(self, max_sessions: int, max_bytes: int) -> None:
        self.max_sessions = max_sessions
        self.max_bytes = max_bytes
        self.size = 0
        self._histories: collections.OrderedDict[str, History] = collections.OrderedDict()

    def valid(self, name: str, session: session_pb2.Session) -> History | None:
        """The kept history of ``session`` as just read, if it still holds."""
        history = self._histories.get(name)
        if history is None:
            return None
        if history.created != _created(session.create_time) or history.last_sequence > session.last_sequence:
            self.drop(name)  # another session under the same name
            return None
        self._histories.move_to_end(name)
        return history

    def started(self, name: str, session: session_pb2.Session) -> None:
        """A session just created (or read from its first event on)."""
        self._put(name, History(_created(session.create_time)))

    def extend(self, name: str, session: session_pb2.Session, after: int, events: list[tuple[int, str]]) -> None:
        """``events``, read after sequence ``after`` up to the session's
        last_sequence; kept only if nothing else extended the history
        meanwhile (a concurrent read of the same session)."""
        history = self._histories.get(name)
        if history is None:
            if after != 0:
                return
            history = History(_created(session.create_time))
            self._put(name, history)
            if self._histories.get(name) is not history:
                return  # nothing is kept
        elif history.last_sequence != after or history.created != _created(session.create_time):
            return
        self._grow(history, events)
        history.last_sequence = session.last_sequence
        self._bound()

    def appended(self, name: str, stored: event_pb2.Event) -> None:
        """An event this process appended, as the context service stored it;
        kept when it directly follows the history (no one else's events,
        nor a compaction record, in between)."""
        history = self._histories.get(name)
        if history is not None and stored.sequence == history.last_sequence + 1:
            self._grow(history, [(stored.sequence, _convert.event_json(stored))])
            history.last_sequence = stored.sequence
            self._bound()

    def drop(self, name: str) -> None:
        history = self._histories.pop(name, None)
        if history is not None:
            self.size -= history.size

    def _grow(self, history: History, events: list[tuple[int, str]]) -> None:
        added = sum(len(j) for _, j in events)
        history.events.extend(events)
        history.size += added
        self.size += added

    def _put(self, name: str, history: History) -> None:
        if self.max_sessions <= 0:
            return
        self.drop(name)
        self._histories[name] = history
        self.size += history.size
        self._bound()

    def _bound(self) -> None:
        while self._histories and (len(self._histories) > self.max_sessions or self.size > self.max_bytes):
            self.drop(next(iter(self._histories)))
