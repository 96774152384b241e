"""A session's config survives a read-modify-write through the API: what the
client did not set stays unset (and keeps following the server defaults)."""

from __future__ import annotations

from agentctx.context.v1 import policy_pb2
from context_service.domain.config import CachePolicy, CompactionPolicy, ContextConfig, SelectionPolicy
from context_service.mapping.convert import config_from_proto, config_to_proto


def _roundtrip(config: ContextConfig) -> ContextConfig:
    message = policy_pb2.ContextConfig()
    config_to_proto(config, message)
    return config_from_proto(policy_pb2.ContextConfig.FromString(message.SerializeToString()))


def test_unset_policies_stay_unset() -> None:
    config = ContextConfig(model="m", selection=SelectionPolicy(max_tokens=10))
    back = _roundtrip(config)
    assert back.compaction.enabled is None and back.cache.enabled is None
    assert back == config


def test_explicit_false_survives() -> None:
    config = ContextConfig(compaction=CompactionPolicy(enabled=False), cache=CachePolicy(enabled=False))
    back = _roundtrip(config)
    assert back.compaction.enabled is False and back.cache.enabled is False
