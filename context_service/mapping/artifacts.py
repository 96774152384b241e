"""Artifact versions, domain → proto (ArtifactService)."""

from __future__ import annotations

from agentctx.context.v1 import artifacts_pb2 as pb
from context_service.domain.artifacts import ArtifactVersionRecord
from context_service.mapping.convert import dict_to_struct, dt_to_ts


def version_to_proto(record: ArtifactVersionRecord, out: pb.ArtifactVersion | None = None) -> pb.ArtifactVersion:
    out = out if out is not None else pb.ArtifactVersion()
    out.parent = record.scope.parent
    out.artifact = record.artifact
    out.version = record.version
    out.mime_type = record.mime_type
    out.size_bytes = record.size_bytes
    out.sha256 = record.sha256
    dt_to_ts(record.create_time, out.create_time)
    dict_to_struct(record.custom_metadata, out.custom_metadata)
    out.text = record.text
    return out
