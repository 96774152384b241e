"""The cache service's messages to and from ``domain.cache_calls`` (used by
the gRPC cache client, ``context_service.cache_client``)."""

from __future__ import annotations

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.type.v1 import cache_pb2, generation_pb2
from context_service.domain.cache_calls import CacheScope, ModelReply
from context_service.mapping.convert import (
    cache_from_proto,
    content_from_proto,
    dict_to_struct,
    finish_reason_name,
    usage_from_proto,
)


def scope_to_proto(scope: CacheScope) -> cpb.CacheScope:
    out = cpb.CacheScope(app=scope.app, user=scope.user, model=scope.model)
    if scope.policy:
        dict_to_struct(scope.policy, out.policy)
    return out


def reply_from_proto(response: generation_pb2.ModelResponse, cache: cache_pb2.CacheMetadata | None) -> ModelReply:
    return ModelReply(
        content=content_from_proto(response.content),
        usage=usage_from_proto(response.usage) if response.HasField("usage") else None,
        served=cache_from_proto(cache) if cache is not None else None,
        finish_reason=finish_reason_name(response.finish_reason),
        model_version=response.model_version,
    )
