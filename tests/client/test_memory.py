"""The client's memory calls (add_session_to_memory, add_memory,
search_memory, delete_memory) against a real context server on
127.0.0.1:0, on every backend."""

from __future__ import annotations

import pathlib
from collections.abc import AsyncIterator

import pytest

from agentctx_client import (
    AlreadyExistsError,
    ContextClient,
    InvalidArgumentError,
    MemoryAdded,
    NotFoundError,
    TlsConfig,
    connect,
)
from tests.sessions.helpers import migrate
from tests.support.servers import context_settings, start_context


@pytest.fixture
async def client(db_url: str, certs_dir: pathlib.Path, tmp_path: pathlib.Path) -> AsyncIterator[ContextClient]:
    await migrate(db_url)
    server = await start_context(context_settings(certs_dir, tmp_path, database_url=db_url))
    tls = TlsConfig(ca=certs_dir / "ca.pem", cert=certs_dir / "agent-client.pem", key=certs_dir / "agent-client.key",
                    server_name="localhost")
    try:
        async with connect(f"127.0.0.1:{server.port}", tls=tls, timeout=30) as c:
            yield c
    finally:
        await server.stop(None)


async def test_memory_round_trip(client: ContextClient) -> None:
    session = await client.create_session("shop", "alice", session_id="s1")
    await client.append_event(session.name, "My sister Ana lives in Porto")
    assert await client.add_session_to_memory(session.name) == MemoryAdded(1, 0)
    assert await client.add_session_to_memory(session.name) == MemoryAdded(0, 1)

    note = await client.add_memory("shop", "alice", "Ana's birthday is on 12 June", metadata={"about": "ana"})
    assert note.name.startswith("apps/shop/users/alice/memories/mem-") and note.metadata == {"about": "ana"}
    again = await client.add_memory("shop", "alice", "Ana's birthday is on 12 June", metadata={"about": "ana"},
                                    memory_id=note.id)
    assert again == note
    with pytest.raises(AlreadyExistsError):
        await client.add_memory("shop", "alice", "something else", memory_id=note.id)

    matches = await client.search_memory("shop", "alice", "Where does Ana live?")
    assert matches[0].memory.session == session.name
    assert {m.memory.text for m in matches} == {"My sister Ana lives in Porto", "Ana's birthday is on 12 June"}
    only = await client.search_memory("shop", "alice", "ana", metadata_filter={"about": "ana"}, limit=5)
    assert [m.memory for m in only] == [note]

    await client.delete_memory(note.name)
    with pytest.raises(NotFoundError):
        await client.delete_memory(note.name)
    with pytest.raises(InvalidArgumentError) as bad:
        await client.search_memory("shop", "alice", "...")
    assert [v.field for v in bad.value.field_violations] == ["query"]
