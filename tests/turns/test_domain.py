"""The pure rules of a turn (context_service.domain.turn_rules)."""

from __future__ import annotations

import datetime as dt

from hypothesis import given
from hypothesis import strategies as st

from agentctx_common.errors import DeadlineExceeded, InvalidArgument, Unavailable
from context_service.domain import turn_rules
from context_service.domain.limits import Limits
from context_service.domain.model import CacheInfo, CacheState, Content, Event, FunctionCall, Part, Usage

NOW = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
LIMITS = Limits()


def _user(event_id: str, text: str = "hi") -> Event:
    return Event(id=event_id, author="user", content=Content("user", (Part(text=text),)))


def test_turn_ids_are_derived_from_the_inputs_and_stable() -> None:
    a = turn_rules.turn_ids(["e1", "e2"])
    assert a == turn_rules.turn_ids(["e1", "e2"])
    assert a != turn_rules.turn_ids(["e1"]) and a != turn_rules.turn_ids(["e2", "e1"])
    assert turn_rules.turn_ids(["e1", "e2"], invocation_id="inv", reply_id="r") == turn_rules.TurnIds("inv", "r")
    assert LIMITS.valid_id(a.reply_id)


@given(st.text(alphabet="abc.-_:0123456789", min_size=1, max_size=128), st.integers(0, 10_000))
def test_derived_ids_stay_valid_ids(reply_id: str, index: int) -> None:
    for derived in (turn_rules.partial_id(reply_id, index), turn_rules.call_id(reply_id, index)):
        assert 1 <= len(derived) <= turn_rules.MAX_ID_CHARS
        assert LIMITS.valid_id(derived)
    assert turn_rules.partial_id(reply_id, index) != turn_rules.partial_id(reply_id, index + 1)


texts = st.lists(st.text(min_size=1, max_size=8), min_size=1, max_size=8)


@given(texts, texts)
def test_merged_chunks_keep_every_text_and_every_call_in_order(before: list[str], after: list[str]) -> None:
    call = Part(function_call=FunctionCall("", "lookup", {"q": "x"}))
    chunks = [Content("model", (Part(text=t),)) for t in before] + [Content("model", (call,))]
    chunks += [Content("model", (Part(text=t),)) for t in after]
    merged = turn_rules.merge_chunks(chunks)
    assert merged.role == "model"
    assert [p.text for p in merged.parts] == ["".join(before), None, "".join(after)]
    assert merged.parts[1] == call


def test_thoughts_and_answers_are_merged_apart() -> None:
    chunks = [
        Content("model", (Part(text="think ", thought=True),)),
        Content("model", (Part(text="more", thought=True, thought_signature=b"sig"),)),
        Content("model", (Part(text="answer"),)),
    ]
    merged = turn_rules.merge_chunks(chunks)
    assert merged.parts == (Part(text="think more", thought=True, thought_signature=b"sig"), Part(text="answer"))


def test_reply_event_names_calls_and_leaves_the_turn_open_for_tools() -> None:
    ids = turn_rules.TurnIds("inv", "r1")
    answer = turn_rules.ModelAnswer(
        content=Content("", (Part(function_call=FunctionCall("", "a")), Part(function_call=FunctionCall("given", "b")))),
        usage=Usage(prompt_tokens=10), cache=CacheInfo(), finish_reason="STOP", model_version="m-1",
    )
    event = turn_rules.reply_event(answer, ids, author="", branch="root.x")
    assert event.id == "r1" and event.author == "model" and event.invocation_id == "inv" and event.branch == "root.x"
    assert [c.id for c in event.content.function_calls] == ["r1.call0", "given"]
    assert event.content.role == "model"
    assert not event.turn_complete
    assert (event.finish_reason, event.model_version) == ("STOP", "m-1")
    assert event.custom_metadata is None, "reply fields are fields, not client metadata"
    text = turn_rules.ModelAnswer(Content("model", (Part(text="done"),)), None, CacheInfo())
    assert turn_rules.reply_event(text, ids, author="planner", branch="").turn_complete


def test_only_a_model_reply_counts_as_the_stored_reply() -> None:
    reply = Event(id="r", author="model", content=Content("model", (Part(text="x"),)))
    assert turn_rules.is_reply(reply)
    assert not turn_rules.is_reply(_user("r"))
    assert not turn_rules.is_reply(Event(id="r", author="model", content=reply.content, partial=True))


def test_input_violations() -> None:
    ok = [_user("a"), _user("b")]
    assert turn_rules.input_violations(ok, [10, 10], LIMITS, now=NOW, reply_id="r", agent="planner") == []
    partial = Event(id="p", author="user", content=Content("user", (Part(text="x"),)), partial=True)
    cases = {
        "input": ([], []),
        "input[1].id": ([_user("a"), _user("a")], [1, 1]),
        "input[0].partial": ([partial], [1]),
        "input[0].author": ([Event(id="x", author="", content=Content("user", (Part(text="x"),)))], [1]),
    }
    for field, (events, sizes) in cases.items():
        assert field in [v.field for v in turn_rules.input_violations(events, sizes, LIMITS, now=NOW)], field
    fields = [v.field for v in turn_rules.input_violations(
        ok, [1, 1], LIMITS, now=NOW, reply_id="a", invocation_id="x\ny", agent="\x00", prefix="turn.",
    )]
    assert fields == ["turn.invocation_id", "turn.agent", "turn.reply_event_id"]


def test_caching_off_is_a_disabled_bypass() -> None:
    record = turn_rules.disabled_record("s")
    assert (record.state, record.bypass_reason, record.scope_fingerprint) == (CacheState.BYPASS, "DISABLED", "s")


def test_transport_failures_and_the_agents_own_deadline() -> None:
    clock = [100.0]
    live = turn_rules.Deadline(5.0, clock=lambda: clock[0])
    assert live.remaining() == 5.0 and not live.expired
    unreachable = Unavailable("x", reason="CACHE_SERVICE_UNAVAILABLE")
    assert turn_rules.is_transport_failure(unreachable, live)
    silent = DeadlineExceeded("x", reason="DEADLINE_EXCEEDED")
    assert turn_rules.is_transport_failure(silent, live)
    assert not turn_rules.is_transport_failure(DeadlineExceeded("x", reason="PROVIDER_TIMEOUT"), live)
    assert not turn_rules.is_transport_failure(Unavailable("x", reason="PROVIDER_UNAVAILABLE"), live)
    clock[0] = 105.0
    assert live.expired and live.remaining() == 0.0
    assert not turn_rules.is_transport_failure(silent, live), "the agent's own deadline passed: not an outage"
    assert turn_rules.Deadline(None).remaining() is None
    err = turn_rules.cache_service_unavailable(silent)
    assert (err.reason, err.retry_after, err.metadata["cause"]) == ("CACHE_SERVICE_UNAVAILABLE", 1.0, "DEADLINE_EXCEEDED")


def test_overflow_errors_carry_the_figures() -> None:
    first = InvalidArgument("x", reason="CONTEXT_WINDOW_EXCEEDED", metadata={"prompt_tokens": 900, "context_window": 800})
    second = InvalidArgument("x", reason="CONTEXT_WINDOW_EXCEEDED", metadata={"prompt_tokens": 850, "context_window": 800})
    assert turn_rules.is_context_overflow(first)
    err = turn_rules.overflow_after_compaction(first, second, 17)
    assert err.reason == "CONTEXT_WINDOW_EXCEEDED_AFTER_COMPACTION"
    assert err.metadata == {
        "prompt_tokens_before": "900", "context_window_before": "800", "prompt_tokens": "850",
        "context_window": "800", "compaction_sequence": "17",
    }
    off = turn_rules.overflow_not_recovered(first, "DISABLED")
    assert off.reason == "CONTEXT_WINDOW_EXCEEDED" and off.metadata["compaction"] == "DISABLED"


def test_the_current_input_of_an_unstored_turn_is_what_follows_the_newest_model_content() -> None:
    def c(role: str) -> Content:
        return Content(role, (Part(text=role),))

    assert turn_rules.current_input_count([c("user"), c("model"), c("user"), c("user")], 0) == 2
    assert turn_rules.current_input_count([c("user"), c("model"), c("user")], 1) == 2
    assert turn_rules.current_input_count([c("user"), c("model")], 1) == 1
    assert turn_rules.current_input_count([c("user")], 0) == 1
    assert turn_rules.current_input_count([], 0) == 0


def test_unstored_turn_ids_keep_the_clients_and_are_fresh_otherwise() -> None:
    assert turn_rules.unstored_turn_ids(invocation_id="i", reply_id="r") == turn_rules.TurnIds("i", "r")
    assert turn_rules.unstored_turn_ids().reply_id != turn_rules.unstored_turn_ids().reply_id


def test_an_unstored_turn_may_come_without_input() -> None:
    now = dt.datetime.now(dt.UTC)
    assert turn_rules.input_violations([], [], Limits(), now=now, require_input=False) == []
    assert [v.field for v in turn_rules.input_violations([], [], Limits(), now=now)] == ["input"]
