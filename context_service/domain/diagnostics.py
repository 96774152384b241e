"""Developer diagnostics as pure rules: the content-free lifecycle view of
a session, and the exact confirmation that invalidating its cache scope
requires.

The view is built by copying named fields only (a whitelist): identifiers
that pass a strict shape check, counts, fingerprints, the latest
checkpoint's trigger and the public cache record. Events, summaries, state,
policy values, leases, provider resource names and credentials have no
field to land in, so no future change to the inputs can leak them.

An invalidation must repeat app, user, session, model and the *current*
scope fingerprint (read from the lifecycle view). The session is the
authorization and confirmation anchor; the cache scope itself is
{provider, app, user, model, policy}, so the invalidation drops the caches
of every session that shares it.
"""

from __future__ import annotations

import hmac
import re
from dataclasses import dataclass

from agentctx_common.errors import FailedPrecondition, FieldViolation, InvalidArgument, PreconditionViolation
from agentctx_common.reasons import Reason
from context_service.domain.compaction_rules.history import History, history_stats
from context_service.domain.config import ContextConfig
from context_service.domain.model import CacheInfo, CompactionTrigger, SessionKey

CONFIRMATION_FIELDS = ("app", "user", "session", "model", "scope_fingerprint")

MAX_MODEL_CHARS = 128
# Ids the service itself generates (uuid hex, "compaction-<hex>") or that
# clients chose under the id pattern; anything else is left out of the view.
_SAFE_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")
_SHA256_HEX = re.compile(r"[0-9a-f]{64}")
_MODEL = re.compile(r"[A-Za-z0-9][A-Za-z0-9._:/@+-]{0,127}")


@dataclass(frozen=True, slots=True)
class ScopeCounts:
    """The cache scope as GetScopeStatus reports it, or ``unreachable()``."""

    scope_fingerprint: str
    entry_count: int
    inflight_count: int
    waiter_count: int
    reachable: bool = True

    @classmethod
    def unreachable(cls) -> ScopeCounts:
        return cls("", 0, 0, 0, reachable=False)


@dataclass(frozen=True, slots=True)
class LifecycleFacts:
    """What storage knows about one session, read for a lifecycle view."""

    event_count: int
    compaction_count: int
    pending_compaction_jobs: int
    history: History


@dataclass(frozen=True, slots=True)
class Lifecycle:
    session: str
    model: str
    event_count: int
    compaction_count: int
    visible_event_count: int
    visible_tokens: int
    latest_checkpoint_id: str
    latest_compaction_event_id: str
    latest_trigger: CompactionTrigger
    latest_source_fingerprint: str
    pending_compaction_jobs: int
    scope: ScopeCounts
    latest_cache: CacheInfo | None


@dataclass(frozen=True, slots=True)
class Confirmation:
    app: str
    user: str
    session: str
    model: str
    scope_fingerprint: str

    @classmethod
    def expected(cls, key: SessionKey, model: str, scope_fingerprint: str = "") -> Confirmation:
        return cls(key.app, key.user, key.session, model, scope_fingerprint)


def _safe_id(value: str) -> str:
    return value if _SAFE_ID.fullmatch(value) else ""


def _fingerprint(value: str) -> str:
    return value if _SHA256_HEX.fullmatch(value) else ""


def resolve_model(requested: str, config: ContextConfig, default_model: str) -> str:
    """The model a diagnostic request is about: the request's, else the
    session's, else the server default. INVALID_ARGUMENT for a malformed name."""
    if requested and not _MODEL.fullmatch(requested):
        raise InvalidArgument.fields(
            [FieldViolation("model", f"must be 1-{MAX_MODEL_CHARS} characters of [A-Za-z0-9._:/@+-]")],
            reason=Reason.INVALID_DIAGNOSTICS_REQUEST,
        )
    return requested or config.model or default_model


def public_cache(info: CacheInfo | None) -> CacheInfo | None:
    """A copy of the public cache record holding only public fields."""
    if info is None:
        return None
    return CacheInfo(
        state=info.state,
        bypass_reason=info.bypass_reason,
        prefix_fingerprint=_fingerprint(info.prefix_fingerprint),
        prefix_tokens=max(0, info.prefix_tokens),
        expire_time=info.expire_time,
        scope_fingerprint=_fingerprint(info.scope_fingerprint),
        uses=max(0, info.uses),
    )


def latest_cache(history: History) -> CacheInfo | None:
    """The cache record of the newest stored model reply in view."""
    for event in reversed(history.visible):
        if event.cache is not None and not event.partial:
            return event.cache
    return None


def build_lifecycle(
    key: SessionKey, model: str, facts: LifecycleFacts, scope: ScopeCounts, *, bytes_per_token: float
) -> Lifecycle:
    history = facts.history
    stats = history_stats(history, bytes_per_token)
    compaction = history.latest_compaction
    checkpoint = compaction.compaction.checkpoint if compaction is not None and compaction.compaction else None
    return Lifecycle(
        session=key.name,
        model=model,
        event_count=facts.event_count,
        compaction_count=facts.compaction_count,
        visible_event_count=stats.visible_events,
        visible_tokens=stats.current_tokens,
        latest_checkpoint_id=_safe_id(checkpoint.checkpoint_id) if checkpoint else "",
        latest_compaction_event_id=_safe_id(compaction.id) if compaction is not None else "",
        latest_trigger=checkpoint.trigger if checkpoint else CompactionTrigger.UNSPECIFIED,
        latest_source_fingerprint=_fingerprint(checkpoint.source_fingerprint) if checkpoint else "",
        pending_compaction_jobs=facts.pending_compaction_jobs,
        scope=ScopeCounts(
            _fingerprint(scope.scope_fingerprint), max(0, scope.entry_count), max(0, scope.inflight_count),
            max(0, scope.waiter_count), scope.reachable,
        ),
        latest_cache=public_cache(latest_cache(history)),
    )


# --- confirmation -------------------------------------------------------------


def confirmation_mismatches(expected: Confirmation, given: Confirmation, *, check_fingerprint: bool) -> list[str]:
    """Names of the confirmation fields that differ. The fingerprint is
    compared only when ``check_fingerprint`` (once it is known)."""
    names = CONFIRMATION_FIELDS if check_fingerprint else CONFIRMATION_FIELDS[:-1]
    return [
        name for name in names
        if not hmac.compare_digest(getattr(expected, name).encode(), getattr(given, name).encode())
    ]


def check_confirmation(expected: Confirmation, given: Confirmation, *, check_fingerprint: bool = True) -> None:
    """FAILED_PRECONDITION naming every field that differs; the message and
    details never echo the expected values."""
    wrong = confirmation_mismatches(expected, given, check_fingerprint=check_fingerprint)
    if not wrong:
        return
    hint = " (read the current one with GetContextLifecycle)" if "scope_fingerprint" in wrong else ""
    raise FailedPrecondition(
        f"the invalidation confirmation does not match: {', '.join(wrong)}{hint}; nothing was changed",
        reason=Reason.INVALIDATION_CONFIRMATION_MISMATCH,
        metadata={"fields": ",".join(wrong)},
        precondition_violations=[
            PreconditionViolation(Reason.INVALIDATION_CONFIRMATION_MISMATCH, f"confirmation.{name}", "does not match the request")
            for name in wrong
        ],
    )


def require_confirmation(present: bool) -> None:
    if not present:
        raise InvalidArgument(
            "confirmation is required: repeat app, user, session, model and the current scope_fingerprint",
            reason=Reason.INVALIDATION_CONFIRMATION_REQUIRED,
            field_violations=[FieldViolation("confirmation", "is required")],
        )
