"""Pure session rules: names, ids, event and state validation, server-side
ids, page tokens, update masks and the stored event form."""

from __future__ import annotations

import dataclasses
import datetime as dt

import pytest
from hypothesis import given
from hypothesis import strategies as st

from agentctx_common.errors import InvalidArgument
from context_service.domain.config import ContextConfig, SelectionPolicy
from context_service.domain.config_defaults import config_from_defaults
from context_service.domain.event_validation import check_event, event_violations, prepare_event, state_violations
from context_service.domain.limits import Limits
from context_service.domain.model import (
    Blob,
    CacheInfo,
    CacheState,
    Checkpoint,
    Compaction,
    CompactionTrigger,
    Content,
    Event,
    EventKind,
    FileData,
    FunctionCall,
    FunctionResponse,
    Part,
    SessionKey,
    Usage,
)
from context_service.domain.names import parse_session_name, parse_user_parent
from context_service.domain.paging import decode_page_token, encode_page_token, page_size
from context_service.domain.update_masks import apply_config_fields, parse_update_mask
from context_service.storage import codec
from tests.sessions.helpers import call_event, response_event, text_event

LIMITS = Limits()
NOW = dt.datetime(2026, 6, 1, tzinfo=dt.UTC)


def violations(event: Event, limits: Limits = LIMITS, size: int = 100) -> list[str]:
    return [v.field for v in event_violations(event, limits, size_bytes=size, now=NOW)]


# --- names -------------------------------------------------------------------------


def test_session_name_round_trips() -> None:
    key = parse_session_name("apps/shop/users/alice@example.com/sessions/s-1.a:b", LIMITS)
    assert key == SessionKey("shop", "alice@example.com", "s-1.a:b")
    assert parse_session_name(key.name, LIMITS) == key


@pytest.mark.parametrize("name", [
    "", "apps/a/users/u", "apps/a/users/u/sessions/", "apps//users/u/sessions/s", "apps/a/users/u/sessions/s/x",
    "apps/a/users/-/sessions/s", "apps/-/users/u/sessions/s", "apps/a b/users/u/sessions/s",
    "apps/a/users/u/sessions/" + "s" * 129, "projects/a/users/u/sessions/s", "apps/a/users/u/sessions/s@x",
])
def test_bad_session_names_name_the_field(name: str) -> None:
    with pytest.raises(InvalidArgument) as info:
        parse_session_name(name, LIMITS, "parent")
    assert info.value.reason == "INVALID_NAME"
    assert {v.field for v in info.value.field_violations} == {"parent"}


def test_user_parent_wildcards_only_where_allowed() -> None:
    assert parse_user_parent("apps/a/users/u", LIMITS) == ("a", "u")
    assert parse_user_parent("apps/-/users/-", LIMITS, wildcards=True) == ("-", "-")
    with pytest.raises(InvalidArgument):
        parse_user_parent("apps/a/users/-", LIMITS)


def test_id_patterns_come_from_limits() -> None:
    strict = Limits(id_pattern=r"[a-z]{1,4}", owner_id_pattern=r"[a-z]+")
    assert parse_session_name("apps/a/users/u/sessions/abcd", strict).session == "abcd"
    with pytest.raises(InvalidArgument):
        parse_session_name("apps/a/users/u/sessions/abcde", strict)
    assert violations(text_event("UPPER"), strict) == ["event.id"]


# --- events ------------------------------------------------------------------------


def test_a_good_exchange_has_no_violations() -> None:
    assert violations(text_event("e1")) == []
    assert violations(call_event("e2")) == []
    assert violations(response_event("e3")) == []
    thinking = Event(id="t", author="model", content=Content("model", (Part(text="", thought=True, thought_signature=b"sig"),)))
    assert violations(thinking) == []


def _with_parts(*parts: Part, role: str = "user") -> Event:
    return Event(id="e", author="agent", content=Content(role, parts))


@pytest.mark.parametrize(("event", "fields"), [
    (dataclasses.replace(text_event("e"), kind=EventKind.COMPACTION), ["event.kind"]),
    (dataclasses.replace(text_event("e"), id="has space"), ["event.id"]),
    (dataclasses.replace(text_event("e"), author=""), ["event.author"]),
    (dataclasses.replace(text_event("e"), author="a\nb"), ["event.author"]),
    (dataclasses.replace(text_event("e"), invocation_id="x" * 129), ["event.invocation_id"]),
    (dataclasses.replace(text_event("e"), branch="root..child"), ["event.branch"]),
    (dataclasses.replace(text_event("e"), branch="root/child"), ["event.branch"]),
    (dataclasses.replace(text_event("e"), create_time=dt.datetime(1969, 1, 1, tzinfo=dt.UTC)), ["event.create_time"]),
    (dataclasses.replace(text_event("e"), create_time=NOW + dt.timedelta(days=2)), ["event.create_time"]),
    (Event(id="e", author="user", long_running_tool_ids=("c1",)), ["event.long_running_tool_ids[0]"]),
    (dataclasses.replace(text_event("e"), content=Content("system", (Part(text="x"),))), ["event.content.role"]),
    (dataclasses.replace(text_event("e"), content=Content("user", ())), ["event.content.parts"]),
    (_with_parts(Part()), ["event.content.parts[0]"]),
    (_with_parts(Part(text="a", inline_data=Blob("image/png", b"x"))), ["event.content.parts[0]"]),
    (_with_parts(Part(text="ok"), Part(text="")), ["event.content.parts[1].text"]),
    (_with_parts(Part(inline_data=Blob("png", b"x"))), ["event.content.parts[0].inline_data.mime_type"]),
    (_with_parts(Part(inline_data=Blob("image/png", b""))), ["event.content.parts[0].inline_data.data"]),
    (_with_parts(Part(file_data=FileData("", ""))), ["event.content.parts[0].file_data.file_uri"]),
    (_with_parts(Part(file_data=FileData("pdf", "gs://b/f"))), ["event.content.parts[0].file_data.mime_type"]),
    (_with_parts(Part(function_call=FunctionCall("c", "f", {}))), ["event.content.parts[0].function_call"]),
    (_with_parts(Part(function_call=FunctionCall("c", "1bad", {})), role="model"),
     ["event.content.parts[0].function_call.name"]),
    (_with_parts(Part(function_call=FunctionCall("bad id", "f", {})), role="model"),
     ["event.content.parts[0].function_call.id"]),
    (_with_parts(Part(function_call=FunctionCall("c", "f", {})), Part(function_call=FunctionCall("c", "g", {})), role="model"),
     ["event.content.parts[1].function_call.id"]),
    (_with_parts(Part(function_call=FunctionCall("c", "f", {"x": float("nan")})), role="model"),
     ["event.content.parts[0].function_call.args.x"]),
    (_with_parts(Part(function_response=FunctionResponse("c", "f", {})), role="model"),
     ["event.content.parts[0].function_response"]),
    (_with_parts(Part(function_response=FunctionResponse("", "f", {}))), ["event.content.parts[0].function_response.id"]),
    (_with_parts(Part(function_response=FunctionResponse("c", "", {}))), ["event.content.parts[0].function_response.name"]),
    (_with_parts(Part(function_response=FunctionResponse("c", "f", {"l": [1, float("inf")]}))),
     ["event.content.parts[0].function_response.response.l[1]"]),
    (dataclasses.replace(text_event("e"), usage=Usage(prompt_tokens=-1)), ["event.usage.prompt_tokens"]),
    (dataclasses.replace(text_event("e"), custom_metadata={"a": {"b": float("-inf")}}), ["event.custom_metadata.a.b"]),
    (dataclasses.replace(text_event("e"), long_running_tool_ids=("nope",)), ["event.long_running_tool_ids[0]"]),
])
def test_every_event_violation_names_its_field(event: Event, fields: list[str]) -> None:
    assert violations(event) == fields


def test_limits_on_size_and_parts() -> None:
    limits = Limits(max_event_bytes=1000, max_parts_per_event=2)
    assert violations(text_event("e"), limits, size=1001) == ["event"]
    three = _with_parts(Part(text="a"), Part(text="b"), Part(text="c"))
    assert violations(three, limits) == ["event.content.parts"]


def test_check_event_raises_with_every_violation() -> None:
    bad = Event(id="bad id", author="", content=Content("robot", (Part(),)))
    with pytest.raises(InvalidArgument) as info:
        check_event(bad, LIMITS, size_bytes=10, now=NOW)
    assert info.value.reason == "INVALID_EVENT"
    assert [v.field for v in info.value.field_violations] == [
        "event.id", "event.author", "event.content.role", "event.content.parts[0]",
    ]


def test_prepare_event_assigns_ids_deterministically() -> None:
    event = Event(id="e7", author="agent", content=Content("model", (
        Part(text="calling"), Part(function_call=FunctionCall("", "f", {})), Part(function_call=FunctionCall("mine", "g", {})),
    )))
    prepared = prepare_event(event)
    assert [c.id for c in prepared.content.function_calls] == ["e7.call1", "mine"]
    assert prepare_event(event) == prepared
    assert prepare_event(prepared) is prepared
    generated = prepare_event(text_event(""))
    assert generated.id and LIMITS.valid_id(generated.id)


def test_state_limits() -> None:
    assert state_violations({"a": 1}, 10, LIMITS) == []
    small = Limits(max_state_bytes=5)
    assert [v.field for v in state_violations({"a": 1}, 6, small)] == ["session.state"]
    assert [v.field for v in state_violations({"a": [float("nan")]}, 6, LIMITS)] == ["session.state.a[0]"]


# --- paging --------------------------------------------------------------------------


@given(scope=st.text(max_size=40), after=st.integers(min_value=0, max_value=2**62))
def test_page_tokens_round_trip_for_their_scope_only(scope: str, after: int) -> None:
    token = encode_page_token(scope, after)
    assert decode_page_token(token, scope) == after
    with pytest.raises(InvalidArgument) as info:
        decode_page_token(token, scope + "x")
    assert info.value.reason == "INVALID_PAGE_TOKEN"


@given(st.text(min_size=1, max_size=60))
def test_garbage_page_tokens_are_invalid_argument(token: str) -> None:
    try:
        decode_page_token(token, "scope")
    except InvalidArgument as exc:
        assert [v.field for v in exc.field_violations] == ["page_token"]


def test_page_sizes() -> None:
    assert page_size(0, 50, LIMITS) == 50
    assert page_size(7, 50, LIMITS) == 7
    for bad in (-1, LIMITS.max_page_size + 1):
        with pytest.raises(InvalidArgument) as info:
            page_size(bad, 50, LIMITS)
        assert [v.field for v in info.value.field_violations] == ["page_size"]


# --- updates and defaults ----------------------------------------------------------------


def test_update_masks() -> None:
    assert parse_update_mask(["state"]).state
    assert parse_update_mask(["config.selection", "config.model"]).config_fields == ("selection", "model")
    everything = parse_update_mask(["*"])
    assert everything.state and set(everything.config_fields) == {"model", "selection", "compaction", "cache",
                                                                  "retrieval", "tools"}
    with pytest.raises(InvalidArgument) as info:
        parse_update_mask(["state", "config.selection.max_bytes", "name"])
    assert [v.field for v in info.value.field_violations] == ["update_mask.paths[1]", "update_mask.paths[2]"]
    with pytest.raises(InvalidArgument):
        parse_update_mask([])


def test_apply_config_fields_replaces_only_named_policies() -> None:
    current = ContextConfig(model="m1", selection=SelectionPolicy(max_bytes=10))
    new = ContextConfig(model="m2", selection=SelectionPolicy(max_tokens=5))
    merged = apply_config_fields(current, new, ["selection"])
    assert merged.model == "m1" and merged.selection == SelectionPolicy(max_tokens=5)


def test_server_defaults_are_strict() -> None:
    assert config_from_defaults({"selection": {"max_tokens": 100}}).selection.max_tokens == 100
    for bad in ({"selection": {"max_tokenz": 1}}, {"cache": {"ttl_s": -1}}, {"selection": {"overflow": "SOMETIMES"}}):
        with pytest.raises(ValueError):
            config_from_defaults(bad)


# --- the stored form ----------------------------------------------------------------------

json_scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**53), 2**53), st.text(max_size=8),
                         st.floats(allow_nan=False, allow_infinity=False))
json_objects = st.dictionaries(st.text(max_size=6), st.recursive(
    json_scalars, lambda kids: st.lists(kids, max_size=3) | st.dictionaries(st.text(max_size=4), kids, max_size=3),
    max_leaves=8), max_size=4)
times = st.datetimes(min_value=dt.datetime(1971, 1, 1), max_value=dt.datetime(2200, 1, 1),
                     timezones=st.just(dt.UTC))
parts = st.one_of(
    st.builds(Part, text=st.text(min_size=1, max_size=20), thought=st.booleans(), thought_signature=st.binary(max_size=4)),
    st.builds(Part, inline_data=st.builds(Blob, st.just("image/png"), st.binary(min_size=1, max_size=16))),
    st.builds(Part, file_data=st.builds(FileData, st.just("application/pdf"), st.text(min_size=1, max_size=20))),
    st.builds(Part, function_call=st.builds(FunctionCall, st.text(min_size=1, max_size=8), st.just("f"), json_objects)),
    st.builds(Part, function_response=st.builds(FunctionResponse, st.text(min_size=1, max_size=8), st.just("f"), json_objects)),
)
checkpoints = st.builds(
    Checkpoint, schema_version=st.just(1), checkpoint_id=st.text(max_size=8), trigger=st.sampled_from(CompactionTrigger),
    source_event_count=st.integers(0, 99), source_first_event_id=st.text(max_size=8), source_last_event_id=st.text(max_size=8),
    source_first_time=st.none() | times, source_last_time=st.none() | times, source_fingerprint=st.text(max_size=8),
    retained_event_count=st.integers(0, 9), summary_bytes=st.integers(0, 99), retained_user_turns=st.integers(0, 9),
    compactor=st.sampled_from(["extractive", "model"]), retained_tokens=st.integers(0, 99),
)
events = st.builds(
    Event,
    id=st.text(min_size=1, max_size=10), author=st.text(min_size=1, max_size=10),
    content=st.none() | st.builds(Content, st.sampled_from(["user", "model"]), st.lists(parts, max_size=4).map(tuple)),
    sequence=st.integers(1, 10**9), invocation_id=st.text(max_size=6), branch=st.text(max_size=6),
    partial=st.booleans(), turn_complete=st.booleans(), create_time=times,
    usage=st.none() | st.builds(Usage, *[st.integers(0, 10**6)] * 5),
    cache=st.none() | st.builds(CacheInfo, st.sampled_from(CacheState), st.just("UNSPECIFIED"), st.text(max_size=8),
                                st.integers(0, 99), st.none() | times, st.text(max_size=8), st.integers(0, 9)),
    custom_metadata=st.none() | json_objects,
    kind=st.sampled_from(EventKind),
    compaction=st.none() | st.builds(Compaction, st.integers(1, 9), st.integers(1, 9), st.text(max_size=6), st.integers(1, 9),
                                     st.text(max_size=30), checkpoints, st.none() | st.builds(Usage)),
    long_running_tool_ids=st.lists(st.text(max_size=5), max_size=2).map(tuple),
)


class _Row:
    def __init__(self, row: dict) -> None:
        self.__dict__.update(row)


@given(events)
def test_stored_events_read_back_equal(event: Event) -> None:
    body = codec.event_body(event)
    row = codec.event_row(event, session_pk=1, sequence=event.sequence, create_time=event.create_time, body=body,
                          fingerprint=codec.event_fingerprint(event, body))
    assert codec.event_from_row(_Row(row)) == event


def test_fingerprint_ignores_server_fields_but_not_content() -> None:
    event = text_event("e1", "hello")
    body = codec.event_body(event)
    stored = dataclasses.replace(event, sequence=9)
    assert codec.event_fingerprint(stored, codec.event_body(stored)) == codec.event_fingerprint(event, body)
    changed = text_event("e1", "hello!")
    assert codec.event_fingerprint(changed, codec.event_body(changed)) != codec.event_fingerprint(event, body)
