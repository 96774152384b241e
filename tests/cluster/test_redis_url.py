"""``redis_url``'s three forms (cluster.client): one Redis, a Sentinel
service and a cluster's startup nodes; and what the settings refuse. No
server needed: the clients connect on first use."""

from __future__ import annotations

import pathlib

import pytest
from redis.asyncio.cluster import RedisCluster

from agentctx_common.errors import ConfigError
from cache_service.cluster.client import Endpoints, parse, redis_client
from cache_service.settings import CacheSettings
from tests.cluster import support


def test_cluster_and_sentinel_urls_are_taken_apart() -> None:
    assert parse("redis+cluster://127.0.0.1:7000,127.0.0.1:7001") == Endpoints(
        "redis+cluster", (("127.0.0.1", 7000), ("127.0.0.1", 7001)), None, None, ())
    assert parse("redis+cluster://u:p%40ss@10.0.0.1:6379") == Endpoints(
        "redis+cluster", (("10.0.0.1", 6379),), "u", "p@ss", ())
    assert parse("redis+sentinel://:pw@s1:26379,s2:26380/mymaster/2") == Endpoints(
        "redis+sentinel", (("s1", 26379), ("s2", 26380)), None, "pw", ("mymaster", "2"))
    for bad in ("redis+sentinel://s1:26379", "redis+cluster://n1", "redis+cluster://n1:x", "redis://n1:6379"):
        with pytest.raises(ValueError) as err:
            parse(bad)
        assert bad not in str(err.value)  # a URL may hold a password: never echoed


async def test_each_form_makes_its_client() -> None:
    clients = [redis_client("redis+cluster://127.0.0.1:7000,127.0.0.1:7001"),
               redis_client("redis+sentinel://127.0.0.1:26379/mymaster"), redis_client(support.REDIS_URL)]
    assert isinstance(clients[0], RedisCluster)
    assert not isinstance(clients[1], RedisCluster) and not isinstance(clients[2], RedisCluster)
    for client in clients:
        await client.aclose()


def test_settings_refuse_a_braced_prefix_and_a_sentinel_url_without_its_service(certs_dir: pathlib.Path,
                                                                                   tmp_path: pathlib.Path) -> None:
    base = dict(redis_url="redis+cluster://127.0.0.1:7000", redis_encryption_key=support.ENCRYPTION_KEY,
                lease_keys=support.LEASE_KEYS, active_lease_key_id="k1", tls_cert=certs_dir / "cache-server.pem",
                tls_key=certs_dir / "cache-server.key", tls_client_ca=certs_dir / "ca.pem", data_dir=tmp_path)
    CacheSettings.load(**base)
    with pytest.raises(ConfigError, match="hash tags"):
        CacheSettings.load(**{**base, "redis_key_prefix": "app{1}:"})
    with pytest.raises(ConfigError, match="service name"):
        CacheSettings.load(**{**base, "redis_url": "redis+sentinel://127.0.0.1:26379"})
