"""Validation of context configuration: negative, contradictory or unknown
values become field violations (INVALID_ARGUMENT with BadRequest).

Used at UpdateSession/CreateSession (the stored config) and at every call
that takes a per-call override (BuildContext, Generate, CompactSession).
"""

from __future__ import annotations

import enum
import math

from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain.compaction_rules import policy as compaction_defaults
from context_service.domain.config import (
    CachePolicy,
    CompactionPolicy,
    CompactorKind,
    ContentType,
    ContextConfig,
    RetrievalPolicy,
    SelectionPolicy,
)
from context_service.domain.tool_tokens import declaration_violations

MAX_COMPACTOR_TIMEOUT_S = 300.0
# Memory entries one turn retrieves at most (SearchMemory's own bound).
MAX_RETRIEVAL_LIMIT = 100
MAX_TTL_S = 7 * 24 * 3600.0
# Far beyond any model, and small enough that byte and token arithmetic
# stays exact in floating point.
MAX_BUDGET_BYTES = 2**50
MAX_BUDGET_TOKENS = 2**44
# Real tokenizers are 1 to 16 bytes per token; the range leaves room.
MIN_BYTES_PER_TOKEN, MAX_BYTES_PER_TOKEN = 0.25, 64.0


def _positive(violations: list[FieldViolation], path: str, value: int | float | None) -> None:
    if value is not None and value <= 0:
        violations.append(FieldViolation(path, f"must be greater than 0, got {value}"))


def _at_most(violations: list[FieldViolation], path: str, p: object, names: tuple[str, ...], limit: int) -> None:
    for name in names:
        value = getattr(p, name)
        if value is not None and value > limit:
            violations.append(FieldViolation(f"{path}.{name}", f"must be at most {limit}"))


def selection_violations(p: SelectionPolicy, path: str) -> list[FieldViolation]:
    v: list[FieldViolation] = []
    for name in ("max_bytes", "max_tokens", "max_request_bytes", "max_request_tokens", "bytes_per_token",
                 "max_attachment_bytes", "max_attachment_tokens"):
        _positive(v, f"{path}.{name}", getattr(p, name))
    if p.bytes_per_token is not None and not (
        math.isfinite(p.bytes_per_token) and MIN_BYTES_PER_TOKEN <= p.bytes_per_token <= MAX_BYTES_PER_TOKEN
    ):
        v.append(FieldViolation(
            f"{path}.bytes_per_token", f"must be between {MIN_BYTES_PER_TOKEN} and {MAX_BYTES_PER_TOKEN:.0f}"
        ))
    _at_most(v, path, p, ("max_bytes", "max_request_bytes", "max_attachment_bytes"), MAX_BUDGET_BYTES)
    _at_most(v, path, p, ("max_tokens", "max_request_tokens", "max_attachment_tokens"), MAX_BUDGET_TOKENS)
    if not isinstance(p.overflow, enum.Enum):
        v.append(FieldViolation(f"{path}.overflow", f"unknown overflow mode {p.overflow}"))
    if p.max_bytes is not None and p.max_request_bytes is not None and p.max_bytes > p.max_request_bytes:
        v.append(FieldViolation(f"{path}.max_bytes", "must not exceed max_request_bytes"))
    if p.max_tokens is not None and p.max_request_tokens is not None and p.max_tokens > p.max_request_tokens:
        v.append(FieldViolation(f"{path}.max_tokens", "must not exceed max_request_tokens"))
    for i, key in enumerate(p.extra_secret_keys):
        if not key.strip():
            v.append(FieldViolation(f"{path}.extra_secret_keys[{i}]", "must not be empty"))
    f = p.filter
    if f is not None:
        for i, t in enumerate(f.content_types):
            if not isinstance(t, ContentType):
                v.append(FieldViolation(f"{path}.filter.content_types[{i}]", "must name a content type"))
        if f.start_time is not None and f.end_time is not None and f.start_time >= f.end_time:
            v.append(FieldViolation(f"{path}.filter.start_time", "must be before end_time"))
        overlap = set(f.authors) & set(f.exclude_authors)
        if overlap:
            v.append(FieldViolation(f"{path}.filter.exclude_authors", "must not repeat an author in authors"))
        for name in ("authors", "exclude_authors", "invocation_ids"):
            for i, item in enumerate(getattr(f, name)):
                if not item:
                    v.append(FieldViolation(f"{path}.filter.{name}[{i}]", "must not be empty"))
        if f.branch and "" in f.branch.split("."):
            v.append(FieldViolation(f"{path}.filter.branch", "must be dot-separated names without empty parts"))
    return v


def compaction_violations(p: CompactionPolicy, path: str) -> list[FieldViolation]:
    v: list[FieldViolation] = []
    for name in (
        "context_window", "keep_recent_tokens", "background_tokens", "event_threshold", "turn_interval",
        "overflow_keep_recent_tokens", "timeout_s", "max_input_bytes", "max_summary_bytes",
    ):
        _positive(v, f"{path}.{name}", getattr(p, name))
    for name in ("reserve_tokens", "retain_recent_exchanges"):
        value = getattr(p, name)
        if value is not None and value < 0:
            v.append(FieldViolation(f"{path}.{name}", f"must not be negative, got {value}"))
    if not isinstance(p.compactor, enum.Enum):
        v.append(FieldViolation(f"{path}.compactor", f"unknown compactor {p.compactor}"))
    if p.compactor is CompactorKind.REMOTE and not p.remote_target:
        v.append(FieldViolation(f"{path}.remote_target", "is required for the REMOTE compactor"))
    if p.remote_target and p.compactor is not CompactorKind.REMOTE:
        v.append(FieldViolation(f"{path}.remote_target", "is only used by the REMOTE compactor"))
    if p.timeout_s is not None and p.timeout_s > MAX_COMPACTOR_TIMEOUT_S:
        v.append(FieldViolation(f"{path}.timeout", f"must be at most {MAX_COMPACTOR_TIMEOUT_S:.0f}s"))
    if p.context_window is not None and p.reserve_tokens is not None and p.reserve_tokens >= p.context_window:
        v.append(FieldViolation(f"{path}.reserve_tokens", "must be smaller than context_window"))
    if (
        p.context_window is not None
        and p.background_tokens is not None
        and p.background_tokens > p.context_window
    ):
        v.append(FieldViolation(f"{path}.background_tokens", "must not exceed context_window"))
    _at_most(v, path, p, ("context_window", "reserve_tokens", "keep_recent_tokens", "background_tokens",
                          "overflow_keep_recent_tokens"), MAX_BUDGET_TOKENS)
    _at_most(v, path, p, ("max_input_bytes", "max_summary_bytes"), MAX_BUDGET_BYTES)
    v += _compaction_headroom(p, path)
    return v


def _compaction_headroom(p: CompactionPolicy, path: str) -> list[FieldViolation]:
    """A compaction must leave the history below what triggers the next one,
    or every turn compacts again. Unset fields count at their defaults."""
    v: list[FieldViolation] = []
    keep = p.keep_recent_tokens if p.keep_recent_tokens is not None else compaction_defaults.KEEP_RECENT_TOKENS
    reserve = p.reserve_tokens if p.reserve_tokens is not None else compaction_defaults.RESERVE_TOKENS
    if p.context_window is not None and keep + reserve >= p.context_window:
        v.append(FieldViolation(
            f"{path}.keep_recent_tokens",
            f"keep_recent_tokens + reserve_tokens ({keep} + {reserve}) must be smaller than context_window",
        ))
    if p.background_tokens is not None and p.background_tokens <= keep:
        v.append(FieldViolation(f"{path}.background_tokens", f"must exceed keep_recent_tokens ({keep})"))
    if p.overflow_keep_recent_tokens is not None and p.overflow_keep_recent_tokens > keep:
        v.append(FieldViolation(f"{path}.overflow_keep_recent_tokens", f"must not exceed keep_recent_tokens ({keep})"))
    return v


def cache_violations(p: CachePolicy, path: str) -> list[FieldViolation]:
    v: list[FieldViolation] = []
    _positive(v, f"{path}.ttl", p.ttl_s)
    if p.ttl_s is not None and p.ttl_s > MAX_TTL_S:
        v.append(FieldViolation(f"{path}.ttl", "must be at most 7 days"))
    return v


def retrieval_violations(p: RetrievalPolicy, path: str) -> list[FieldViolation]:
    v: list[FieldViolation] = []
    if p.limit is not None and not 1 <= p.limit <= MAX_RETRIEVAL_LIMIT:
        v.append(FieldViolation(f"{path}.limit", f"must be between 1 and {MAX_RETRIEVAL_LIMIT}"))
    if p.min_score is not None and not math.isfinite(p.min_score):
        v.append(FieldViolation(f"{path}.min_score", "must be a finite number"))
    return v


def config_violations(c: ContextConfig, path: str = "config") -> list[FieldViolation]:
    return (
        selection_violations(c.selection, f"{path}.selection")
        + compaction_violations(c.compaction, f"{path}.compaction")
        + cache_violations(c.cache, f"{path}.cache")
        + retrieval_violations(c.retrieval, f"{path}.retrieval")
        + declaration_violations(c.tools, f"{path}.tools")
    )


def check_config(c: ContextConfig, path: str = "config") -> None:
    """Raises InvalidArgument naming every bad field."""
    violations = config_violations(c, path)
    if violations:
        raise InvalidArgument.fields(violations, reason=Reason.INVALID_CONTEXT_CONFIG)
