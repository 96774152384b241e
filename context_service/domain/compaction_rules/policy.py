"""Compaction policy defaults and the resolved policy the engine runs with.

Defaults follow pi (reserve 16,384, keep 20,000 tokens) and erlang_adk
(5 s deadline, 16 MiB input, 1 MiB summary, 2 MiB checkpoint). A session's
``CompactionPolicy`` leaves fields unset (``None``); ``resolve`` fills them.
"""

from __future__ import annotations

from dataclasses import dataclass

from context_service.domain.config import CompactionPolicy, CompactorKind

RESERVE_TOKENS = 16_384
KEEP_RECENT_TOKENS = 20_000
# erlang_adk's value; offered as the suggested setting. It is not applied
# implicitly: an exchange floor can hold a kept tail above its token budget
# (the "protect_last_n always wins" failure), so it applies only when set.
SUGGESTED_RETAIN_RECENT_EXCHANGES = 4
TIMEOUT_S = 5.0
MAX_INPUT_BYTES = 16 * 1024 * 1024
MAX_SUMMARY_BYTES = 1024 * 1024
MAX_CHECKPOINT_BYTES = 2 * 1024 * 1024
BYTES_PER_TOKEN = 4.0
# Overflow recovery keeps half the normal tail: the provider has just said
# the request does not fit, so the retry must be clearly smaller.
OVERFLOW_KEEP_RATIO = 0.5


@dataclass(frozen=True, slots=True)
class ResolvedPolicy:
    """A compaction policy with every default applied."""

    enabled: bool
    compactor: CompactorKind
    remote_target: str
    model: str
    context_window: int | None
    reserve_tokens: int
    keep_recent_tokens: int
    retain_recent_exchanges: int | None
    background_tokens: int | None
    event_threshold: int | None
    turn_interval: int | None
    overflow_keep_recent_tokens: int
    timeout_s: float
    max_input_bytes: int
    max_summary_bytes: int
    max_checkpoint_bytes: int = MAX_CHECKPOINT_BYTES
    bytes_per_token: float = BYTES_PER_TOKEN

    @property
    def compactor_name(self) -> str:
        return self.compactor.value.lower()


def resolve(p: CompactionPolicy, *, bytes_per_token: float | None = None) -> ResolvedPolicy:
    """``p`` (already validated) with defaults for every unset field.

    ``bytes_per_token`` is the selection policy's estimator, so that both
    areas size history the same way.
    """
    keep = p.keep_recent_tokens if p.keep_recent_tokens is not None else KEEP_RECENT_TOKENS
    overflow_keep = p.overflow_keep_recent_tokens
    if overflow_keep is None:
        overflow_keep = max(1, int(keep * OVERFLOW_KEEP_RATIO))
    compactor = p.compactor if p.compactor is not CompactorKind.UNSPECIFIED else CompactorKind.EXTRACTIVE
    return ResolvedPolicy(
        enabled=bool(p.enabled),
        compactor=compactor,
        remote_target=p.remote_target,
        model=p.model,
        context_window=p.context_window,
        reserve_tokens=p.reserve_tokens if p.reserve_tokens is not None else RESERVE_TOKENS,
        keep_recent_tokens=keep,
        retain_recent_exchanges=p.retain_recent_exchanges or None,
        background_tokens=p.background_tokens,
        event_threshold=p.event_threshold,
        turn_interval=p.turn_interval,
        overflow_keep_recent_tokens=min(overflow_keep, keep),
        timeout_s=p.timeout_s if p.timeout_s is not None else TIMEOUT_S,
        max_input_bytes=p.max_input_bytes if p.max_input_bytes is not None else MAX_INPUT_BYTES,
        max_summary_bytes=p.max_summary_bytes if p.max_summary_bytes is not None else MAX_SUMMARY_BYTES,
        bytes_per_token=bytes_per_token if bytes_per_token else BYTES_PER_TOKEN,
    )
