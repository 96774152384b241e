"""Attachments, pure: references, the content an artifact becomes, where the
section goes, its budget, and its place in the envelope's accounting and
fingerprints (``domain.attachments``, ``domain.selection.envelope``)."""

from __future__ import annotations

import datetime as dt

import pytest

from agentctx_common.errors import InvalidArgument, ResourceExhausted
from agentctx_common.reasons import Reason
from context_service.domain import attachments as att
from context_service.domain import model as m
from context_service.domain.artifacts import ArtifactScope, ArtifactVersionRecord
from context_service.domain.config import SelectionPolicy
from context_service.domain.selection import (
    DEFAULT_SECRET_KEYS,
    RequestParts,
    account,
    content_record,
    effective_policy,
    event_record,
    select,
)
from context_service.domain.selection.envelope import attachment_index, prefix_bytes
from context_service.domain.selection.policy import DEFAULT_MAX_ATTACHMENT_BYTES
from tests.selection.builders import call, response, sequence, text

KEYS = DEFAULT_SECRET_KEYS
KEY = m.SessionKey("shop", "alice", "s1")


def record(version: int = 0, *, size: int = 5, text_: bool = True, mime: str = "text/plain") -> ArtifactVersionRecord:
    return ArtifactVersionRecord(
        scope=ArtifactScope("shop", "alice", "s1"), artifact="notes.md", version=version, mime_type=mime,
        size_bytes=size, sha256="0" * 64, create_time=dt.datetime(2026, 1, 1, tzinfo=dt.UTC), text=text_,
    )


def test_references_are_checked_by_path() -> None:
    refs = [att.AttachmentRef("ok.txt"), att.AttachmentRef("../up"), att.AttachmentRef("x", -1), att.AttachmentRef("")]
    fields = [v.field for v in att.ref_violations(refs)]
    assert fields == ["attachments[1].name", "attachments[2].version", "attachments[3].name"]
    assert att.ref_violations([att.AttachmentRef("a", 0), att.AttachmentRef("user:b")]) == []
    too_many = [att.AttachmentRef(f"a{i}") for i in range(att.MAX_ATTACHMENTS + 1)]
    with pytest.raises(InvalidArgument) as info:
        att.check_refs(too_many, Reason.INVALID_GENERATE_REQUEST, "turn.attachments")
    assert info.value.reason == Reason.INVALID_GENERATE_REQUEST
    assert [v.field for v in info.value.field_violations] == ["turn.attachments"]


def test_scope_is_the_session_or_its_user() -> None:
    assert att.scope(KEY, att.AttachmentRef("plan.md")) == ArtifactScope("shop", "alice", "s1")
    assert att.scope(KEY, att.AttachmentRef("user:cv.pdf")) == ArtifactScope("shop", "alice", None)


def test_missing_names_the_artifact_in_a_field_violation_only() -> None:
    err = att.not_found(att.AttachmentRef("secret-plan.md", 3), 2)
    assert err.reason == Reason.ARTIFACT_NOT_FOUND and err.metadata == {"version": "3"}
    assert "secret-plan" not in err.message
    (violation,) = err.field_violations
    assert violation.field == "attachments[2]" and "secret-plan.md" in violation.description
    assert att.not_found(att.AttachmentRef("a"), 0).metadata == {"version": "latest"}


def test_text_and_bytes_become_one_labelled_user_content() -> None:
    as_text = att.attachment_content("notes.md", record(4), "héllo".encode())
    assert as_text.role == "user" and len(as_text.parts) == 2
    assert "notes.md" in (as_text.parts[0].text or "") and "version 4" in (as_text.parts[0].text or "")
    assert as_text.parts[1].text == "héllo"
    png = bytes(range(256))
    as_bytes = att.attachment_content("chart.png", record(size=256, text_=False, mime="image/png"), png)
    assert as_bytes.parts[1].inline_data == m.Blob("image/png", png)


def test_budget_names_the_first_artifact_past_it() -> None:
    policy = SelectionPolicy(max_attachment_bytes=100)
    att.check_budget(["a", "b"], [60, 40], policy, 4.0)  # exactly at the budget
    with pytest.raises(ResourceExhausted) as info:
        att.check_budget(["a", "b", "c"], [60, 41, 10], policy, 4.0)
    err = info.value
    assert err.reason == Reason.ATTACHMENT_BUDGET_EXCEEDED
    assert err.metadata["limit"] == "max_attachment_bytes"
    assert (err.metadata["measured_bytes"], err.metadata["allowed_bytes"]) == ("111", "100")
    assert [v.field for v in err.field_violations] == ["attachments[1]"]
    assert "'b'" in err.field_violations[0].description
    with pytest.raises(ResourceExhausted) as tokens:
        att.check_budget(["a"], [41], SelectionPolicy(max_attachment_tokens=10), 4.0)
    assert tokens.value.metadata["limit"] == "max_attachment_tokens"
    att.check_budget(["a"], [10**12], SelectionPolicy(), 4.0)  # unset: unlimited


def test_the_default_budget_is_eight_mib() -> None:
    policy = effective_policy(None, None)
    assert policy.max_attachment_bytes == DEFAULT_MAX_ATTACHMENT_BYTES == 8 * 1024 * 1024
    assert effective_policy(SelectionPolicy(max_attachment_bytes=5), None).max_attachment_bytes == 5
    assert effective_policy(None, SelectionPolicy(max_attachment_bytes=7)).max_attachment_bytes == 7


def _build(inputs: list[m.Content], attached: list[m.Content], policy: SelectionPolicy | None = None):  # type: ignore[no-untyped-def]
    p = effective_policy(None, policy)
    events = sequence(text("user", "hello"), call(("a", "f", {"q": 1})))
    recs = [event_record(e, KEYS) for e in events]
    input_records = [content_record(c, KEYS) for c in inputs]
    selection = select(recs, input_records, p)
    parts = RequestParts(
        model="gemini-x", system_instruction=None, tools=[], tool_config=None, generation_config=None,
        memory=[], inputs=input_records, attachments=[content_record(c, KEYS) for c in attached],
    )
    return account(selection, parts, p), selection, parts


ATTACHED = att.attachment_content("chart.png", record(size=3000, text_=False, mime="image/png"), bytes(3000))


def test_attachments_have_their_own_section_and_stay_out_of_the_prefix() -> None:
    question = [text("user", "What does the chart show?")]
    bare, selection, bare_parts = _build(question, [])
    a, _, parts = _build(question, [ATTACHED])
    assert bare.attachments.bytes == 0
    assert a.attachments.bytes >= 3000  # inline data at its raw length
    assert a.attachments.tokens == -(-a.attachments.bytes // 4)
    assert a.framing.bytes == bare.framing.bytes + 64
    assert a.request.bytes == bare.request.bytes + a.attachments.bytes + 64
    sections = [a.instructions, a.settings, a.history, a.memory, a.input, a.attachments, a.tools, a.framing]
    assert a.request.bytes == sum(s.bytes for s in sections)
    assert a.history == bare.history and a.input == bare.input
    # Volatile input: the cached head is the same with or without it.
    assert a.prefix_fingerprint == bare.prefix_fingerprint
    assert a.envelope_fingerprint != bare.envelope_fingerprint
    assert prefix_bytes(parts, selection.history) == prefix_bytes(bare_parts, selection.history)
    # Right before the newest user input.
    assert [c.content for c in parts.current] == [ATTACHED, question[0]]


def test_attachments_follow_the_tool_results_the_input_opens_with() -> None:
    inputs = [response(("a", "f", {"r": 2})), text("user", "and this file?")]
    _, _, parts = _build(inputs, [ATTACHED])
    assert attachment_index(parts.inputs) == 1
    assert [c.content for c in parts.current] == [inputs[0], ATTACHED, inputs[1]]
    only_results = [response(("a", "f", {"r": 2}))]
    _, _, last = _build(only_results, [ATTACHED, ATTACHED])
    assert [c.content for c in last.current] == [only_results[0], ATTACHED, ATTACHED]


def test_the_request_budget_counts_attachments() -> None:
    question = [text("user", "hi")]
    a, *_ = _build(question, [ATTACHED])
    _build(question, [ATTACHED], SelectionPolicy(max_request_bytes=a.request.bytes))
    with pytest.raises(ResourceExhausted) as info:
        _build(question, [ATTACHED], SelectionPolicy(max_request_bytes=a.request.bytes - 1))
    assert info.value.reason == Reason.REQUEST_CONTEXT_BUDGET_EXCEEDED
    # The history budget does not: attachments are a section of their own.
    _build(question, [ATTACHED], SelectionPolicy(max_bytes=a.history.bytes + a.input.bytes))

