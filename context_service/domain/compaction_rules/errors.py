"""Compaction's structured errors. Each one means "nothing changed": a
failed or refused compaction never writes anything.

Metadata holds figures only (sizes, limits, sequences, codes), never
content or compactor addresses.
"""

from __future__ import annotations

from agentctx_common.errors import (
    Aborted,
    Cancelled,
    DeadlineExceeded,
    FailedPrecondition,
    ResourceExhausted,
    Unavailable,
)
from agentctx_common.reasons import Reason


def conflict(why: str, **figures: object) -> Aborted:
    return Aborted(
        f"the session changed while it was being compacted ({why}); nothing was written, plan again",
        reason=Reason.COMPACTION_CONFLICT,
        metadata={"conflict": why, **figures},
    )


def timeout(compactor: str, timeout_s: float) -> DeadlineExceeded:
    return DeadlineExceeded(
        f"the {compactor} compactor did not answer within {timeout_s:g}s; nothing changed",
        reason=Reason.COMPACTOR_TIMEOUT,
        metadata={"compactor": compactor, "timeout_ms": int(timeout_s * 1000)},
    )


def cancelled(compactor: str) -> Cancelled:
    return Cancelled(
        f"compaction with the {compactor} compactor was cancelled; nothing changed",
        reason=Reason.COMPACTOR_CANCELLED,
        metadata={"compactor": compactor},
    )


def failed(compactor: str, code: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"the {compactor} compactor failed ({code}); nothing changed",
        reason=Reason.COMPACTOR_FAILED,
        metadata={"compactor": compactor, "compactor_code": code},
    )


def unavailable(compactor: str, retry_after: float = 1.0) -> Unavailable:
    return Unavailable(
        f"the {compactor} compactor is unreachable; nothing changed",
        reason=Reason.COMPACTOR_UNAVAILABLE,
        metadata={"compactor": compactor},
        retry_after=retry_after,
    )


def summary_empty(compactor: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"the {compactor} compactor returned an empty summary; nothing changed",
        reason=Reason.SUMMARY_EMPTY,
        metadata={"compactor": compactor},
    )


def summary_malformed(compactor: str, why: str) -> FailedPrecondition:
    return FailedPrecondition(
        f"the {compactor} compactor returned a malformed summary ({why}); nothing changed",
        reason=Reason.SUMMARY_MALFORMED,
        metadata={"compactor": compactor, "problem": why},
    )


def summary_too_large(compactor: str, size: int | None, limit: int) -> ResourceExhausted:
    shown = f"{size} bytes" if size is not None else "more bytes"
    return ResourceExhausted(
        f"the {compactor} compactor returned {shown} of summary, over the {limit}-byte limit; nothing changed",
        reason=Reason.SUMMARY_TOO_LARGE,
        metadata={"compactor": compactor, "limit_bytes": limit, **({"summary_bytes": size} if size else {})},
    )


def input_too_large(size: int, limit: int) -> ResourceExhausted:
    return ResourceExhausted(
        f"the oldest history to summarize needs {size} bytes of compactor input, over max_input_bytes {limit}",
        reason=Reason.COMPACTOR_INPUT_TOO_LARGE,
        metadata={"input_bytes": size, "limit_bytes": limit},
    )


def checkpoint_too_large(size: int, limit: int) -> ResourceExhausted:
    return ResourceExhausted(
        f"the compaction checkpoint needs {size} bytes, over the {limit}-byte limit",
        reason=Reason.CHECKPOINT_TOO_LARGE,
        metadata={"checkpoint_bytes": size, "limit_bytes": limit},
    )
