"""Two context service replicas on one PostgreSQL database: each keeps its
own history cache, and each sees what the other wrote on its next call."""

from __future__ import annotations

import pathlib

import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc, session_pb2
from agentctx_common.certs import SAMPLE_AGENT_ID
from tests.selection.test_build_context_rpc import text
from tests.sessions.helpers import migrate
from tests.support.servers import context_settings, secure_channel, start_context

pytestmark = pytest.mark.postgres

NAME = "apps/app/users/u/sessions/shared"


def texts(reply: pb.BuildContextResponse) -> list[str]:
    return [c.parts[0].text for c in reply.request.contents]


async def test_replicas_see_each_others_appends_deletes_and_recreation(
    postgres_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path
) -> None:
    await migrate(postgres_url)
    servers, channels = [], []
    for name in ("a", "b"):
        settings = context_settings(
            certs_dir, tmp_path / name, database_url=postgres_url, require_client_cert=True,
            app_grants={SAMPLE_AGENT_ID: ["app"]}, dev_anonymous_apps=[],
        )
        servers.append(await start_context(settings))
        channels.append(secure_channel(servers[-1].port, certs_dir))
    a, b = (context_service_pb2_grpc.ContextServiceStub(c) for c in channels)
    try:
        build = pb.BuildContextRequest(session=NAME, input=[text("user", "now")])
        await a.CreateSession(pb.CreateSessionRequest(parent="apps/app/users/u", session_id="shared", session=session_pb2.Session()))
        for i, stub in enumerate((a, b, a)):
            await stub.AppendEvent(pb.AppendEventRequest(parent=NAME, event={"author": "user", "content": text("user", f"m{i}")}))
            # Both replicas agree after every append, whichever replica wrote it.
            assert texts(await a.BuildContext(build)) == texts(await b.BuildContext(build)) == [f"m{j}" for j in range(i + 1)] + ["now"]
        await a.DeleteSession(pb.DeleteSessionRequest(name=NAME))
        await a.CreateSession(pb.CreateSessionRequest(parent="apps/app/users/u", session_id="shared", session=session_pb2.Session()))
        for i in range(4):  # more events than before, so only the incarnation tells the sessions apart
            await a.AppendEvent(pb.AppendEventRequest(parent=NAME, event={"author": "user", "content": text("user", f"new{i}")}))
        assert texts(await b.BuildContext(build)) == [f"new{i}" for i in range(4)] + ["now"]
    finally:
        for channel in channels:
            await channel.close()
        for server in servers:
            await server.stop(None)
