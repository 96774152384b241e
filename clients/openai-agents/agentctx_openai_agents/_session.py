"""``AgentCtxSession``: the OpenAI Agents SDK's ``Session`` over the
agentctx context service."""

from __future__ import annotations

import asyncio
import uuid
from typing import TYPE_CHECKING, Any

from agentctx_client import AlreadyExistsError, ContextClient, Event, NotFoundError, session_name
from agentctx_openai_agents import _items
from agentctx_openai_agents._items import Stored

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory import OpenAIResponsesCompactionArgs, SessionSettings

    from agentctx.context.v1.policy_pb2 import ContextConfig


# Events per ListEvents page (the most the service returns).
_PAGE = 1000


class AgentCtxSession:
    """A conversation stored as agentctx events, one per item.

    ``session_id`` is the agentctx session id in ``app`` for ``user``
    (created at the first ``add_items``, with ``model`` and ``config``, the
    session's agentctx ContextConfig, when given). Items read back byte for byte, in
    the order they were added; ``pop_item`` appends a retraction and
    deletes nothing; ``clear_session`` deletes the session. Several
    processes (and replicas of the context service) may share a session:
    each read is one ListEvents from the last event seen (included: a
    session deleted and created again under the name shows another event
    there, and is read again whole), so it fetches only what is new.
    """

    session_settings: SessionSettings | None = None

    def __init__(self, session_id: str, client: ContextClient, *, app: str, user: str = "user",
                 model: str = "", config: ContextConfig | None = None,
                 session_settings: SessionSettings | None = None) -> None:
        self.session_id = session_id
        self.config = config
        self.client = client
        self.app = app
        self.user = user
        self.model = model
        self.session_settings = session_settings
        self.name = session_name(app, user, session_id)
        self._live: list[Stored] = []
        self._seen = 0
        self._last_id = ""
        self._names: dict[str, str] = {}
        self._created = False
        # The latest COMPACTION event's record, once one is stored.
        self._compaction: Any = None
        self._lock = asyncio.Lock()

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The items, oldest first; with ``limit``, the newest ``limit``."""
        async with self._lock:
            await self._refresh()
            live = self._live if limit is None else self._live[-limit:] if limit > 0 else []
            return [_items.loads(s.item_json) for s in live]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        if not items:
            return
        async with self._lock:
            await self._ensure_session()
            values: list[dict[str, Any]] = [dict(i) for i in items]
            self._names.update(_items.call_names(values))
            if any(i.get("type") == "function_call_output" and i.get("call_id") not in self._names for i in values):
                await self._refresh()  # the call may be another process's
            events = [_items.item_event(item, f"oa.{uuid.uuid4().hex}", self._names) for item in values]
            if len(events) == 1:
                stored: tuple[Event, ...] = ((await self.client.append_event(self.name, events[0])).event,)
            else:
                stored, _ = await self.client.append_events(self.name, events)
            # Consecutive after the last event this process saw: the items are
            # live without a read. Otherwise the next read fetches what came
            # between.
            if stored[0].sequence == self._seen + 1:
                for event, item in zip(stored, values, strict=True):
                    self._live.append(Stored(event.id, event.sequence, _items.dumps(item)))
                self._saw(stored[-1])

    async def pop_item(self) -> TResponseInputItem | None:
        """The newest item, retracted: later reads leave it out; its event
        stays stored."""
        async with self._lock:
            await self._refresh()
            if not self._live:
                return None
            newest = self._live[-1]
            stored = (await self.client.append_event(self.name, _items.pop_event(newest))).event
            if stored.sequence == self._seen + 1:
                _items.retract(self._live, newest.event_id)
                self._saw(stored)
            else:
                await self._refresh()
            item: TResponseInputItem = _items.loads(newest.item_json)
            return item

    async def clear_session(self) -> None:
        async with self._lock:
            try:
                await self.client.delete_session(self.name)
            except NotFoundError:
                pass
            self._reset()
            self._names, self._created = {}, False

    async def _ensure_session(self) -> None:
        if self._created:
            return
        try:
            await self.client.create_session(self.app, self.user, session_id=self.session_id, model=self.model,
                                             config=self.config)
        except AlreadyExistsError:
            pass
        self._created = True

    def _reset(self) -> None:
        self._live, self._seen, self._last_id, self._compaction = [], 0, "", None

    def _saw(self, event: Event) -> None:
        self._seen, self._last_id = event.sequence, event.id

    async def _events(self, after_sequence: int) -> list[Event]:
        return [e async for e in self.client.iter_events(self.name, after_sequence=after_sequence,
                                                         include_compactions=True, page_size=_PAGE)]

    async def _refresh(self) -> None:
        """Reads the events after the last one seen, in one ListEvents when
        few are new. A session deleted elsewhere is empty; one deleted and
        created again (its event at the last sequence seen is another one,
        or none) is read again whole."""
        try:
            events = await self._events(max(self._seen - 1, 0))
            if self._seen:
                if events and events[0].sequence == self._seen and events[0].id == self._last_id:
                    events = events[1:]
                else:
                    self._reset()
                    events = await self._events(0)
        except NotFoundError:
            self._reset()
            self._created = False
            return
        self._created = True
        if not events:
            return
        for event in events:
            if event.is_compaction and event.proto is not None:
                self._compaction = event.proto.compaction
        _items.replay(self._live, events)
        for stored in self._live[-len(events):] if events else ():
            item = _items.loads(stored.item_json)
            if isinstance(item, dict):
                self._names.update(_items.call_names([item]))
        if events[-1].sequence > self._seen:
            self._saw(events[-1])


class AgentCtxCompactionSession(AgentCtxSession):
    """An ``AgentCtxSession`` the SDK's Runner compacts after each turn
    (``run_compaction``) with agentctx's compaction: the summarizer of the
    session's model, on any provider the cache tier serves. It compacts when
    ``force`` is set or, as the SDK's own compaction session, when at least
    ``compact_after_items`` items other than user messages came after the
    last compaction. ``get_items`` then returns the summary as a developer
    message followed by the kept items; every event stays stored."""

    def __init__(self, session_id: str, client: ContextClient, *, app: str, user: str = "user",
                 model: str = "", config: ContextConfig | None = None,
                 session_settings: SessionSettings | None = None, compact_after_items: int = 10) -> None:
        super().__init__(session_id, client, app=app, user=user, model=model, config=config,
                         session_settings=session_settings)
        self.compact_after_items = compact_after_items

    async def run_compaction(self, args: OpenAIResponsesCompactionArgs | None = None) -> None:
        async with self._lock:
            await self._refresh()
            candidates = sum(1 for s in self._kept() if not _items.is_user_message(_items.loads(s.item_json)))
            if not (args or {}).get("force", False) and candidates < self.compact_after_items:
                return
            await self._ensure_session()
            await self.client.compact_session(self.name)

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        async with self._lock:
            await self._refresh()
            items: list[TResponseInputItem] = [_items.loads(s.item_json) for s in self._kept()]
            if self._compaction is not None:
                items.insert(0, {"type": "message", "role": "developer",
                                 "content": [{"type": "input_text", "text": self._compaction.summary}]})
            return items if limit is None else items[-limit:] if limit > 0 else []

    def _kept(self) -> list[Stored]:
        if self._compaction is None:
            return self._live
        first = self._compaction.first_kept_sequence
        return [s for s in self._live if s.sequence >= first]
