"""Stored bodies in the canonical form (issue 20, item 2): an event's body
holds its content's canonical JSON, and migration 0009 brings the rows of
the previous head there without losing anything, while retries of the
events stored before it are still recognized (their fingerprints are kept,
``fingerprint_version`` 1).

The version-1 rows here are written as the code before 0009 wrote them: the
encoder and fingerprint below are that code's, frozen."""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import json
import pathlib
from typing import Any

import pytest
import sqlalchemy as sa
from hypothesis import given, settings
from hypothesis import strategies as st

from agentctx_common import part_kinds
from agentctx_common.errors import AlreadyExists
from context_service.domain import config as cfg
from context_service.domain import model as m
from context_service.domain import parts
from context_service.domain.json_depth import json_violations
from context_service.domain.selection.canonical import canonical_form, content_bytes
from context_service.domain.tool_tokens import response_ids
from context_service.mapping import convert
from context_service.settings import ContextSettings
from context_service.storage import codec, schema
from context_service.storage.append_plan import Append
from context_service.storage.engine import create_engine
from context_service.storage.factory import open_backend
from context_service.storage.tables import events, sessions, tool_calls
from tests.sessions.helpers import migrate
from tests.support.domain_contents import content

PREVIOUS = "0008_memory_vector_order"
KEY = m.SessionKey("app", "u", "s")
T0 = dt.datetime(2026, 11, 1, 12, 0, tzinfo=dt.UTC)
CALL_ID = "call-staged"


# --- what the code before migration 0009 stored (frozen) ----------------------------


def _v1_part(p: m.Part) -> dict[str, Any]:
    """A part as version 1 stored it: snake_case keys, bytes as base64."""
    kind = parts.kind_of(p)
    out: dict[str, Any] = {}
    if kind is not None and not kind.fields:
        out = {kind.name: getattr(p, kind.name)}
    elif kind is not None:
        values = kind.values(getattr(p, kind.name))
        out = {kind.name: {name: part_kinds.b64(v) if i in kind.bytes_at else v
                           for i, (name, v) in enumerate(zip(kind.names, values, strict=True))}}
    if p.thought:
        out["thought"] = True
    if p.thought_signature:
        out["thought_signature"] = part_kinds.b64(p.thought_signature)
    return out


def _dumps(value: Any) -> str:
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def _v1_body(e: m.Event) -> str:
    body = {k: v for k, v in codec.split_body(codec.event_body(e))[0].items()}
    if e.content is not None:
        body["content"] = {"role": e.content.role, "parts": [_v1_part(p) for p in e.content.parts]}
    return _dumps(body)


def _v1_fingerprint(e: m.Event, body: str) -> str:
    time = e.create_time.astimezone(dt.UTC).isoformat() if e.create_time is not None else None
    header = _dumps([e.id, e.kind.value, e.author, e.invocation_id, e.branch, e.partial, e.turn_complete, time])
    return hashlib.sha256(f"{header}\n{body}".encode()).hexdigest()


# --- the rows ---------------------------------------------------------------------------


def _every_kind() -> m.Content:
    """One content with a part of each kind (walked from the kind table)."""
    made = []
    for kind in part_kinds.KINDS:
        values: list[Any] = [{"city": "Paris", "n": [1, 2.5, {"deep": None}]} if f.type is part_kinds.FieldType.JSON
                             else b"\x00\xffraw" if f.type is part_kinds.FieldType.BYTES else f"{f.name}-x"
                             for f in kind.fields]
        made.append(parts.make(kind, parts.payload_of(kind, values) if kind.fields else "hello", kind.index == 3,
                               b"sig" if kind.index == 1 else b""))
    return m.Content("model", (*made, m.Part(thought=True, thought_signature=b"only-a-signature")))


def _as_received(c: m.Content) -> m.Content:
    """The content as an AppendEvent carries it (through its proto): what
    the old code could have stored."""
    return convert.content_from_proto(convert.content_to_proto(c))


def _drawn_contents(examples: int) -> list[m.Content]:
    drawn: list[m.Content] = []

    @settings(max_examples=examples, database=None)
    @given(st.lists(content, min_size=1, max_size=4))
    def draw(contents: list[m.Content]) -> None:
        for c in contents:
            received = _as_received(c)
            if any(json_violations(v, "") for p in received.parts for _, _, v in parts.json_payloads(p)):
                continue  # the old code could not store a non-finite number
            # A response's id is a query parameter when it is appended (does it answer an open
            # call?), and the edge admits only printable ASCII there (parts.CALL_ID): PostgreSQL
            # refuses a NUL in a parameter, which a drawn id may hold.
            if all(parts.CALL_ID.fullmatch(i) for i in response_ids(received.parts)):
                drawn.append(received)

    draw()
    return drawn


def _events(contents: list[m.Content]) -> list[m.Event]:
    """Events of the stored shapes: client times or none (the row holds the
    server's), replies with usage, cache and metadata, a retraction."""
    out = []
    for i, c in enumerate(contents):
        out.append(m.Event(
            id=f"e{i}", author="agent" if c.role == "model" else "user", content=c,
            invocation_id=f"inv{i % 3}", turn_complete=i % 2 == 0,
            create_time=T0 + dt.timedelta(seconds=i) if i % 3 else None,
            usage=m.Usage(prompt_tokens=i, output_tokens=2) if i % 4 == 1 else None,
            cache=m.CacheInfo(m.CacheState.HIT, prefix_fingerprint="ab" * 8, uses=i) if i % 5 == 2 else None,
            custom_metadata={"k": i, "nested": {"content": "x"}} if i % 3 == 0 else None,
            finish_reason="STOP" if c.role == "model" else "",
        ))
    out.append(m.Event(id="retract", author="user", retracts_event_id="e0"))
    out.append(m.Event(id="empty", author="user"))
    return out


def _row(pk: int, seq: int, e: m.Event, stored: m.Event | None = None) -> dict[str, Any]:
    """The version-1 row of ``e`` (``stored``: what the row holds when
    collection added to it; its fingerprint is still ``e``'s)."""
    stored = stored or e
    return {
        "session_pk": pk, "sequence": seq, "event_id": e.id, "kind": e.kind.value, "author": e.author,
        "invocation_id": e.invocation_id, "branch": e.branch, "partial": e.partial,
        "turn_complete": e.turn_complete, "create_time": e.create_time or T0 + dt.timedelta(hours=1, seconds=seq),
        "fingerprint": _v1_fingerprint(e, _v1_body(e)), "body_json": _v1_body(stored),
    }


STAGED = (parts.data_part(False, "image/png", b"\x89PNG\x00"), parts.data_part(True, "", b"a note"))
SUBMITTED = m.Event(id="answered", author="user", content=m.Content("user", (
    m.Part(function_response=m.FunctionResponse("c0", "lookup", {"ok": True})),)))
COLLECTED = dataclasses.replace(SUBMITTED, content=m.Content("user", (*SUBMITTED.content.parts, *STAGED)))  # type: ignore[union-attr]


async def _seed_v1(url: str, stored: list[m.Event]) -> dict[str, str]:
    """A database at the previous head with one session holding ``stored``
    as version-1 rows, an event stored with collected attachments, and an
    open tool call with staged attachments. -> {event id: v1 body}."""
    engine = create_engine(url)
    try:
        await schema.upgrade(engine, PREVIOUS)
        async with engine.begin() as conn:
            await conn.execute(sa.insert(sessions).values(
                app=KEY.app, user_id=KEY.user, session_id=KEY.session, incarnation="inc", version=len(stored) + 2,
                last_sequence=len(stored) + 1, event_count=len(stored) + 1, state_json="{}",
                config_json=codec.config_to_text(cfg.ContextConfig()), create_time=T0, update_time=T0))
            pk = (await conn.execute(sa.select(sessions.c.pk))).scalar_one()
            rows = [_row(pk, i + 1, e) for i, e in enumerate(stored)]
            rows.append(_row(pk, len(stored) + 1, SUBMITTED, COLLECTED))
            await conn.execute(sa.insert(events), rows)
            staged = {"state": {}, "attachments": [_v1_part(p) for p in STAGED]}
            await conn.execute(sa.insert(tool_calls).values(
                token_id="tok", app=KEY.app, user_id=KEY.user, session_id=KEY.session, call_id=CALL_ID,
                event_id="e-call", state="open", expire_time=dt.datetime.now(dt.UTC) + dt.timedelta(hours=1),
                staged_json=_dumps(staged), create_time=T0))
        return {r["event_id"]: r["body_json"] for r in rows} | {"tok": _dumps(staged)}
    finally:
        await engine.dispose()


async def _stored(url: str) -> dict[str, tuple[str, int]]:
    """{event id: (body, fingerprint version)}, and the staged JSON under "tok"."""
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            found = {r.event_id: (r.body_json, r.fingerprint_version) for r in await conn.execute(
                sa.select(events.c.event_id, events.c.body_json, events.c.fingerprint_version))}
            found["tok"] = ((await conn.execute(sa.select(tool_calls.c.staged_json))).scalar_one(), 0)
            return found
    finally:
        await engine.dispose()


async def _v1_rows(url: str) -> dict[str, str]:
    """{event id: body}, and the staged JSON under "tok", read with the
    columns every version has."""
    engine = create_engine(url)
    try:
        async with engine.connect() as conn:
            found = {r.event_id: r.body_json for r in await conn.execute(sa.text("SELECT event_id, body_json FROM events"))}
            found["tok"] = (await conn.execute(sa.text("SELECT staged_json FROM tool_calls"))).scalar() or ""
            return found
    finally:
        await engine.dispose()


async def _downgrade(url: str) -> None:
    engine = create_engine(url)
    try:
        await schema.downgrade(engine, PREVIOUS)
    finally:
        await engine.dispose()


def _settings(url: str, tmp_path: pathlib.Path) -> ContextSettings:
    return ContextSettings(database_url=url, data_dir=tmp_path / "data", dev_plaintext=True, host="127.0.0.1")


def _wire(e: m.Event) -> Any:
    return convert.event_to_proto(dataclasses.replace(e, sequence=0, create_time=None), KEY)


# --- the tests ------------------------------------------------------------------------------


async def test_an_appended_body_holds_the_canonical_content(db_url: str, tmp_path: pathlib.Path) -> None:
    await migrate(db_url)
    opened = await open_backend(_settings(db_url, tmp_path))
    try:
        await opened.sessions.create_session(KEY, state={}, config=cfg.ContextConfig())
        every = _every_kind()
        await opened.sessions.append_event(KEY, m.Event(id="one", author="agent", content=every))
    finally:
        await opened.close()
    body = json.loads((await _v1_rows(db_url))["one"])
    fresh = m.Content(every.role, every.parts)  # computed anew, not the kept bytes
    assert codec.dumps(body["content"]).encode() == content_bytes(fresh)
    assert {k for p in body["content"]["parts"] for k in p} <= {*(k.camel for k in part_kinds.KINDS),
                                                                 "thought", "thoughtSignature"}


async def test_migration_from_the_previous_head_is_lossless_and_keeps_retries(
        db_url: str, tmp_path: pathlib.Path) -> None:
    contents = [_as_received(_every_kind()), *_drawn_contents(25)]
    originals = _events(contents)
    v1 = await _seed_v1(db_url, originals)

    await migrate(db_url)
    migrated = await _stored(db_url)
    assert {k: v for k, (_, v) in migrated.items() if k != "tok"} == dict.fromkeys(v1.keys() - {"tok"}, 1)
    # The stored bytes are the canonical form, and rewriting them again
    # changes nothing (the step is idempotent).
    for e in originals:
        body = migrated[e.id][0]
        assert body == codec.event_body(e) == codec.body_from_legacy(body), e.id
    staged = json.loads(migrated["tok"][0])["attachments"]
    assert staged == [parts.to_json(p) for p in STAGED]
    assert tuple(codec.part_from_json(p) for p in staged) == STAGED

    # Downgrade gives back the version-1 bytes; upgrading again, the same rows.
    await _downgrade(db_url)
    assert await _v1_rows(db_url) == v1
    await migrate(db_url)
    assert await _stored(db_url) == migrated

    opened = await open_backend(_settings(db_url, tmp_path))
    try:
        store = opened.sessions
        read = {e.id: e for e in await store.list_events(KEY, after_sequence=0, limit=None, include_compactions=True)}
        for e in originals:
            assert read[e.id].content == e.content and _wire(read[e.id]) == _wire(e), e.id
            if e.content is not None:  # read with the stored bytes, equal to a fresh encoding
                assert canonical_form(read[e.id].content) == canonical_form(m.Content(e.content.role, e.content.parts))
            assert read[e.id].custom_metadata == e.custom_metadata and read[e.id].usage == e.usage, e.id
        assert read[COLLECTED.id].content == COLLECTED.content
        # Retries of the events stored before: the same event, the stored one.
        for e in [*originals, SUBMITTED]:
            again = await store.append_event(KEY, e)
            assert again.deduplicated and again.event.sequence == read[e.id].sequence, e.id
        changed = dataclasses.replace(originals[0], content=m.Content("user", (m.Part(text="other"),)))
        with pytest.raises(AlreadyExists):
            await store.append_event(KEY, changed)
        with pytest.raises(AlreadyExists):
            await store.append_event(KEY, dataclasses.replace(SUBMITTED, author="someone else"))
        # The staged attachments are collected by the response to their call.
        answer = m.Event(id="late", author="user", content=m.Content("user", (
            m.Part(function_response=m.FunctionResponse(CALL_ID, "lookup", {})),)))
        stored = await store.append_event(KEY, answer)
        assert stored.event.content is not None and stored.event.content.parts[1:] == STAGED
        # New rows carry the new version; their retries match too.
        assert (await _stored(db_url))["late"][1] == codec.FINGERPRINT_VERSION
        assert (await store.append_event(KEY, answer)).deduplicated
    finally:
        await opened.close()


def test_a_version_1_fingerprint_is_compared_with_the_event_as_submitted() -> None:
    """An append that collected attachments keeps the submitted event's
    fingerprint; a version-1 row is compared with that event too."""
    v1 = _v1_fingerprint(SUBMITTED, _v1_body(SUBMITTED))
    assert codec.legacy_fingerprint(SUBMITTED) == v1
    body = codec.event_body(SUBMITTED)
    item = Append(KEY, COLLECTED, None, codec.event_body(COLLECTED), codec.event_fingerprint(SUBMITTED, body),
                  submitted=SUBMITTED)
    assert item.matches(v1, codec.LEGACY_FINGERPRINT)
    assert item.matches(item.fingerprint, codec.FINGERPRINT_VERSION)
    assert not item.matches(v1, codec.FINGERPRINT_VERSION)
    assert not item.matches(item.fingerprint, codec.LEGACY_FINGERPRINT)
