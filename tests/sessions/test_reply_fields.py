"""finish_reason and model_version are Event fields, stored in the event
body; replies stored before carry them in custom_metadata, and read back
with the fields filled (issue 20 item 3)."""

from __future__ import annotations

import datetime as dt
import json
import types

from agentctx.type.v1 import generation_pb2
from context_service.domain import model as m
from context_service.mapping import convert
from context_service.storage import codec

KEY = m.SessionKey("a", "u", "s")
NOW = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)


def _row(body: dict[str, object]) -> types.SimpleNamespace:
    return types.SimpleNamespace(event_id="r1", author="model", sequence=4, invocation_id="inv", branch="",
                                 partial=False, turn_complete=True, create_time=NOW, kind="MESSAGE",
                                 body_json=codec.body_from_legacy(json.dumps(body)))


def _reply(**fields: object) -> m.Event:
    return m.Event(id="r1", author="model", content=m.Content("model", (m.Part(text="hi"),)), **fields)  # type: ignore[arg-type]


def test_a_reply_stores_them_as_fields_not_metadata() -> None:
    event = _reply(finish_reason="MAX_TOKENS", model_version="m-002")
    body = json.loads(codec.event_body(event))
    assert (body["finish_reason"], body["model_version"]) == ("MAX_TOKENS", "m-002")
    assert "custom_metadata" not in body
    read = codec.event_from_row(_row(body))
    assert (read.finish_reason, read.model_version, read.custom_metadata) == ("MAX_TOKENS", "m-002", None)
    out = convert.event_to_proto(read, KEY)
    assert out.finish_reason == generation_pb2.FINISH_REASON_MAX_TOKENS and out.model_version == "m-002"


def test_an_event_without_them_stores_no_keys() -> None:
    assert json.loads(codec.event_body(_reply())) == {"content": {"role": "model", "parts": [{"text": "hi"}]}}


def test_a_reply_stored_before_the_fields_reads_them_from_its_metadata() -> None:
    legacy = {"content": {"role": "model", "parts": [{"text": "hi"}]},
              "custom_metadata": {"finish_reason": "STOP", "model_version": "m-001"}}
    read = codec.event_from_row(_row(legacy))
    assert (read.finish_reason, read.model_version) == ("STOP", "m-001")
    # The stored event is unchanged: its metadata reads as it was written.
    assert read.custom_metadata == {"finish_reason": "STOP", "model_version": "m-001"}
    out = convert.event_to_proto(read, KEY)
    assert out.finish_reason == generation_pb2.FINISH_REASON_STOP and out.model_version == "m-001"


def test_only_a_model_content_takes_them_from_metadata() -> None:
    user = {"content": {"role": "user", "parts": [{"text": "hi"}]},
            "custom_metadata": {"finish_reason": "STOP", "model_version": "m-001"}}
    read = codec.event_from_row(_row(user))
    assert (read.finish_reason, read.model_version) == ("", "")
    odd = {"content": {"role": "model", "parts": [{"text": "hi"}]}, "custom_metadata": {"finish_reason": 3}}
    assert codec.event_from_row(_row(odd)).finish_reason == ""


def test_a_finish_reason_this_version_does_not_know_is_other() -> None:
    out = convert.event_to_proto(_reply(finish_reason="SOMETHING_NEW"), KEY)
    assert out.finish_reason == generation_pb2.FINISH_REASON_OTHER
