"""The artifacts a request attaches (``domain.attachments``), loaded for one
build: each reference resolved in the artifact store (the request's session,
or its user for ``user:`` ids: the caller's grant for the session's app is
the grant for them), the budget checked on the stored sizes before any
content is read, then each content read chunk by chunk into one content
record (pruned with the build's secret keys and rendered like every
request content).

Telemetry is content-free: a ``context.attachments`` span with the count,
the bytes, the user-scoped count and the contents' SHA-256 digests, never
names or bytes.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from opentelemetry import metrics, trace

from agentctx_common.errors import NotFound
from agentctx_common.reasons import Reason
from agentctx_common.spans import recording_span
from context_service.domain import attachments as att
from context_service.domain import selection as sel
from context_service.domain.artifacts import ArtifactVersionRecord
from context_service.domain.config import SelectionPolicy
from context_service.domain.model import SessionKey
from context_service.domain.selection.records import Render
from context_service.domain.selection.tokens import DEFAULT_BYTES_PER_TOKEN
from context_service.ports import ArtifactStore

_tracer = trace.get_tracer("agentctx.context.attachments")
_bytes = metrics.get_meter("agentctx.context.attachments").create_counter(
    "agentctx.context.attachment.bytes", unit="By", description="Artifact bytes attached to model requests."
)


class AttachmentLoader:
    def __init__(self, store: ArtifactStore, render: Render) -> None:
        self._store = store
        self._render = render

    async def resolve(self, key: SessionKey, refs: Sequence[att.AttachmentRef]) -> list[ArtifactVersionRecord]:
        """Each reference's version (metadata only); NOT_FOUND
        ARTIFACT_NOT_FOUND naming the first that does not exist."""
        records = []
        for i, ref in enumerate(refs):
            try:
                records.append(await self._store.get_version(att.scope(key, ref), ref.name, ref.version))
            except NotFound as err:
                if err.reason is not Reason.ARTIFACT_NOT_FOUND:
                    raise
                raise att.not_found(ref, i) from None
        return records

    async def load(
        self, key: SessionKey, refs: Sequence[att.AttachmentRef], policy: SelectionPolicy, keys: sel.SecretKeys
    ) -> list[sel.ContentRecord]:
        """The attachments' records, in order. Over the byte budget on the
        stored sizes: the error, before any content is read."""
        if not refs:
            return []
        with recording_span(_tracer, "context.attachments", {"attachment.count": len(refs)}) as span:
            records = await self.resolve(key, refs)
            # Raw sizes are a lower bound of the rendered contents' bytes; the
            # token bound waits for the calibrated estimate (the builder).
            att.check_budget([r.name for r in refs], [r.size_bytes for r in records],
                             dataclasses.replace(policy, max_attachment_tokens=None),
                             policy.bytes_per_token or DEFAULT_BYTES_PER_TOKEN)
            out = []
            for ref, record in zip(refs, records, strict=True):
                data = b"".join([chunk async for chunk in self._store.read_chunks(record)])
                out.append(sel.content_record(att.attachment_content(ref.name, record, data), keys, self._render))
            total = sum(r.size_bytes for r in records)
            _bytes.add(total)
            span.set_attributes({
                "attachment.bytes": total,
                "attachment.user_scoped": sum(1 for r in records if r.scope.user_scoped),
                "attachment.sha256": [r.sha256 for r in records],
            })
            return out
