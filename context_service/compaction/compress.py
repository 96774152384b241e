"""Selection's overflow COMPRESS, through the session's compactor.

BuildContext hands over the contents that did not fit (an earlier summary
first, when it was dropped too) and the bytes the summary may take; the
compactor runs under the same deadline and byte bounds as any compaction.
Nothing is stored: BuildContext stays read-only.
"""

from __future__ import annotations

from agentctx_common.errors import ResourceExhausted
from agentctx_common.reasons import Reason
from context_service.compaction import telemetry
from context_service.compaction.compactors import CompactionCall, Compactor, run
from context_service.domain.compaction_rules import errors
from context_service.domain.compaction_rules.policy import ResolvedPolicy
from context_service.domain.compaction_rules.summary import build_request, prepare_for_compactor
from context_service.domain.model import CompactionTrigger, Content, Event
from context_service.domain.selection.records import SUMMARY_PREFIX
from context_service.domain.selection.secrets import SecretKeys
from context_service.domain.selection.select import CompressionRequest

# Below this a summary cannot say anything useful.
MIN_SUMMARY_BYTES = 64


def _earlier_summary(c: Content) -> str | None:
    if c.role == "user" and len(c.parts) == 1 and (c.parts[0].text or "").startswith(SUMMARY_PREFIX):
        return (c.parts[0].text or "")[len(SUMMARY_PREFIX):]
    return None


class SessionCompressor:
    """A ``selection.Compressor`` for one BuildContext call."""

    def __init__(self, compactor: Compactor, call: CompactionCall, policy: ResolvedPolicy, keys: SecretKeys) -> None:
        self._compactor = compactor
        self._call = call
        self._policy = policy
        self._keys = keys

    async def __call__(self, request: CompressionRequest) -> str:
        limit = min(request.max_summary_bytes, self._policy.max_summary_bytes)
        if limit < MIN_SUMMARY_BYTES:
            raise ResourceExhausted(
                "the history budget leaves no room for a summary of what does not fit",
                reason=Reason.COMPRESSED_CONTEXT_OVER_BUDGET,
                metadata={"summary_room_bytes": request.max_summary_bytes, "minimum_bytes": MIN_SUMMARY_BYTES},
            )
        contents = list(request.contents)
        previous = _earlier_summary(contents[0]) if contents else None
        if previous is not None:
            contents = contents[1:]
        events = [
            prepare_for_compactor(Event(id=f"compress-{i}", author=c.role, content=c), self._keys)
            for i, c in enumerate(contents)
        ]
        summary_request = build_request(self._call.key.name, events, previous or "", "", limit, limit)
        if summary_request.input_bytes > self._policy.max_input_bytes:
            raise errors.input_too_large(summary_request.input_bytes, self._policy.max_input_bytes)
        with telemetry.tracer.start_as_current_span("compaction.compress"):
            try:
                result = await run(self._compactor, summary_request, self._call, self._policy)
            except Exception as exc:
                telemetry.record(CompactionTrigger.COMPRESS.value, self._compactor.name, getattr(exc, "reason", "ERROR"))
                raise
            usage = result.usage
            telemetry.record(
                CompactionTrigger.COMPRESS.value, self._compactor.name, "SUMMARIZED",
                source_events=len(summary_request.events), summary_bytes=len(result.summary.encode()),
                summarizer_tokens=usage.total_tokens if usage else 0,
            )
        return result.summary
