"""One agent turn, end to end: Generate and StreamGenerate.

1. The input events are appended in one transaction, all or nothing
   (idempotent by id; their number is bounded, ``max_turn_inputs``): from
   here on the input is durable, whatever fails later.
2. If every input was already stored (a retry), a stored reply with the
   turn's reply id means an earlier attempt finished: it is returned
   (deduplicated) and nothing else happens. An attempt stores its reply
   after its inputs, so a turn with a new input has no stored reply, and
   its first attempt reads none (a reply id that names another stored
   event is REPLY_ID_CONFLICT when the reply is stored).
3. The context is built as BuildContext builds it, with the input events
   left out of the history and sent as the current input, so a retry
   builds the view its first attempt would have.
4. The model is called through the cache service, in one call that leases
   the stable prefix for itself (when the session's cache policy is on:
   the cache service acquires, uses and releases the lease), and the reply
   is appended.
5. A context-window overflow before any output runs overflow compaction
   and retries once (``domain.turn_rules`` has the errors).
6. Threshold / background compaction runs at the turn boundary, on the
   config the build already read. It never fails a turn whose reply is
   stored: the next boundary tries again.

Every downstream call gets what is left of the agent's deadline, and no
model call starts once it has passed (DEADLINE_TOO_SHORT).

A turn with ``store`` False (TURN_STORAGE_NONE, for ADK's Runner, which
appends every event through its session service) skips steps 1 and 2 and
the append of step 4: the context is the stored history (the runner's user
message or tool results end it) followed by the request's input events, if
any, sent as current input but never stored; the reply comes back unstored
with a fresh id (a retry calls the model again; the cache tier keeps the
prefix). The lease's prefix stops before the stored contents after the
newest model content, as it stops before the input of a storing turn.
Overflow compaction (step 5) and turn-boundary compaction (step 6) still
run: they only append the service's own COMPACTION events over the stored
history, and neither reads the reply from storage.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Protocol

from agentctx_common.errors import AgentCtxError, AlreadyExists, DeadlineExceeded
from agentctx_common.reasons import Reason
from context_service.building.builder import ContextBuilder
from context_service.building.types import BuiltContext
from context_service.compaction.service import CompactionOutcome
from context_service.domain import turn_rules
from context_service.domain.cache_calls import CacheScope, LeaseRequest
from context_service.domain.config import ContextConfig
from context_service.domain.model import Event, SessionKey
from context_service.ports import CachePort, SessionStore
from context_service.tools.service import MintedToken, ToolContexts
from context_service.turns import telemetry
from context_service.turns.gateway import ModelGateway, cache_scope, lease_request
from context_service.turns.types import Turn, TurnResult

log = logging.getLogger("agentctx.context.turns")

__all__ = ["Turn", "TurnResult", "TurnRunner"]


class TurnCompaction(Protocol):
    """What a turn needs of compaction (``compaction.service.CompactionService``)."""

    async def compact_for_overflow(self, key: SessionKey, *, remaining: float | None = None) -> CompactionOutcome: ...

    async def maybe_compact_at_turn_boundary(
        self, key: SessionKey, *, reported_tokens: int | None = None, remaining: float | None = None,
        config: ContextConfig | None = None,
    ) -> CompactionOutcome: ...


class TurnRunner:
    def __init__(
        self, *, sessions: SessionStore, builder: ContextBuilder, compaction: TurnCompaction, cache: CachePort,
        tools: ToolContexts | None = None,
    ) -> None:
        self._sessions = sessions
        self._tools = tools
        self._builder = builder
        self._compaction = compaction
        self.gateway = ModelGateway(cache)

    # --- Generate ---------------------------------------------------------------

    async def generate(self, key: SessionKey, turn: Turn, deadline: turn_rules.Deadline) -> TurnResult:
        with telemetry.turn_span(stream=False, inputs=len(turn.inputs)) as span:
            built = await self._open(key, turn, deadline)
            if isinstance(built, TurnResult):
                telemetry.completed(span, built, stream=False)
                return built
            compactions: list[Event] = []
            first: AgentCtxError | None = None
            while True:
                try:
                    reply, deduplicated, tokens = await self._attempt(key, turn, built, deadline)
                    break
                except AgentCtxError as err:
                    if not turn_rules.is_context_overflow(err):
                        raise
                    built = await self._recover(key, turn, err, first, compactions, deadline)
                    first = err
            result = await self._finish(key, reply, built, compactions, deduplicated, deadline, tokens)
            telemetry.completed(span, result, stream=False, overflow_recovered=first is not None)
            return result

    @staticmethod
    def _lease(key: SessionKey, turn: Turn, built: BuiltContext) -> tuple[CacheScope, LeaseRequest | None]:
        scope = cache_scope(key, built.model, built.config.cache)
        # Less any input content pairing dropped (a tool result to no call).
        inputs = len(turn.inputs) - (len(turn.build.inputs) - len(built.parts.inputs))
        if not turn.store:
            inputs = turn_rules.current_input_count([r.content for r in built.selection.history], inputs)
        # Memory and attachments sit among the last contents, after the leased
        # prefix: memory retrieved anew each turn leaves the cached head as it was.
        after = len(built.parts.memory) + len(built.parts.attachments)
        return scope, lease_request(key, built.config.cache, inputs + after)

    async def _attempt(self, key: SessionKey, turn: Turn, built: BuiltContext,
                       deadline: turn_rules.Deadline) -> tuple[Event, bool, tuple[MintedToken, ...]]:
        _require_time(deadline)
        scope, lease = self._lease(key, turn, built)
        answer = await self.gateway.generate(scope, built, lease, deadline)
        return await self._store_reply(key, turn, answer, built)

    # --- StreamGenerate ---------------------------------------------------------

    async def stream(self, key: SessionKey, turn: Turn, deadline: turn_rules.Deadline) -> AsyncIterator[Event | TurnResult]:
        """Partial chunk events as the model produces them, then the result.
        The chunks are never stored: the reply holds them all, so a stream
        stores what a unary turn would (and a broken one nothing of its
        output: the retry calls the model again)."""
        with telemetry.turn_span(stream=True, inputs=len(turn.inputs)) as span:
            built = await self._open(key, turn, deadline)
            if isinstance(built, TurnResult):
                telemetry.completed(span, built, stream=True)
                yield built
                return
            compactions: list[Event] = []
            first: AgentCtxError | None = None
            reply: Event | None = None
            deduplicated = False
            tokens: tuple[MintedToken, ...] = ()
            while True:
                _require_time(deadline)
                scope, lease = self._lease(key, turn, built)
                partials: list[Event] = []
                overflow: AgentCtxError | None = None
                try:
                    async for item in self.gateway.stream(scope, built, lease, deadline):
                        if isinstance(item, turn_rules.ModelAnswer):
                            reply, deduplicated, tokens = await self._store_reply(key, turn, item, built)
                        else:
                            chunk = turn_rules.chunk_event(
                                item, turn.ids, len(partials), author=turn.author, branch=turn.branch
                            )
                            partials.append(chunk)
                            yield chunk
                except AgentCtxError as err:
                    # After output reached the agent, a second answer would be a different reply.
                    if partials or not turn_rules.is_context_overflow(err):
                        raise
                    overflow = err
                if overflow is None:
                    break
                built = await self._recover(key, turn, overflow, first, compactions, deadline)
                first = overflow
            assert reply is not None  # the gateway's stream always ends with the answer
            result = await self._finish(key, reply, built, compactions, deduplicated, deadline, tokens)
            telemetry.completed(span, result, stream=True, overflow_recovered=first is not None, chunks=len(partials))
            yield result

    # --- shared steps -----------------------------------------------------------

    async def _open(self, key: SessionKey, turn: Turn, deadline: turn_rules.Deadline) -> TurnResult | BuiltContext:
        """The reply of an earlier attempt (deduplicated), or, once the input
        is stored, the context for the model call."""
        if not turn.store:
            return await self._build(key, turn, deadline)
        # A missing attachment fails the turn before its input is stored.
        await self._builder.resolve_attachments(key, turn.build.attachments)
        # All or nothing: a turn that fails while storing its input leaves none
        # of it. One input (most turns) takes the store's group-commit path.
        if len(turn.inputs) == 1:
            appended = [await self._sessions.append_event(key, turn.inputs[0])]
        else:
            appended = await self._sessions.append_events(key, turn.inputs)
        if all(r.deduplicated for r in appended):
            stored = await self._sessions.get_event(key, turn.ids.reply_id)
            if stored is not None:
                if not turn_rules.is_reply(stored):
                    raise turn_rules.reply_id_conflict()
                return TurnResult(stored, deduplicated=True)
        return await self._build(key, turn, deadline)

    async def _build(self, key: SessionKey, turn: Turn, deadline: turn_rules.Deadline) -> BuiltContext:
        head = await self._builder.head(key)
        # An unstored input is in no history to leave it out of.
        exclude = turn.input_ids if turn.store else frozenset()
        return await self._builder.build(head, turn.build, remaining=deadline.remaining(), exclude_events=exclude)

    async def _store_reply(self, key: SessionKey, turn: Turn, answer: turn_rules.ModelAnswer,
                           built: BuiltContext) -> tuple[Event, bool, tuple[MintedToken, ...]]:
        """The stored reply, whether an earlier attempt stored it, and the
        tokens for its function calls (stored with it: none when it was
        stored before, see the servicer)."""
        event = turn_rules.reply_event(answer, turn.ids, author=turn.author, branch=turn.branch)
        if not turn.store:
            return event, False, ()
        minted = self._tools.prepare(key, event, built.config.tools) if self._tools is not None else []
        try:
            result = await self._sessions.append_event(key, event, open_calls=[row for _, row in minted])
        except AlreadyExists as err:
            if err.reason != Reason.EVENT_ID_CONFLICT:
                raise
            # A concurrent attempt of this turn stored its reply first: that one stands.
            stored = await self._sessions.get_event(key, turn.ids.reply_id)
            if stored is None or not turn_rules.is_reply(stored):
                raise turn_rules.reply_id_conflict() from None
            return stored, True, ()
        tokens = () if result.deduplicated else tuple(token for token, _ in minted)
        return result.event, result.deduplicated, tokens

    async def _recover(
        self, key: SessionKey, turn: Turn, err: AgentCtxError, first: AgentCtxError | None,
        compactions: list[Event], deadline: turn_rules.Deadline,
    ) -> BuiltContext:
        """Overflow compaction and the context for the one retry; the
        second overflow, or nothing to compact, is the error."""
        if first is not None:
            raise turn_rules.overflow_after_compaction(first, err, compactions[-1].sequence) from None
        outcome = await self._compaction.compact_for_overflow(key, remaining=deadline.remaining())
        if not outcome.compacted or outcome.event is None:
            raise turn_rules.overflow_not_recovered(err, outcome.skipped or "NOTHING_TO_COMPACT") from None
        compactions.append(outcome.event)
        log.info("context window exceeded; compacted, retrying once", extra={
            "compaction_sequence": outcome.event.sequence, "kept_events": outcome.kept_events,
            **{k: v for k, v in err.metadata.items() if k in ("prompt_tokens", "context_window")},
        })
        return await self._build(key, turn, deadline)

    async def _finish(
        self, key: SessionKey, reply: Event, built: BuiltContext, compactions: list[Event], deduplicated: bool,
        deadline: turn_rules.Deadline, tokens: tuple[MintedToken, ...] = (),
    ) -> TurnResult:
        boundary: list[Event] = []
        background = False
        if not deduplicated:
            usage = reply.usage
            reported = usage.prompt_tokens + usage.output_tokens if usage is not None and usage.prompt_tokens else None
            if reported is not None and built.accounting.attachments.tokens:
                # Attachments go with this call only, never into the history.
                reported = max(0, reported - built.accounting.attachments.tokens)
            try:
                # The build's config: the check need not read the session again.
                outcome = await self._compaction.maybe_compact_at_turn_boundary(
                    key, reported_tokens=reported, remaining=deadline.remaining(), config=built.config,
                )
            except AgentCtxError as err:
                log.warning("turn-boundary compaction failed; the reply is stored", extra={
                    "code": err.code.value, "reason": err.reason,
                })
            else:
                if outcome.compacted and outcome.event is not None:
                    boundary.append(outcome.event)
                background = outcome.background_scheduled
        return TurnResult(reply, built.accounting, (*compactions, *boundary), background, deduplicated, tokens)


def _require_time(deadline: turn_rules.Deadline) -> None:
    """Load shedding: a model call whose answer nobody waits for any more
    is not started. The input stays stored; a retry with the same ids and
    a longer deadline completes the turn once."""
    if deadline.expired:
        raise DeadlineExceeded(
            "the turn's deadline passed before the model call; the input is stored, "
            "retry with the same event ids and a longer deadline",
            reason=Reason.DEADLINE_TOO_SHORT, metadata={"remaining_ms": 0},
        )
