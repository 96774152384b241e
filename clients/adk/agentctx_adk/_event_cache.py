"""The ADK events of recently used sessions, so that get_session reads only
the events stored since the last read (ADK's Runner reads the whole session
at the start of every invocation).

Stored events never change: agentctx removes them only with their session,
and a session made again under the same name has another create_time. So a
session's history read up to sequence N stays true, and a later read asks
the context service only for events after N (``ListEvents.after_sequence``).
Each event is kept as ADK's JSON and validated afresh on every read, so
callers never share (and cannot mutate) one another's Event objects, as
with ADK's DatabaseSessionService. Bounded by a count of sessions, least
recently used dropped first.
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


def _created(stamp: timestamp_pb2.Timestamp) -> tuple[int, int]:
    return stamp.seconds, stamp.nanos


class EventCache:
    def __init__(self, max_sessions: int) -> None:
        self.max_sessions = max_sessions
        self._histories: collections.OrderedDict[str, History] = collections.OrderedDict()

    def valid(self, name: str, session: session_pb2.Session) -> History | None:
        """The kept history of ``session`` as just read, if it still holds."""
        history = self._histories.get(name)
        if history is None:
            return None
        if history.created != _created(session.create_time) or history.last_sequence > session.last_sequence:
            del self._histories[name]  # another session under the same name
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
        elif history.last_sequence != after or history.created != _created(session.create_time):
            return
        history.events.extend(events)
        history.last_sequence = session.last_sequence

    def appended(self, name: str, stored: event_pb2.Event) -> None:
        """An event this process appended, as the context service stored it;
        kept when it directly follows the history (no one else's events,
        nor a compaction record, in between)."""
        history = self._histories.get(name)
        if history is not None and stored.sequence == history.last_sequence + 1:
            history.events.append((stored.sequence, _convert.event_json(stored)))
            history.last_sequence = stored.sequence

    def drop(self, name: str) -> None:
        self._histories.pop(name, None)

    def _put(self, name: str, history: History) -> None:
        if self.max_sessions <= 0:
            return
        self._histories[name] = history
        self._histories.move_to_end(name)
        while len(self._histories) > self.max_sessions:
            self._histories.popitem(last=False)
