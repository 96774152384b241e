"""MemoryService on a real context server (127.0.0.1:0, both backends):
health and reflection list it; a session's user and model text goes to
memory once per event; search finds it with its source; memory outlives
the session; errors carry their codes, reasons and field violations;
another app's memory is PERMISSION_DENIED."""

from __future__ import annotations

import grpc
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.memory.v1 import memory_service_pb2 as mpb
from agentctx.memory.v1 import memory_service_pb2_grpc
from agentctx_common.certs import CONTEXT_SERVICE_ID, SAMPLE_AGENT_ID
from agentctx_common.errors import InvalidArgument, NotFound, PermissionDenied
from tests.sessions.conftest import ServerFactory
from tests.sessions.helpers import append_request, fields, pb_text_event, rpc_error
from tests.support.servers import secure_channel
from tests.support.spans import span_exporter

PARENT = "apps/shop/users/alice"
SESSION = f"{PARENT}/sessions/s1"
MEMORY = "agentctx.memory.v1.MemoryService"


async def _conversation(stub: context_service_pb2_grpc.ContextServiceStub) -> None:
    await stub.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="s1"))
    await stub.AppendEvent(append_request(SESSION, pb_text_event("e1", "I am planning a trip to Lisbon in May")))
    await stub.AppendEvent(append_request(SESSION, pb_text_event("e2", "Lisbon in May is warm; pack light", role="model")))
    call = pb_text_event("e3", "", role="model")
    call.content.parts[0].ClearField("text")
    call.content.parts[0].function_call.name = "book_flight"
    await stub.AppendEvent(append_request(SESSION, call))


async def test_health_and_reflection_list_memory(channel: grpc.aio.Channel) -> None:
    health = health_pb2_grpc.HealthStub(channel)
    assert (await health.Check(health_pb2.HealthCheckRequest(service=MEMORY))).status == \
        health_pb2.HealthCheckResponse.SERVING
    reflection = reflection_pb2_grpc.ServerReflectionStub(channel)
    listed = [r async for r in reflection.ServerReflectionInfo(iter([reflection_pb2.ServerReflectionRequest(list_services="")]))]
    assert MEMORY in [s.name for s in listed[0].list_services_response.service]


async def test_a_session_goes_to_memory_once_and_outlives_it(channel: grpc.aio.Channel) -> None:
    sessions = context_service_pb2_grpc.ContextServiceStub(channel)
    memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
    await _conversation(sessions)
    added = await memory.AddSessionToMemory(mpb.AddSessionToMemoryRequest(session=SESSION))
    assert (added.added_count, added.existing_count) == (2, 0)
    again = await memory.AddSessionToMemory(mpb.AddSessionToMemoryRequest(session=SESSION))
    assert (again.added_count, again.existing_count) == (0, 2)

    found = await memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query="What did I say about Lisbon?"))
    assert sorted(m.memory.event_id for m in found.matches) == ["e1", "e2"]
    assert {m.memory.session for m in found.matches} == {SESSION}
    assert {m.memory.author for m in found.matches} == {"user", "model"}
    assert all(m.score > 0 and m.memory.name.startswith(f"{PARENT}/memories/") for m in found.matches)
    assert all(m.memory.create_time.seconds > 0 for m in found.matches)

    # Memory outlives the session (as ADK's): deleting it leaves the entries.
    await sessions.DeleteSession(pb.DeleteSessionRequest(name=SESSION))
    found = await memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query="lisbon", limit=1))
    assert len(found.matches) == 1
    await memory.DeleteMemory(mpb.DeleteMemoryRequest(name=found.matches[0].memory.name))
    err = await rpc_error(memory.DeleteMemory(mpb.DeleteMemoryRequest(name=found.matches[0].memory.name)))
    assert isinstance(err, NotFound) and err.reason == "MEMORY_NOT_FOUND"
    left = await memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query="lisbon"))
    assert len(left.matches) == 1


async def test_explicit_entries_filters_and_idempotent_ids(channel: grpc.aio.Channel) -> None:
    memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
    entry = mpb.MemoryEntry(text="Alice's gate code is 4711", metadata={"kind": "fact"}, author="notes")
    first = await memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=entry, memory_id="gate"))
    assert first.name == f"{PARENT}/memories/gate"
    assert await memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=entry, memory_id="gate")) == first
    changed = mpb.MemoryEntry(text="another gate code")
    err = await rpc_error(memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=changed, memory_id="gate")))
    assert (err.code.value, err.reason) == ("ALREADY_EXISTS", "MEMORY_ALREADY_EXISTS")
    await memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=mpb.MemoryEntry(text="gate opens at 7",
                                                                                        metadata={"kind": "hours"})))
    found = await memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query="gate", metadata_filter={"kind": "fact"}))
    assert [m.memory.name for m in found.matches] == [first.name]
    assert dict(found.matches[0].memory.metadata) == {"kind": "fact"}
    # Query text that is syntax elsewhere is only words here.
    found = await memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query='gate" OR text:* NEAR(("'))
    assert len(found.matches) == 2


async def test_invalid_requests_name_their_fields(channel: grpc.aio.Channel) -> None:
    memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
    cases = [
        (memory.SearchMemory(mpb.SearchMemoryRequest(parent="apps/shop", query="x")), ["parent"], "INVALID_NAME"),
        (memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query="?! ...", limit=101)), ["query", "limit"],
         "INVALID_MEMORY_REQUEST"),
        (memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=mpb.MemoryEntry(text=" ", event_id="e1"))),
         ["memory.text", "memory.event_id"], "INVALID_MEMORY_REQUEST"),
        (memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=mpb.MemoryEntry(
            text="x", session="apps/shop/users/bob/sessions/s1"))), ["memory.session"], "INVALID_MEMORY_REQUEST"),
        (memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=mpb.MemoryEntry(text="x"), memory_id="a/b")),
         ["memory_id"], "INVALID_MEMORY_REQUEST"),
        (memory.DeleteMemory(mpb.DeleteMemoryRequest(name=f"{PARENT}/sessions/s1")), ["name"], "INVALID_NAME"),
        (memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=mpb.MemoryEntry(
            text="a\x00b", metadata={"k": "\x00"}))), ["memory.text", "memory.metadata['k']"], "INVALID_MEMORY_REQUEST"),
    ]
    for call, paths, reason in cases:
        err = await rpc_error(call)
        assert isinstance(err, InvalidArgument)
        assert (fields(err), err.reason) == (paths, reason)
    err = await rpc_error(memory.AddSessionToMemory(mpb.AddSessionToMemoryRequest(session=f"{PARENT}/sessions/nope")))
    assert isinstance(err, NotFound) and err.reason == "SESSION_NOT_FOUND"


async def test_another_apps_memory_is_denied(server_factory: ServerFactory, certs_dir) -> None:  # type: ignore[no-untyped-def]
    server = await server_factory(require_client_cert=True, dev_anonymous_apps=[],
                                  app_grants={SAMPLE_AGENT_ID: ["shop"], CONTEXT_SERVICE_ID: ["other"]})
    other = "apps/other/users/alice"
    async with secure_channel(server.port, certs_dir, "context-client") as channel:
        owner = memory_service_pb2_grpc.MemoryServiceStub(channel)
        await owner.AddMemory(mpb.AddMemoryRequest(parent=other, memory=mpb.MemoryEntry(text="secret plan"),
                                                   memory_id="m1"))
    async with secure_channel(server.port, certs_dir, "agent-client") as channel:
        agent = memory_service_pb2_grpc.MemoryServiceStub(channel)
        calls = {
            "AddSessionToMemory": agent.AddSessionToMemory(mpb.AddSessionToMemoryRequest(session=f"{other}/sessions/s1")),
            "AddMemory": agent.AddMemory(mpb.AddMemoryRequest(parent=other, memory=mpb.MemoryEntry(text="x"))),
            "SearchMemory": agent.SearchMemory(mpb.SearchMemoryRequest(parent=other, query="secret plan")),
            "DeleteMemory": agent.DeleteMemory(mpb.DeleteMemoryRequest(name=f"{other}/memories/m1")),
        }
        for method, call in calls.items():
            err = await rpc_error(call)
            assert isinstance(err, PermissionDenied) and err.reason == "APP_NOT_ALLOWED", method
        # Its own app's search does not see the other app's entry.
        found = await agent.SearchMemory(mpb.SearchMemoryRequest(parent="apps/shop/users/alice", query="secret plan"))
        assert list(found.matches) == []
    async with secure_channel(server.port, certs_dir, "context-client") as channel:
        owner = memory_service_pb2_grpc.MemoryServiceStub(channel)
        found = await owner.SearchMemory(mpb.SearchMemoryRequest(parent=other, query="secret plan"))
        assert [m.memory.name for m in found.matches] == [f"{other}/memories/m1"]


async def test_spans_carry_counts_never_text_or_queries(channel: grpc.aio.Channel) -> None:
    exporter = span_exporter()
    sessions = context_service_pb2_grpc.ContextServiceStub(channel)
    memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
    await _conversation(sessions)
    await memory.AddSessionToMemory(mpb.AddSessionToMemoryRequest(session=SESSION))
    await memory.AddMemory(mpb.AddMemoryRequest(parent=PARENT, memory=mpb.MemoryEntry(
        text="the vault word is marmalade", metadata={"secret-key": "secret-value"})))
    await memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query="marmalade vault", limit=3))
    spans = {s.name: dict(s.attributes or {}) for s in exporter.get_finished_spans() if "MemoryService" in s.name}
    assert spans[f"{MEMORY}/SearchMemory"]["memory.matches"] == 1
    assert spans[f"{MEMORY}/SearchMemory"]["memory.terms"] == 2
    assert spans[f"{MEMORY}/AddSessionToMemory"]["memory.added"] == 2
    for attributes in spans.values():
        for key, value in attributes.items():
            assert isinstance(value, (int, float, bool)) or key.startswith("rpc."), (key, value)
    dumped = repr(spans)
    assert not any(word in dumped for word in ("marmalade", "Lisbon", "secret", "alice"))


async def test_nul_characters_of_events_are_left_out(channel: grpc.aio.Channel) -> None:
    # PostgreSQL's text has no NUL; an event's JSON body carries it escaped.
    sessions = context_service_pb2_grpc.ContextServiceStub(channel)
    memory = memory_service_pb2_grpc.MemoryServiceStub(channel)
    await sessions.CreateSession(pb.CreateSessionRequest(parent=PARENT, session_id="s1"))
    await sessions.AppendEvent(append_request(SESSION, pb_text_event("e1", "tea\x00time at five")))
    added = await memory.AddSessionToMemory(mpb.AddSessionToMemoryRequest(session=SESSION))
    assert added.added_count == 1
    found = await memory.SearchMemory(mpb.SearchMemoryRequest(parent=PARENT, query="teatime"))
    assert [m.memory.text for m in found.matches] == ["teatime at five"]
