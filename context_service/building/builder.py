"""The context builder: one bounded, secret-pruned model request for a
session, as BuildContext answers it and as every Generate turn sends it.
Read-only.

Effective config and policy, the cached history records, then the pure
pipeline in ``context_service.domain.selection`` (select, optionally
compress, account). Domain types in, domain types out: the servicer and the
cache client map (``context_service.mapping``). Request contents keep the
transport form they arrived in, and stored events' records keep theirs
(``building.history``), so an edge can send the result without converting
anything again.

A session whose config enables memory retrieval (``RetrievalPolicy``) has
its memory section filled here too: the newest user text (the input's,
else the selected history's) searches the user's memory through
``ports.MemoryRetriever``, and the matches follow the request's own memory.
The memory is sent after the history, right before the current input
(``RequestParts.current``), so it never enters the cached prefix.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentctx_common.errors import FieldViolation, InvalidArgument, Unimplemented
from agentctx_common.reasons import Reason
from context_service.building.attachments import AttachmentLoader
from context_service.building.history import HistoryCache, without
from context_service.building.retractions import honoured
from context_service.building.tail import TailReader, bounded
from context_service.building.types import BuildRequest, BuiltContext, RequestContent
from context_service.domain import attachments as att
from context_service.domain import selection as sel
from context_service.domain.config import ContextConfig, SelectionPolicy
from context_service.domain.event_validation import content_violations
from context_service.domain.limits import Limits
from context_service.domain.memory import retrieval_query
from context_service.domain.model import SessionKey
from context_service.domain.selection import telemetry
from context_service.domain.selection.errors import compress_not_available
from context_service.domain.selection.records import Render
from context_service.domain.session_records import SessionHead
from context_service.domain.validation import selection_violations
from context_service.ports import Compressors, MemoryRetriever, SessionHeads

log = logging.getLogger("agentctx.context.selection")

_MEMO_MAX = 512


@dataclass(frozen=True, slots=True)
class _Effective:
    stored: ContextConfig
    config: ContextConfig
    policy: SelectionPolicy
    keys: sel.SecretKeys


class ContextBuilder:
    """``effective_config``: a session's stored config over the server's
    defaults. ``compressors``: overflow COMPRESS (None: COMPRESS is
    UNIMPLEMENTED COMPRESS_NOT_AVAILABLE). ``tail``: bounded TRUNCATE builds
    read only the newest events (None: every build reads ``history``).
    ``retriever``: memory for a retrieval policy (None: the policy is
    ignored). ``attachments``: loads the artifacts a request attaches (None: a request
    attaching any is UNIMPLEMENTED)."""

    def __init__(
        self,
        *,
        heads: SessionHeads,
        history: HistoryCache,
        render: Render,
        limits: Limits,
        effective_config: Callable[[ContextConfig], ContextConfig],
        compressors: Compressors | None = None,
        tail: TailReader | None = None,
        retriever: MemoryRetriever | None = None,
        attachments: AttachmentLoader | None = None,
    ) -> None:
        self.heads = heads
        self.retriever = retriever
        self.attachments = attachments
        self.history = history
        self.tail = tail
        self.compressors = compressors
        self._render = render
        self._limits = limits
        self._effective_config = effective_config
        # Effective policies and system-instruction records, per app.
        self._memo: dict[Any, Any] = {}

    async def head(self, key: SessionKey) -> SessionHead:
        """The session's head (NOT_FOUND SESSION_NOT_FOUND)."""
        return await self.heads.get(key)

    async def build(
        self,
        session: SessionHead,
        request: BuildRequest,
        *,
        remaining: float | None = None,
        exclude_events: frozenset[str] = frozenset(),
    ) -> BuiltContext:
        """The context for an authorized caller and a session already read
        (``head``; Generate passes the head after appending its input).
        ``remaining``: seconds left for an overflow COMPRESS summary.
        ``exclude_events``: ids of stored events to leave out of the history
        (Generate's own input events, sent as the current input)."""
        config, policy, keys = self._effective(session.config, request.policy)
        inputs, memory = self._contents(request, keys)
        attached = await self._attach(session.key, request.attachments, policy, keys)
        instruction = self._instruction(request.system_instruction, keys)
        tail = self.tail
        if tail is None or not bounded(policy):
            view = honoured(await self.history.load(session, keys))
            if exclude_events:
                view = without(view, exclude_events)

        with telemetry.build_span(policy) as build_span:
            if tail is not None and bounded(policy):
                # Only the newest events the budget can take are read (``building.tail``).
                selection, view = await tail.select(session, keys, inputs, policy, exclude_events)
            else:
                selection = sel.select(view.records, inputs, policy, compaction_index=view.compaction_index, memo=view.memo)
            if selection.pending is not None:
                if self.compressors is None:
                    raise compress_not_available()
                compressor = await self.compressors.compressor(session.key, config, remaining=remaining)
                summary = await compressor(selection.pending)
                selection = sel.finish_compression(selection, summary, keys, self._render)
            if config.retrieval.enabled and self.retriever is not None:
                memory = memory + await self._retrieved(session.key, config, inputs, selection, keys, remaining)
            if attached:
                # As rendered, with the (calibrated) estimate the request uses.
                att.check_budget([r.name for r in request.attachments], [c.size for c in attached], policy,
                                 selection.bytes_per_token)
            with telemetry.envelope_span() as envelope_span:
                settings = request.settings
                parts = sel.RequestParts(
                    model=request.model or config.model,
                    system_instruction=instruction,
                    tools=settings.tools,
                    tool_config=settings.tool_config,
                    generation_config=settings.generation_config,
                    memory=memory,
                    inputs=inputs,
                    attachments=attached,
                )
                # After budgets and compression, on whole units: every call
                # answered right after it, no response without its call.
                selection, parts = sel.pair_calls(selection, parts, self._render)
                accounting = sel.account(selection, parts, policy)
                telemetry.record(build_span, envelope_span, accounting)
        log.debug(
            "context built",
            extra={
                "events_selected": accounting.events_selected, "request_bytes": accounting.request.bytes,
                "envelope_fingerprint": accounting.envelope_fingerprint,
                "calls_synthesized": selection.calls_synthesized, "responses_moved": selection.responses_moved,
                "responses_dropped": selection.responses_dropped,
            },
        )
        return BuiltContext(parts, request.settings, selection, accounting, config, view.memo, {})

    async def resolve_attachments(self, key: SessionKey, refs: Sequence[att.AttachmentRef]) -> None:
        """NOT_FOUND for the first reference that names no artifact version
        (a turn asks before it stores its input)."""
        if refs:
            await self._loader().resolve(key, refs)

    def _loader(self) -> AttachmentLoader:
        if self.attachments is None:
            raise Unimplemented("this server does not attach artifacts", reason=Reason.UNIMPLEMENTED)
        return self.attachments

    async def _attach(
        self, key: SessionKey, refs: Sequence[att.AttachmentRef], policy: SelectionPolicy, keys: sel.SecretKeys
    ) -> list[sel.ContentRecord]:
        return await self._loader().load(key, refs, policy, keys) if refs else []

    def _effective(
        self, stored: ContextConfig, call: SelectionPolicy | None
    ) -> tuple[ContextConfig, SelectionPolicy, sel.SecretKeys]:
        """Effective config, policy and key set. The session head reader hands
        back the same config object until the config changes, so the overlay,
        validation and key set are worked out once per (config, override)."""
        memo = self._memo
        slot = ("policy", id(stored), call)
        hit = memo.get(slot)
        if hit is not None and hit.stored is stored:
            return hit.config, hit.policy, hit.keys
        config = self._effective_config(stored)
        policy = sel.effective_policy(config.selection, call)
        violations = selection_violations(policy, "policy")
        if violations:
            raise InvalidArgument.fields(violations, reason=Reason.INVALID_SELECTION_POLICY)
        keys = sel.secret_keys(policy)
        self._remember(slot, _Effective(stored, config, policy, keys))
        return config, policy, keys

    def _instruction(self, si: RequestContent | None, keys: sel.SecretKeys) -> sel.ContentRecord | None:
        """The system instruction's record, remembered by its identity (a
        different encoding of an equal value only costs a miss)."""
        if si is None:
            return None
        if si.identity is None:
            return self._record(si, keys)
        slot = ("instruction", keys.fingerprint, si.identity)
        hit: sel.ContentRecord | None = self._memo.get(slot)
        if hit is None:
            hit = self._record(si, keys)
            self._remember(slot, hit)
        return hit

    def _remember(self, slot: Any, value: Any) -> None:
        if len(self._memo) >= _MEMO_MAX:
            self._memo.clear()
        self._memo[slot] = value

    async def _retrieved(self, key: SessionKey, config: ContextConfig, inputs: list[sel.ContentRecord],
                         selection: sel.Selection, keys: sel.SecretKeys,
                         remaining: float | None) -> list[sel.ContentRecord]:
        """The retrieval policy's memory: records of the matches for the
        newest user text."""
        assert self.retriever is not None
        query = retrieval_query([r.content for r in inputs]) or retrieval_query(
            [r.content for r in selection.history])
        if not query:
            return []
        found = await self.retriever.retrieve(key, query, config.retrieval, remaining)
        return [self._record(RequestContent(c), keys) for c in found]

    def _contents(
        self, request: BuildRequest, keys: sel.SecretKeys
    ) -> tuple[list[sel.ContentRecord], list[sel.ContentRecord]]:
        """Validated, pruned records of the current input and the memory."""
        violations: list[FieldViolation] = []
        out: dict[str, list[sel.ContentRecord]] = {"input": [], "memory": []}
        for name, given in (("input", request.inputs), ("memory", request.memory)):
            records = out[name]
            for i, c in enumerate(given):
                violations += content_violations(c.content, self._limits, f"{name}[{i}]")
                records.append(self._record(c, keys))
        if violations:
            raise InvalidArgument.fields(violations, reason=Reason.INVALID_CONTENT)
        return out["input"], out["memory"]

    def _record(self, c: RequestContent, keys: sel.SecretKeys) -> sel.ContentRecord:
        """A request content as a record; its transport form is reused as
        sent unless pruning changed it."""
        content, rendered, render = c.content, c.rendered, self._render
        return sel.content_record(
            content, keys, lambda pruned: rendered if pruned is content and rendered is not None else render(pruned)
        )
