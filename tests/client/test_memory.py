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
    MemoryRetrieval,
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


async def test_ranked_search_and_memory_retrieval(client: ContextClient) -> None:
    await client.add_memory("shop", "alice", "Ana has a pet parrot", memory_id="pet")
    await client.add_memory("shop", "alice", "Ana lives in Porto", memory_id="city")
    ranked = await client.search_memory_ranked("shop", "alice", "Where does Ana live?")
    # No embedding model configured: lexical, every match with its lexical rank.
    assert ranked.ranking == "LEXICAL" and not ranked.semantic_unavailable
    assert [(m.memory.id, m.lexical_rank, m.vector_rank) for m in ranked.matches] == [("city", 1, 0), ("pet", 2, 0)]

    session = await client.create_session("shop", "alice", session_id="s2", memory_retrieval=MemoryRetrieval(limit=1))
    assert session.proto.config.retrieval.enabled and session.proto.config.retrieval.limit == 1
    built = await client.build_context(session.name, ["What pet does Ana have?"])
    assert [c.parts[0].text for c in built.contents] == ["Ana has a pet parrot", "What pet does Ana have?"]
    off = await client.set_memory_retrieval(session.name, None)
    assert off.proto.config.HasField("retrieval") and not off.proto.config.retrieval.enabled
    built = await client.build_context(session.name, ["What pet does Ana have?"])
    assert [c.parts[0].text for c in built.contents] == ["What pet does Ana have?"]
