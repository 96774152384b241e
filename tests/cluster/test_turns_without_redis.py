"""Turns through both services (in this process) while the cache tier's
Redis (a redis-server of the test's own) is killed and started again:
BYPASS REGISTRY_UNAVAILABLE on the reply's cache record, then cached again;
with failure_mode "error", UNAVAILABLE REGISTRY_UNAVAILABLE with RetryInfo
relayed to the agent, never INTERNAL."""

from __future__ import annotations

import grpc
import pytest

from agentctx.type.v1 import cache_pb2
from agentctx_common.status import error_from_rpc
from tests.cluster import support
from tests.support.pair import pair_maker
from tests.turns.builders import Agent, create_session

pytestmark = pytest.mark.redis
_until = support.until


async def test_turns_through_both_services_go_uncached_then_cached_again(
        certs_dir, tmp_path, redis_prefix: str, private_redis: support.PrivateRedis) -> None:
    cache = {"redis_url": private_redis.url, "redis_key_prefix": redis_prefix,
             "redis_encryption_key": support.ENCRYPTION_KEY, "lease_keys": support.LEASE_KEYS,
             "active_lease_key_id": "k1", "local_shared_state": True, "local_state_url": support.REDIS_URL,
             "local_state_prefix": support.sim_prefix(redis_prefix), "sightings_before_create": 0,
             "registry_timeout_s": 1.0, "registry_retry_s": 0.2}
    states = cache_pb2.CacheState
    async with pair_maker(certs_dir, tmp_path, cache_defaults={"local_min_cache_tokens": 64,
                                                               "min_prefix_tokens": 64}) as make:
        pair = await make(cache=cache)
        agent = Agent(pair.agent, (await create_session(pair.agent)).name)
        await agent.turn("Hello, let us plan a long walk through the city and talk it over.")
        await agent.turn("And then a second turn, so there is a history to cache.")
        private_redis.kill()
        for i in range(3):
            reply = (await agent.turn(f"Asked while Redis is gone, {i}.")).reply
            assert reply.cache_metadata.state == states.CACHE_STATE_BYPASS
            assert reply.cache_metadata.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_REGISTRY_UNAVAILABLE
        private_redis.start()

        async def cached() -> bool:
            meta = (await agent.turn("After Redis came back.")).reply.cache_metadata
            return meta.state in (states.CACHE_STATE_CREATED, states.CACHE_STATE_HIT, states.CACHE_STATE_GROWN)

        await _until(cached, attempts=100)


async def test_error_mode_reaches_the_agent_as_unavailable_with_retry_info(
        certs_dir, tmp_path, redis_prefix: str, private_redis: support.PrivateRedis) -> None:
    cache = {"redis_url": private_redis.url, "redis_key_prefix": redis_prefix,
             "redis_encryption_key": support.ENCRYPTION_KEY, "lease_keys": support.LEASE_KEYS,
             "active_lease_key_id": "k1", "failure_mode": "error",
             "registry_timeout_s": 1.0, "registry_retry_s": 0.2}
    async with pair_maker(certs_dir, tmp_path, cache_defaults={"local_min_cache_tokens": 64,
                                                               "min_prefix_tokens": 64}) as make:
        pair = await make(cache=cache)
        agent = Agent(pair.agent, (await create_session(pair.agent)).name)
        await agent.turn("Hello, let us plan a long walk through the city and talk it over.")
        private_redis.kill()
        for _ in range(2):
            with pytest.raises(grpc.aio.AioRpcError) as info:
                await agent.send(agent.request("Asked while Redis is gone."))
            assert info.value.code() is grpc.StatusCode.UNAVAILABLE
            err = error_from_rpc(info.value)
            assert err.reason.value == "REGISTRY_UNAVAILABLE" and err.retry_after is not None
