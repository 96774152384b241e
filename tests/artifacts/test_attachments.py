"""Attached artifacts on real servers, through the Python client:
BuildContext on each backend (text and bytes, latest and pinned versions,
session and user artifacts, where the section goes, a missing artifact,
the budget from the session's config and the call, another app's
artifacts, bad references, content-free spans), and Generate and
StreamGenerate through the cache service (the model receives the
attachment, nothing of it is stored, a missing one stores no input, and
the leased prefix stops before it)."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import policy_pb2
from agentctx.type.v1 import cache_pb2
from agentctx_client import (
    ArtifactRef,
    BudgetExceededError,
    ContextClient,
    InvalidArgumentError,
    NotFoundError,
    PermissionDeniedError,
)
from agentctx_common.certs import CONTEXT_SERVICE_ID, SAMPLE_AGENT_ID
from tests.artifacts.conftest import ServerFactory, client_of
from tests.support.pair import ServicePair, pair_maker
from tests.support.servers import secure_channel
from tests.support.spans import span_exporter
from tests.turns.builders import MODEL
from tests.turns.conftest import CACHE_DEFAULTS

PNG = bytes(range(256)) * 4
STATE = cache_pb2.CacheState


async def _session(client: ContextClient, app: str = "shop", user: str = "alice", *, cache: bool = False,
                   selection: policy_pb2.SelectionPolicy | None = None) -> str:
    config = policy_pb2.ContextConfig(model=MODEL, cache=policy_pb2.CachePolicy(enabled=cache), selection=selection)
    return (await client.create_session(app, user, config=config)).name


async def test_text_and_bytes_latest_and_pinned_go_right_before_the_input(client: ContextClient) -> None:
    s = await _session(client)
    await client.append_event(s, "Hello, here are my notes.")
    v0 = await client.save_artifact(s, "notes.md", "first draft")
    await client.save_artifact(s, "notes.md", "second draft")
    await client.save_artifact(s, "user:chart.png", PNG, mime_type="image/png")
    bare = await client.build_context(s, ["What changed?"])
    built = await client.build_context(
        s, ["What changed?"], attachments=["notes.md", v0, ArtifactRef("user:chart.png", 0)],
    )
    contents = built.contents
    assert [c.text for c in contents[:1]] == ["Hello, here are my notes."]
    assert contents[-1].text == "What changed?"
    latest, pinned, chart = contents[1:4]
    assert len(contents) == 5
    assert [p.text for p in latest.parts] == ["Attached artifact 'notes.md' (version 1, text/plain, 12 bytes):",
                                              "second draft"]
    assert pinned.parts[1].text == "first draft" and "version 0" in (pinned.parts[0].text or "")
    blob = chart.parts[1].proto
    assert blob is not None and (blob.inline_data.mime_type, blob.inline_data.data) == ("image/png", PNG)
    assert all(c.role == "user" for c in (latest, pinned, chart))

    a = built.accounting
    assert a.attachment_bytes >= len(PNG) + len("first draft") + len("second draft")
    assert a.attachment_tokens == -(-a.attachment_bytes // 4)
    assert a.request_bytes == bare.accounting.request_bytes + a.attachment_bytes + 3 * 64
    assert a.prefix_fingerprint == bare.accounting.prefix_fingerprint, "attachments stay out of the cached head"
    assert a.envelope_fingerprint != bare.accounting.envelope_fingerprint
    assert a.proto.input == bare.accounting.proto.input and a.proto.history == bare.accounting.proto.history


async def test_after_the_tool_results_the_input_opens_with(client: ContextClient) -> None:
    s = await _session(client)
    call = pb.AppendEventRequest(parent=s)
    part = call.event.content.parts.add()
    call.event.author, call.event.content.role = "agent", "model"
    part.function_call.id, part.function_call.name = "c1", "lookup"
    await client.stub.AppendEvent(call)
    await client.save_artifact(s, "found.txt", "what the lookup found")
    result = pb.BuildContextRequest(session=s, attachments=[pb.BuildContextRequest().attachments.add(name="found.txt")])
    response = result.input.add(role="user")
    response.parts.add().function_response.id = "c1"
    response.parts[0].function_response.name = "lookup"
    built = await client.stub.BuildContext(result)
    roles = [(c.role, c.parts[0].WhichOneof("data")) for c in built.request.contents]
    assert roles == [("model", "function_call"), ("user", "function_response"), ("user", "text")]
    assert built.request.contents[2].parts[1].text == "what the lookup found"


async def test_a_truncated_history_keeps_its_attachments(client: ContextClient) -> None:
    """A bounded TRUNCATE build reads only the newest events (building.tail):
    the history budget leaves attachments alone."""
    s = await _session(client)
    for i in range(6):
        await client.append_event(s, f"message number {i} " * 10)
    await client.save_artifact(s, "long.txt", "y" * 3000)
    policy = policy_pb2.SelectionPolicy(max_bytes=700, overflow=policy_pb2.OVERFLOW_MODE_TRUNCATE)
    built = await client.build_context(s, ["latest"], attachments=["long.txt"], policy=policy)
    assert 0 < built.accounting.events_selected < 6 and built.accounting.units_dropped > 0
    assert built.contents[-2].parts[1].text == "y" * 3000 and built.contents[-1].text == "latest"
    assert built.accounting.attachment_bytes > 3000 > built.accounting.proto.history.bytes


async def test_a_missing_artifact_or_version_is_not_found_by_name(client: ContextClient) -> None:
    s = await _session(client)
    await client.save_artifact(s, "there.txt", "here")
    with pytest.raises(NotFoundError) as missing:
        await client.build_context(s, ["hi"], attachments=["there.txt", "nowhere.txt"])
    err = missing.value
    assert err.reason_name == "ARTIFACT_NOT_FOUND" and err.metadata == {"version": "latest"}
    assert [(v.field, "nowhere.txt" in v.description) for v in err.field_violations] == [("attachments[1]", True)]
    with pytest.raises(NotFoundError) as version:
        await client.build_context(s, ["hi"], attachments=[ArtifactRef("there.txt", 7)])
    assert version.value.metadata == {"version": "7"}
    # Session artifacts are the session's own.
    other = await _session(client)
    with pytest.raises(NotFoundError):
        await client.build_context(other, ["hi"], attachments=["there.txt"])


async def test_over_the_budget_is_refused_naming_the_artifact(client: ContextClient) -> None:
    s = await _session(client, selection=policy_pb2.SelectionPolicy(max_attachment_bytes=1000))
    await client.save_artifact(s, "small.txt", "x" * 100)
    await client.save_artifact(s, "big.bin", bytes(2000))
    assert (await client.build_context(s, ["hi"], attachments=["small.txt"])).accounting.attachment_bytes > 100
    with pytest.raises(BudgetExceededError) as over:
        await client.build_context(s, ["hi"], attachments=["small.txt", "big.bin"])
    err = over.value
    assert err.reason_name == "ATTACHMENT_BUDGET_EXCEEDED" and err.limit == "max_attachment_bytes"
    assert err.metadata["allowed_bytes"] == "1000" and int(err.metadata["measured_bytes"]) >= 2100
    assert [v.field for v in err.field_violations] == ["attachments[1]"]
    assert "big.bin" in err.field_violations[0].description
    # The per-call policy overrides the session's, tokens included.
    wide = policy_pb2.SelectionPolicy(max_attachment_bytes=10_000)
    built = await client.build_context(s, ["hi"], attachments=["small.txt", "big.bin"], policy=wide)
    assert built.accounting.attachment_bytes >= 2100
    with pytest.raises(BudgetExceededError) as tokens:
        await client.build_context(s, ["hi"], attachments=["small.txt", "big.bin"],
                                   policy=policy_pb2.SelectionPolicy(max_attachment_bytes=10_000,
                                                                     max_attachment_tokens=100))
    assert tokens.value.limit == "max_attachment_tokens"
    # The request budget counts them too.
    with pytest.raises(BudgetExceededError) as request:
        await client.build_context(s, ["hi"], attachments=["small.txt", "big.bin"],
                                   policy=policy_pb2.SelectionPolicy(max_attachment_bytes=10_000,
                                                                     max_request_bytes=2000))
    assert request.value.reason_name == "REQUEST_CONTEXT_BUDGET_EXCEEDED"


async def test_bad_references_are_invalid_argument(client: ContextClient) -> None:
    s = await _session(client)
    with pytest.raises(InvalidArgumentError) as bad:
        await client.build_context(s, ["hi"], attachments=["../etc/passwd", ArtifactRef("ok", -1)])
    assert bad.value.reason_name == "INVALID_BUILD_CONTEXT_REQUEST"
    assert [v.field for v in bad.value.field_violations] == ["attachments[0].name", "attachments[1].version"]
    with pytest.raises(InvalidArgumentError) as many:
        await client.build_context(s, ["hi"], attachments=["a"] * 65)
    assert [v.field for v in many.value.field_violations] == ["attachments"]


async def test_another_apps_artifacts_are_refused(server_factory: ServerFactory, certs_dir: pathlib.Path) -> None:
    server = await server_factory(
        require_client_cert=True, dev_anonymous_apps=[],
        app_grants={SAMPLE_AGENT_ID: ["shop"], CONTEXT_SERVICE_ID: ["other"]},
    )
    async with client_of(server, certs_dir, "context-client") as owner:
        theirs = await _session(owner, app="other")
        await owner.save_artifact(theirs, "secret.txt", "theirs")
        await owner.save_artifact(theirs, "user:secret.txt", "theirs too")
        assert (await owner.build_context(theirs, ["hi"], attachments=["secret.txt"])).accounting.attachment_bytes
    async with client_of(server, certs_dir, "agent-client") as agent:
        with pytest.raises(PermissionDeniedError) as denied:
            await agent.build_context(theirs, ["hi"], attachments=["secret.txt", "user:secret.txt"])
        assert (denied.value.reason_name, denied.value.metadata) == ("APP_NOT_ALLOWED", {"app": "other"})
        mine = await _session(agent, app="shop")
        with pytest.raises(NotFoundError):
            await agent.build_context(mine, ["hi"], attachments=["user:secret.txt"])


async def test_spans_carry_counts_sizes_and_digests_only(client: ContextClient) -> None:
    exporter = span_exporter()
    s = await _session(client)
    saved = await client.save_artifact(s, "user:diary-of-alice.txt", "the secret plans")
    await client.build_context(s, ["hi"], attachments=["user:diary-of-alice.txt"])
    spans = [sp for sp in exporter.get_finished_spans() if sp.name == "context.attachments"]
    assert spans
    attributes = dict(spans[-1].attributes or {})
    assert "diary" not in repr(attributes) and "secret" not in repr(attributes)
    assert attributes["attachment.count"] == 1 and attributes["attachment.user_scoped"] == 1
    assert attributes["attachment.bytes"] == len("the secret plans")
    assert list(attributes["attachment.sha256"]) == [saved.sha256]  # type: ignore[arg-type]


# --- Generate and StreamGenerate through the cache service ------------------------------


@pytest.fixture
async def pair(certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ServicePair]:
    async with pair_maker(certs_dir, tmp_path, cache_defaults=CACHE_DEFAULTS) as make:
        yield await make()


@pytest.fixture
async def agent(pair: ServicePair, certs_dir: pathlib.Path) -> AsyncIterator[ContextClient]:
    async with ContextClient(secure_channel(pair.context_port, certs_dir), timeout=60) as c:
        yield c


async def _stored(client: ContextClient, session: str) -> list[str]:
    return [e.text for e in (await client.list_events(session)).items]


async def test_generate_sends_the_attachment_and_stores_none_of_it(agent: ContextClient) -> None:
    s = await _session(agent, cache=True)
    await agent.save_artifact(s, "brief.md", "Destination: Lisbon. Budget: small. " * 20)
    await agent.save_artifact(s, "user:photo.png", PNG, mime_type="image/png")
    plain = await agent.generate(s, "Summarize the brief.")
    attached = await agent.generate(s, "Summarize the brief.", attachments=["brief.md", "user:photo.png"])
    assert attached.accounting.attachment_bytes >= len(PNG) + 700
    assert attached.usage is not None and plain.usage is not None
    assert attached.usage.prompt_tokens > plain.usage.prompt_tokens + 200, "the model received the attachments"
    assert attached.text != plain.text
    assert await _stored(agent, s) == ["Summarize the brief.", plain.text, "Summarize the brief.", attached.text]
    after = await agent.build_context(s, ["next"])
    assert all("Attached artifact" not in c.text for c in after.contents)

    stream = agent.stream_generate(s, "Once more, streamed.", attachments=[ArtifactRef("brief.md", 0)])
    chunks = [chunk async for chunk in stream]
    assert chunks and stream.result is not None
    assert stream.result.accounting.attachment_bytes > 700


async def test_a_runner_driven_turn_attaches_after_the_stored_history(agent: ContextClient) -> None:
    """TURN_STORAGE_NONE (ADK's Runner stored the user message itself): the
    attachment follows the stored history, and nothing is appended."""
    s = await _session(agent, cache=True)
    await agent.append_event(s, "Please read the attached notes.")
    await agent.save_artifact(s, "user:notes.txt", "Notes: bring an umbrella. " * 10)
    turn = await agent.generate(s, storage=pb.TURN_STORAGE_NONE, attachments=["user:notes.txt"])
    assert turn.accounting.attachment_bytes > 250 and turn.reply.text
    assert await _stored(agent, s) == ["Please read the attached notes."]
    built = await agent.build_context(s, attachments=["user:notes.txt"])
    assert built.contents[0].text == "Please read the attached notes."
    assert built.contents[-1].parts[1].text == "Notes: bring an umbrella. " * 10


async def test_a_missing_attachment_stores_no_input(agent: ContextClient) -> None:
    s = await _session(agent)
    with pytest.raises(NotFoundError) as missing:
        await agent.generate(s, "Use the file.", attachments=["nope.txt"])
    assert [v.field for v in missing.value.field_violations] == ["attachments[0]"]
    assert await _stored(agent, s) == []
    with pytest.raises(InvalidArgumentError) as bad:
        await agent.stream_generate(s, "Use it.", attachments=[ArtifactRef("x", -2)]).final_result()
    assert [v.field for v in bad.value.field_violations] == ["turn.attachments[0].version"]


async def test_generate_over_the_attachment_budget_is_refused(agent: ContextClient) -> None:
    s = await _session(agent, selection=policy_pb2.SelectionPolicy(max_attachment_bytes=500))
    await agent.save_artifact(s, "big.bin", bytes(1000))
    with pytest.raises(BudgetExceededError) as over:
        await agent.generate(s, "Look at this.", attachments=["big.bin"])
    assert over.value.reason_name == "ATTACHMENT_BUDGET_EXCEEDED"
    assert [v.field for v in over.value.field_violations] == ["attachments[0]"]


async def test_the_leased_prefix_stops_before_the_attachment(agent: ContextClient) -> None:
    """Two sessions with the same history attach different artifacts to the
    same question: both lease the same prefix (the history), so the second
    is served from the cache the first wrote."""
    served = []
    for content in ("Attachment A: the first one. " * 30, "Attachment B: another one entirely. " * 30):
        s = await _session(agent, cache=True)
        for i in range(3):
            await agent.generate(s, f"Tell me about city number {i}, at some length please.")
        await agent.save_artifact(s, "file.txt", content)
        turn = await agent.generate(s, "What does the file say?", attachments=["file.txt"])
        assert turn.reply.proto.cache_metadata.prefix_fingerprint == turn.accounting.prefix_fingerprint
        served.append(turn.reply.proto.cache_metadata)
    assert served[0].prefix_fingerprint == served[1].prefix_fingerprint
    assert served[1].state in (STATE.CACHE_STATE_HIT, STATE.CACHE_STATE_GROWN)

