"""domain.memory without a server: query terms (never syntax), which events
become entries, and the checks of what a client sends."""

from __future__ import annotations

import re

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctx_common.errors import InvalidArgument
from context_service.domain.limits import Limits
from context_service.domain.memory import (
    MAX_LIMIT,
    MAX_QUERY_TERMS,
    MemoryKey,
    NewMemory,
    check_new_memory,
    entries_from_session,
    fts5_match,
    memory_text,
    query_terms,
    search_query,
)
from context_service.domain.model import Content, Event, EventKind, Part, SessionKey
from tests.sessions.helpers import call_event, text_event


@given(st.text())
def test_query_terms_are_words_only(query: str) -> None:
    terms = query_terms(query)
    assert len(terms) <= MAX_QUERY_TERMS and len(set(terms)) == len(terms)
    assert all(re.fullmatch(r"\w+", t) for t in terms)
    # Each term is one quoted FTS5 string, joined by OR.
    if terms:
        assert fts5_match(terms) == " OR ".join(f'"{t}"' for t in terms)


def test_stop_words_go_unless_nothing_else_is_left() -> None:
    assert query_terms("What is the capital of France?") == ("capital", "france")
    assert query_terms("Who is it?") == ("who", "is", "it")
    assert query_terms('gate" OR text:* NEAR((') == ("gate", "text", "near")


def test_user_and_model_text_become_entries() -> None:
    key = SessionKey("shop", "alice", "s1")
    thought = Event("e4", "model", Content("model", (Part(text="hmm", thought=True), Part(text="Sure."))))
    events = [
        text_event("e1", "  I like tea  "),
        text_event("e2", "Noted.", role="model"),
        call_event("e3"),
        thought,
        Event("e5", "system", Content("system", (Part(text="be nice"),))),
        Event("e6", "compactor", Content("user", (Part(text="summary"),)), kind=EventKind.COMPACTION),
    ]
    assert [memory_text(e) for e in events] == ["I like tea", "Noted.", "", "Sure.", "", ""]
    entries = entries_from_session(key, events, iter(["m1", "m2", "m3"]))
    assert [(e.key.memory_id, e.event_id, e.author, e.text) for e in entries] == [
        ("m1", "e1", "user", "I like tea"), ("m2", "e2", "model", "Noted."), ("m3", "e4", "model", "Sure."),
    ]
    assert {e.session_id for e in entries} == {"s1"}


def test_checks_name_every_bad_field() -> None:
    entry = NewMemory(MemoryKey("a", "u", "m"), "", {"": "x", "k": "v" * 2000}, event_id="e1")
    with pytest.raises(InvalidArgument) as info:
        check_new_memory(entry, Limits())
    assert [v.field for v in info.value.field_violations] == [
        "memory.text", "memory.metadata['']", "memory.metadata['k']", "memory.event_id",
    ]
    with pytest.raises(InvalidArgument) as info:
        search_query("a", "u", "...", {}, MAX_LIMIT + 1)
    assert [v.field for v in info.value.field_violations] == ["query", "limit"]
    assert search_query("a", "u", "tea", {}, 0).limit == 10
