"""Compactors and the bounded way every one of them is run.

A compactor turns a ``SummaryRequest`` into a ``SummaryResult``. ``run``
puts it under the policy's deadline (and the caller's, when shorter),
checks the summary's bounds, and lets cancellation through: a cancelled
RPC or a stopping worker cancels the summarizer call itself.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass
from typing import Protocol

from context_service.domain.compaction import errors
from context_service.domain.compaction.extractive import Extractor
from context_service.domain.compaction.policy import ResolvedPolicy
from context_service.domain.compaction.summary import SummaryRequest, SummaryResult, input_size, validate_summary
from context_service.domain.model import SessionKey

# Extractive work between yields to the event loop, in input bytes: small
# enough that appends and BuildContext calls sharing the loop stay prompt.
_EXTRACT_SLICE_BYTES = 32 * 1024


@dataclass(frozen=True, slots=True)
class CompactionCall:
    """Who is being compacted, for compactors that call out."""

    key: SessionKey
    model: str  # the summarizing model (MODEL compactor)
    deadline: float  # time.monotonic() by which the summary must be back

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


class Compactor(Protocol):
    name: str

    async def summarize(self, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy) -> SummaryResult: ...


class ExtractiveCompactor:
    """Built in, deterministic, no model. Runs on the event loop in slices so
    it never holds the loop for long, and stops at the next slice when
    cancelled or late."""

    name = "extractive"

    async def summarize(self, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy) -> SummaryResult:
        extractor = Extractor(request.previous_summary)
        budget = _EXTRACT_SLICE_BYTES
        for event in request.events:
            extractor.add(event)
            budget -= input_size(event)
            if budget <= 0:
                budget = _EXTRACT_SLICE_BYTES
                await asyncio.sleep(0)
        return SummaryResult(extractor.render(request.target_summary_bytes, request.max_summary_bytes))


async def run(
    compactor: Compactor, request: SummaryRequest, call: CompactionCall, policy: ResolvedPolicy
) -> SummaryResult:
    """The compactor's result, validated, or a structured error; never a
    half-made summary. Raises CancelledError when the caller is cancelled."""
    timeout = min(policy.timeout_s, call.remaining())
    if timeout <= 0:
        raise errors.timeout(compactor.name, policy.timeout_s)
    try:
        async with asyncio.timeout(timeout):
            result = await compactor.summarize(request, call, policy)
    except TimeoutError:
        raise errors.timeout(compactor.name, timeout) from None
    summary = validate_summary(result.summary, request.max_summary_bytes, compactor.name)
    return SummaryResult(summary, result.usage)
