"""agentctx_adk._event_cache (the events AgentCtxSessionService keeps
between reads) without a server; run in the ADK venv by test_adk_units.py."""

from __future__ import annotations

from agentctx_adk import _convert
from agentctx_adk._event_cache import EventCache

from agentctx.context.v1 import session_pb2
from agentctx.type.v1 import content_pb2, event_pb2


def session(last_sequence: int = 0, created: int = 100) -> session_pb2.Session:
    out = session_pb2.Session(last_sequence=last_sequence)
    out.create_time.FromSeconds(created)
    return out


def stored(sequence: int) -> event_pb2.Event:
    event = event_pb2.Event(id=f"e{sequence}", author="user", sequence=sequence, content=content_pb2.Content(
        role="user", parts=[content_pb2.Part(text=f"message {sequence}")]))
    event.create_time.FromSeconds(1000 + sequence)
    return event


def listed(*sequences: int) -> list[tuple[int, str]]:
    return [(n, _convert.event_json(stored(n))) for n in sequences]


def kept(cache: EventCache, name: str, last_sequence: int) -> list[int] | None:
    history = cache.valid(name, session(last_sequence))
    return None if history is None else [n for n, _ in history.events]


def sizes_add_up(cache: EventCache) -> bool:
    return cache.size == sum(h.size for h in cache._histories.values()) == sum(
        len(j) for h in cache._histories.values() for _, j in h.events)


def test_reads_and_appends_extend_a_history() -> None:
    cache = EventCache(8, 1 << 20)
    cache.extend("s", session(2), 0, listed(1, 2))
    cache.appended("s", stored(3))
    assert kept(cache, "s", 3) == [1, 2, 3]
    cache.extend("s", session(5), 3, listed(4, 5))
    assert kept(cache, "s", 5) == [1, 2, 3, 4, 5] and sizes_add_up(cache)
    assert cache._histories["s"].events[0][1] == _convert.event_json(stored(1))


def test_a_history_that_no_longer_holds_is_dropped() -> None:
    cache = EventCache(8, 1 << 20)
    cache.extend("s", session(2), 0, listed(1, 2))
    assert kept(cache, "s", 1) is None, "storage behind the history: another session"
    cache.extend("s", session(2), 0, listed(1, 2))
    assert cache.valid("s", session(2, created=200)) is None, "made again under the same name"
    assert cache.size == 0


def test_only_what_follows_the_history_is_kept() -> None:
    cache = EventCache(8, 1 << 20)
    cache.started("s", session())
    cache.appended("s", stored(2))  # 1 was someone else's (or a compaction record)
    assert kept(cache, "s", 2) == []
    cache.extend("s", session(4), 3, listed(4))  # a read that started before another one extended
    assert kept(cache, "s", 4) == []
    cache.extend("t", session(2), 1, listed(2))  # not from the first event, and nothing kept yet
    assert kept(cache, "t", 2) is None and sizes_add_up(cache)


def test_least_recently_used_sessions_go_first() -> None:
    cache = EventCache(2, 1 << 20)
    for name in ("a", "b"):
        cache.extend(name, session(1), 0, listed(1))
    assert kept(cache, "a", 1) == [1]  # "a" used last
    cache.extend("c", session(1), 0, listed(1))
    assert set(cache._histories) == {"a", "c"} and sizes_add_up(cache)


def test_the_byte_budget_drops_sessions_and_a_session_above_it_is_not_kept() -> None:
    one = len(listed(1)[0][1])
    cache = EventCache(8, 3 * one)
    cache.extend("a", session(2), 0, listed(1, 2))
    cache.extend("b", session(1), 0, listed(1))
    assert set(cache._histories) == {"a", "b"}
    cache.appended("b", stored(2))
    assert set(cache._histories) == {"b"} and sizes_add_up(cache)
    cache.extend("c", session(4), 0, listed(1, 2, 3, 4))
    assert "c" not in cache._histories and sizes_add_up(cache)


def test_no_sessions_keeps_nothing() -> None:
    cache = EventCache(0, 1 << 20)
    cache.started("s", session())
    cache.extend("s", session(1), 0, listed(1))
    cache.appended("s", stored(2))
    assert cache.valid("s", session(2)) is None and cache.size == 0
