"""``AgentCtxMemoryService``: ADK's ``BaseMemoryService`` over the context
service's MemoryService: sessions stored by ``AgentCtxSessionService`` go
to memory by name (one entry per user or model event with text, again only
the new ones), explicit entries are added, and search is the service's
BM25 ranking, best first."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Protocol

from google.adk.memory.base_memory_service import BaseMemoryService, SearchMemoryResponse
from google.adk.memory.memory_entry import MemoryEntry
from google.adk.sessions.session import Session
from google.genai import types
from typing_extensions import override

from agentctx_adk._session_service import AgentCtxSessionService
from agentctx_client import MemoryAdded, MemoryMatch, NotFoundError
from agentctx_client import MemoryEntry as CtxEntry


class MemoryCalls(Protocol):
    """The memory calls this service makes: ContextClient's, or a tool
    token's (agentctx_adk._tool_context), bound to the token's user."""

    async def add_session_to_memory(self, session: str) -> MemoryAdded: ...

    async def add_memory(self, app: str, user: str, text: str, *, metadata: Mapping[str, str] | None = ...,
                         author: str = ..., memory_id: str = ...) -> CtxEntry: ...

    async def search_memory(self, app: str, user: str, query: str, *, limit: int = ...) -> list[MemoryMatch]: ...

    async def delete_memory(self, name: str) -> None: ...


class AgentCtxMemoryService(BaseMemoryService):
    """Memory of the users of the sessions ``sessions`` serves (the same
    client and app prefix). ``calls`` makes the calls instead of that
    client (AgentCtxToolPlugin gives a tool call's token's)."""

    def __init__(self, sessions: AgentCtxSessionService, *, limit: int = 10, calls: MemoryCalls | None = None) -> None:
        self.sessions = sessions
        self.limit = limit
        self._calls = calls

    @property
    def _client(self) -> MemoryCalls:
        return self._calls or self.sessions.client

    @override
    async def add_session_to_memory(self, session: Session) -> None:
        await self._client.add_session_to_memory(
            self.sessions.session_name(session.app_name, session.user_id, session.id))

    @override
    async def add_memory(self, *, app_name: str, user_id: str, memories: Sequence[MemoryEntry],
                         custom_metadata: Mapping[str, object] | None = None) -> None:
        app = self.sessions.app_prefix + app_name
        for memory in memories:
            text = "".join(p.text or "" for p in memory.content.parts or ())
            metadata = {k: str(v) for k, v in {**(custom_metadata or {}), **memory.custom_metadata}.items()}
            await self._client.add_memory(app, user_id, text, metadata=metadata, author=memory.author or "",
                                          memory_id=memory.id or "")

    @override
    async def search_memory(self, *, app_name: str, user_id: str, query: str) -> SearchMemoryResponse:
        matches = await self._client.search_memory(self.sessions.app_prefix + app_name, user_id, query,
                                                   limit=self.limit)
        return SearchMemoryResponse(memories=[_entry(m.memory) for m in matches])

    @override
    async def delete_memory(self, *, app_name: str, user_id: str, memory_id: str | None = None) -> None:
        if memory_id is None:
            raise ValueError("AgentCtxMemoryService deletes one entry by its id")
        try:
            await self._client.delete_memory(f"apps/{self.sessions.app_prefix + app_name}/users/{user_id}"
                                             f"/memories/{memory_id}")
        except NotFoundError:
            pass


def _entry(entry: CtxEntry) -> MemoryEntry:
    role = "model" if entry.author not in ("", "user") else "user"
    return MemoryEntry(content=types.Content(role=role, parts=[types.Part(text=entry.text)]),
                       custom_metadata=dict(entry.metadata), id=entry.id, author=entry.author or None,
                       timestamp=entry.create_time.isoformat() if entry.create_time is not None else None)
