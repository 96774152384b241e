"""One agent turn as pure rules: the ids that let a retry find its earlier
attempt, the input and reply events, streamed chunks merged into the final
reply, the public cache record to store, and the errors of overflow
recovery and of an unreachable cache service.

No grpc, no storage. The orchestration is ``context_service.turns``.

Exactly once: the reply's id is derived from the input event ids (unless
the client names it), so a retry with the same input ids appends nothing
twice: the inputs are deduplicated by id, and a stored reply is returned
instead of calling the model again.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import re
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from agentctx_common.errors import (
    AgentCtxError,
    AlreadyExists,
    DeadlineExceeded,
    FieldViolation,
    ResourceExhausted,
    Unavailable,
)
from agentctx_common.reasons import Reason
from context_service.domain.event_validation import event_violations
from context_service.domain.limits import Limits
from context_service.domain.model import (
    CacheInfo,
    CacheState,
    Content,
    Event,
    FunctionCall,
    Part,
    Usage,
)

DEFAULT_AUTHOR = "model"
MAX_ID_CHARS = 128
# Author and invocation labels, as for stored events.
_LABEL = re.compile(r"[^\x00-\x1f\x7f]{1,128}")

# How soon an agent may retry after the cache service was unreachable.
CACHE_RETRY_AFTER_S = 1.0


# --- deadlines ---------------------------------------------------------------


class Deadline:
    """The agent's deadline, fixed when the turn starts, so every
    downstream call gets what is left of it (gRPC does not propagate it)."""

    def __init__(self, remaining: float | None, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._at = None if remaining is None else clock() + remaining

    def remaining(self) -> float | None:
        return None if self._at is None else max(0.0, self._at - self._clock())

    @property
    def expired(self) -> bool:
        return self._at is not None and self._clock() >= self._at


# --- ids ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class TurnIds:
    invocation_id: str
    reply_id: str


def _digest(*values: str) -> str:
    return hashlib.sha256("\x1f".join(values).encode()).hexdigest()


def turn_ids(input_ids: Sequence[str], *, invocation_id: str = "", reply_id: str = "") -> TurnIds:
    """The turn's invocation id and reply event id: the client's, or derived
    from the input event ids so that a retry derives the same ones."""
    digest = _digest(*input_ids)
    return TurnIds(invocation_id or f"inv-{digest[:32]}", reply_id or f"reply-{digest[:32]}")


def unstored_turn_ids(*, invocation_id: str = "", reply_id: str = "") -> TurnIds:
    """The ids of a turn that stores nothing (TURN_STORAGE_NONE): nothing
    is looked up by them, so what the client leaves empty is fresh."""
    fresh = uuid.uuid4().hex
    return TurnIds(invocation_id or f"inv-{fresh}", reply_id or f"reply-{fresh}")


def current_input_count(history: Sequence[Content], input_count: int) -> int:
    """How many contents at the end of a request are its current input,
    left out of the cached prefix. With TURN_STORAGE_NONE the agent's
    runner stored the user message or tool results before the call, so
    they end the history: the stored contents after the newest model
    content count as input, with the request's own (unstored) inputs."""
    trailing = 0
    for content in reversed(history):
        if content.role == "model":
            break
        trailing += 1
    return trailing + input_count


def partial_id(reply_id: str, index: int) -> str:
    """Id of the reply's ``index``-th streamed chunk event."""
    candidate = f"{reply_id}.p{index}"
    return candidate if len(candidate) <= MAX_ID_CHARS else f"p-{_digest(reply_id)[:32]}.{index}"


def call_id(reply_id: str, index: int) -> str:
    """Id of a function call the provider left without one, stable across
    retries of the turn, within the 128 characters a tool result may echo."""
    candidate = f"{reply_id}.call{index}"
    return candidate if len(candidate) <= MAX_ID_CHARS else f"call-{_digest(reply_id)[:32]}-{index}"


# --- input --------------------------------------------------------------------------


def input_violations(
    events: Sequence[Event],
    sizes: Sequence[int],
    limits: Limits,
    *,
    now: dt.datetime,
    reply_id: str = "",
    invocation_id: str = "",
    agent: str = "",
    prefix: str = "",
    require_input: bool = True,
) -> list[FieldViolation]:
    """Everything wrong with a turn's input events (``sizes``: their encoded
    sizes) and the client's reply id, invocation id and agent name.
    ``prefix``: where the turn sits in the request ("turn." in a stream).
    ``require_input``: False for a turn that stores nothing, whose input is
    usually already stored by the agent's runner."""
    v: list[FieldViolation] = []
    if require_input and not events:
        v.append(FieldViolation(f"{prefix}input", "needs at least one event: the user message or the tool results"))
    seen: set[str] = set()
    for i, (event, size) in enumerate(zip(events, sizes, strict=True)):
        path = f"{prefix}input[{i}]"
        v += event_violations(event, limits, size_bytes=size, now=now, path=path)
        if event.partial:
            v.append(FieldViolation(f"{path}.partial", "input events must be complete"))
        if event.id:
            if event.id in seen:
                v.append(FieldViolation(f"{path}.id", "repeats another input event's id"))
            seen.add(event.id)
    for name, value in (("invocation_id", invocation_id), ("agent", agent)):
        if value and not _LABEL.fullmatch(value):
            v.append(FieldViolation(prefix + name, "must be 1-128 characters without control characters"))
    if reply_id:
        if not limits.valid_id(reply_id):
            v.append(FieldViolation(f"{prefix}reply_event_id", f"must match {limits.id_pattern} and not be '-', '.' or '..'"))
        elif reply_id in seen:
            v.append(FieldViolation(f"{prefix}reply_event_id", "must differ from the input event ids"))
    return v


# --- the reply -----------------------------------------------------------------


def merge_chunks(chunks: Sequence[Content]) -> Content:
    """Streamed chunks as one content: adjacent text parts of the same kind
    (thought or not) joined, every other part kept in order. A part's
    thought signature belongs to the text it ends."""
    parts: list[Part] = []
    for chunk in chunks:
        for part in chunk.parts:
            last = parts[-1] if parts else None
            if (
                part.text is not None and last is not None and last.text is not None
                and last.thought == part.thought and not last.thought_signature
            ):
                parts[-1] = dataclasses.replace(
                    last, text=last.text + part.text, thought_signature=part.thought_signature
                )
            else:
                parts.append(part)
    return Content("model", tuple(parts))


def with_call_ids(content: Content, reply_id: str) -> Content:
    """``content`` with role "model" and an id on every function call."""
    if content.role == "model" and all(p.function_call is None or p.function_call.id for p in content.parts):
        return content
    parts = tuple(
        dataclasses.replace(p, function_call=FunctionCall(call_id(reply_id, i), p.function_call.name, p.function_call.args))
        if p.function_call is not None and not p.function_call.id
        else p
        for i, p in enumerate(content.parts)
    )
    return Content("model", parts)


@dataclass(frozen=True, slots=True)
class ModelAnswer:
    """What the model call produced, in domain terms."""

    content: Content
    usage: Usage | None
    cache: CacheInfo
    finish_reason: str = ""
    model_version: str = ""


def reply_event(answer: ModelAnswer, ids: TurnIds, *, author: str, branch: str) -> Event:
    """The stored reply. It completes the agent's turn unless it calls
    tools: their results are the next turn's input."""
    content = with_call_ids(answer.content, ids.reply_id)
    return Event(
        id=ids.reply_id,
        author=author or DEFAULT_AUTHOR,
        content=content,
        invocation_id=ids.invocation_id,
        branch=branch,
        turn_complete=not content.function_calls,
        usage=answer.usage,
        cache=answer.cache,
        finish_reason=answer.finish_reason,
        model_version=answer.model_version,
    )


def chunk_event(content: Content, ids: TurnIds, index: int, *, author: str, branch: str) -> Event:
    """A streamed chunk as a partial event (left out of later contexts)."""
    return Event(
        id=partial_id(ids.reply_id, index),
        author=author or DEFAULT_AUTHOR,
        content=Content("model", content.parts),
        invocation_id=ids.invocation_id,
        branch=branch,
        partial=True,
    )


def is_reply(event: Event) -> bool:
    """Whether a stored event with the reply's id is a model reply (and not
    an unrelated event a client stored under that id)."""
    return (
        not event.is_compaction and not event.partial
        and event.content is not None and event.content.role == "model"
    )


def reply_id_conflict() -> AlreadyExists:
    return AlreadyExists(
        "reply_event_id names a stored event that is not this turn's reply; choose another id",
        reason=Reason.REPLY_ID_CONFLICT,
    )


# --- the cache record -----------------------------------------------------------


def disabled_record(scope_fingerprint: str = "") -> CacheInfo:
    return CacheInfo(state=CacheState.BYPASS, bypass_reason="DISABLED", scope_fingerprint=scope_fingerprint)


# --- errors ---------------------------------------------------------------------


def is_transport_failure(err: AgentCtxError, deadline: Deadline) -> bool:
    """The cache service did not answer: unreachable, or past the deadline
    of the call while the agent still had time (its own DEADLINE_EXCEEDED
    answers carry a reason of their own, such as PROVIDER_TIMEOUT)."""
    if isinstance(err, Unavailable) and err.reason == Reason.CACHE_SERVICE_UNAVAILABLE:
        return True
    return isinstance(err, DeadlineExceeded) and err.reason == Reason.DEADLINE_EXCEEDED and not deadline.expired


def cache_service_unavailable(cause: AgentCtxError) -> Unavailable:
    """The turn could not reach the model. The input events stay stored: a
    retry with the same event ids completes the turn exactly once."""
    return Unavailable(
        "the cache service is unreachable; the input is stored, retry with the same event ids",
        reason=Reason.CACHE_SERVICE_UNAVAILABLE,
        metadata={"cause": cause.code.value},
        retry_after=CACHE_RETRY_AFTER_S,
    )


def is_context_overflow(err: AgentCtxError) -> bool:
    return err.reason == Reason.CONTEXT_WINDOW_EXCEEDED


def _figures(err: AgentCtxError, suffix: str = "") -> dict[str, str]:
    return {f"{k}{suffix}": v for k, v in err.metadata.items() if k in ("prompt_tokens", "context_window")}


def overflow_not_recovered(err: AgentCtxError, compaction: str) -> ResourceExhausted:
    """The provider's overflow when no compaction ran: disabled, or nothing
    could be summarized (``compaction`` says which)."""
    hint = (
        "enable compaction (config.compaction.enabled) or set a selection budget" if compaction == "DISABLED"
        else "set a selection budget, or shorten the instruction, tools, memory or input"
    )
    return ResourceExhausted(
        f"the request exceeds the model's context window and compaction could not shrink it "
        f"({compaction.lower()}); {hint}",
        reason=Reason.CONTEXT_WINDOW_EXCEEDED,
        metadata={**_figures(err), "compaction": compaction},
    )


def overflow_after_compaction(first: AgentCtxError, second: AgentCtxError, compaction_sequence: int) -> ResourceExhausted:
    """The one retry after overflow compaction overflowed again. The
    compaction stays committed; the input events stay stored."""
    return ResourceExhausted(
        "the request still exceeds the model's context window after overflow compaction; "
        "lower keep_recent_tokens or the selection budget",
        reason=Reason.CONTEXT_WINDOW_EXCEEDED_AFTER_COMPACTION,
        metadata={**_figures(first, "_before"), **_figures(second), "compaction_sequence": compaction_sequence},
    )
