"""Redis for the cluster tests: reachability, a private key prefix per test
(and one for the simulator's shared state) and its cleanup (never FLUSHALL),
and cache settings for a replica of the tier."""

from __future__ import annotations

import base64
import functools
import os
import pathlib
import secrets
import signal
import subprocess
import time
from typing import Any

import redis

from cache_service.settings import CacheSettings
from tests.support.servers import cache_settings

REDIS_URL = os.environ.get("AGENTCTX_TEST_REDIS_URL", "redis://127.0.0.1:6379/0")
# The local Redis Cluster of scripts/redis_cluster.sh (.ci/run starts it and sets this).
CLUSTER_URL = os.environ.get("AGENTCTX_REDIS_CLUSTER_URL", "")
SINGLE, CLUSTER = "single", "cluster"
ENCRYPTION_KEY = base64.b64encode(b"k" * 32).decode()
LEASE_KEYS = [{"id": "k1", "secret": "s" * 40}]


def available() -> bool:
    try:
        return bool(redis.Redis.from_url(REDIS_URL, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def url_of(backend: str) -> str:
    return CLUSTER_URL if backend == CLUSTER else REDIS_URL


@functools.cache
def cluster_available() -> bool:
    """Asked once per session (the cluster is started before the tests, by
    .ci/run or scripts/redis_cluster.sh; one that dies later fails them)."""
    if not CLUSTER_URL:
        return False
    try:
        client = cluster_sync_client()
        ok = bool(client.ping())
        client.close()
        return ok
    except (redis.RedisError, ValueError):
        return False


def require(backend: str) -> None:
    """Fails (AGENTCTX_REQUIRE_REDIS) or skips the test when ``backend`` is not up."""
    import pytest

    up = cluster_available() if backend == CLUSTER else available()
    if up:
        return
    where = ("the Redis Cluster (AGENTCTX_REDIS_CLUSTER_URL: scripts/redis_cluster.sh start)" if backend == CLUSTER
             else "Redis on 127.0.0.1:6379")
    if os.environ.get("AGENTCTX_REQUIRE_REDIS"):
        pytest.fail(f"{where} is required (AGENTCTX_REQUIRE_REDIS) but not reachable")
    pytest.skip(f"{where} is not reachable")


def cluster_sync_client() -> redis.RedisCluster:
    from cache_service.cluster.client import parse

    ends = parse(CLUSTER_URL)
    return redis.RedisCluster(startup_nodes=[redis.cluster.ClusterNode(h, p) for h, p in ends.nodes],
                              socket_connect_timeout=1)


def node_clients(backend: str) -> list[redis.Redis]:
    """A client per node holding keys (the cluster's masters, or the one Redis)."""
    if backend != CLUSTER:
        return [redis.Redis.from_url(REDIS_URL)]
    cluster = cluster_sync_client()
    nodes = [redis.Redis(host=n.host, port=n.port) for n in cluster.get_primaries()]
    cluster.close()
    return nodes


def new_prefix() -> str:
    return f"agentctx-test-{secrets.token_hex(4)}:"


def delete_prefix(prefix: str, backend: str = SINGLE) -> int:
    """Deletes every key under ``prefix`` (SCAN, never FLUSHALL)."""
    deleted = 0
    for client in node_clients(backend):
        for key in client.scan_iter(match=f"{prefix}*", count=500):
            deleted += client.delete(key)
        client.close()
    return deleted


def dump_prefix(prefix: str, backend: str = SINGLE) -> list[bytes]:
    """Every key and value under ``prefix``, as raw bytes."""
    out: list[bytes] = []
    for client in node_clients(backend):
        out += _dump(client, prefix)
        client.close()
    return out


def _dump(client: redis.Redis, prefix: str) -> list[bytes]:
    out: list[bytes] = []
    for key in client.scan_iter(match=f"{prefix}*", count=500):
        out.append(key)
        kind = client.type(key)
        if kind == b"string":
            out.append(client.get(key) or b"")
        elif kind == b"hash":
            for k, v in client.hgetall(key).items():
                out += [k, v]
        elif kind == b"set":
            out += list(client.smembers(key))
        elif kind == b"zset":
            out += [m for m, _ in client.zrange(key, 0, -1, withscores=True)]
        elif kind == b"list":
            out += list(client.lrange(key, 0, -1))
    return out


def replica_settings(certs: pathlib.Path, tmp: pathlib.Path, prefix: str, backend: str = SINGLE,
                     **overrides: Any) -> CacheSettings:
    """A replica on ``backend``; the simulated provider's shared state stays
    on the single Redis (the provider is not the registry)."""
    values: dict[str, Any] = dict(
        redis_url=url_of(backend), local_state_url=REDIS_URL, redis_key_prefix=prefix, redis_encryption_key=ENCRYPTION_KEY,
        lease_keys=LEASE_KEYS, active_lease_key_id="k1", local_shared_state=True, local_state_prefix=sim_prefix(prefix),
        sightings_before_create=0, min_prefix_tokens=64, local_min_cache_tokens=64,
        replica_heartbeat_s=0.2, replica_dead_after_s=0.8, tier_sweep_interval_s=0.2, sweep_interval_s=0.2,
    )
    values.update(overrides)
    return cache_settings(certs, tmp, **values)


def sim_prefix(prefix: str) -> str:
    return prefix.rstrip(":") + "-sim:"


def sync_client(backend: str = SINGLE) -> redis.Redis | redis.RedisCluster:
    return cluster_sync_client() if backend == CLUSTER else redis.Redis.from_url(REDIS_URL)


def wait_for_redis(port: int) -> None:
    """Until the redis-server on ``port`` (127.0.0.1) answers, at most 5 s."""
    client = redis.Redis(port=port, socket_connect_timeout=0.2)
    for _ in range(200):
        try:
            if client.ping():
                client.close()
                return
        except redis.RedisError:
            time.sleep(0.025)
    raise RuntimeError(f"the redis-server on {port} did not start")


class PrivateRedis:
    """A redis-server of the test's own on a free port (no persistence), to
    kill and start again; the shared Redis is never touched."""

    def __init__(self) -> None:
        from tests.support.processes import free_port

        self.port = free_port()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self._proc = subprocess.Popen(
            ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        wait_for_redis(self.port)

    def kill(self) -> None:
        """kill -9: every connection drops at once."""
        if self._proc is not None:
            self._proc.send_signal(signal.SIGKILL)
            self._proc.wait()
            self._proc = None


def outage_settings(redis: PrivateRedis, **overrides: Any) -> dict[str, Any]:
    """Overrides for replica_settings: the registry on ``redis``, the
    simulated provider's state on the shared Redis (it stays up, as a real
    provider does), short deadlines."""
    return {"redis_url": redis.url, "local_state_url": REDIS_URL, "registry_timeout_s": 1.0,
            "registry_retry_s": 0.2, **overrides}


def sim(app: Any) -> Any:
    """The replica's shared provider simulator (a SharedLocalProvider)."""
    from cache_service.providers.local import SharedLocalProvider

    provider = app.providers["local"]
    assert isinstance(provider, SharedLocalProvider)
    return provider


async def until(check: Any, attempts: int = 400) -> None:
    """Polls the coroutine function ``check`` every 50 ms until it is true."""
    import asyncio

    for _ in range(attempts):
        if await check():
            return
        await asyncio.sleep(0.05)
    raise AssertionError("condition never held")


class SentinelRedis:
    """A master, its replica and one sentinel of the test's own (no
    persistence, free loopback ports, config in ``workdir``), for failovers;
    the shared Redis is never touched."""

    SERVICE = "agentctx-test"

    def __init__(self, workdir: pathlib.Path) -> None:
        from tests.support.processes import free_port

        self.dir = workdir
        self.master_port, self.replica_port, self.sentinel_port = free_port(), free_port(), free_port()
        self.url = f"redis+sentinel://127.0.0.1:{self.sentinel_port}/{self.SERVICE}"
        self._procs: dict[int, subprocess.Popen[bytes]] = {}

    def start(self) -> None:
        self.dir.mkdir(parents=True, exist_ok=True)
        base = ["--bind", "127.0.0.1", "--save", "", "--appendonly", "no", "--dir", str(self.dir)]
        self._spawn(self.master_port, ["redis-server", "--port", str(self.master_port), *base])
        wait_for_redis(self.master_port)
        self._spawn(self.replica_port, ["redis-server", "--port", str(self.replica_port), "--replicaof", "127.0.0.1",
                                        str(self.master_port), *base])
        wait_for_redis(self.replica_port)
        conf = self.dir / "sentinel.conf"
        conf.write_text(f"port {self.sentinel_port}\nbind 127.0.0.1\ndir {self.dir}\n"
                        f"sentinel monitor {self.SERVICE} 127.0.0.1 {self.master_port} 1\n"
                        f"sentinel down-after-milliseconds {self.SERVICE} 1000\n"
                        f"sentinel failover-timeout {self.SERVICE} 4000\n")
        self._spawn(self.sentinel_port, ["redis-server", str(conf), "--sentinel"])
        wait_for_redis(self.sentinel_port)
        # The replica in sync and known to the sentinel: a failover has somewhere to go.
        replica = redis.Redis(port=self.replica_port)
        sentinel = redis.Redis(port=self.sentinel_port)
        for _ in range(800):
            synced = replica.info("replication").get("master_link_status") == "up"
            if synced and sentinel.execute_command("SENTINEL", "REPLICAS", self.SERVICE):
                break
            time.sleep(0.025)
        else:
            raise RuntimeError("the sentinel's replica never came up")
        replica.close()
        sentinel.close()

    def master(self) -> int:
        sentinel = redis.Redis(port=self.sentinel_port)
        _, port = sentinel.execute_command("SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.SERVICE)
        sentinel.close()
        return int(port)

    def failover(self) -> int:
        """Has the sentinel promote the replica; returns the new master's port
        once the sentinel names it and it takes writes."""
        old = self.master()
        sentinel = redis.Redis(port=self.sentinel_port)
        sentinel.execute_command("SENTINEL", "FAILOVER", self.SERVICE)
        sentinel.close()
        return self._new_master(old)

    def kill_master(self) -> int:
        """kill -9 of the master: the sentinel notices (1 s) and promotes the
        replica; returns its port once it takes writes."""
        old = self.master()
        proc = self._procs.pop(old)
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        return self._new_master(old)

    def _new_master(self, old: int) -> int:
        for _ in range(800):
            new = self.master()
            if new != old:
                promoted = redis.Redis(port=new)
                role = promoted.info("replication").get("role")
                promoted.close()
                if role == "master":
                    return new
            time.sleep(0.025)
        raise RuntimeError("the sentinel did not fail the master over")

    def stop(self) -> None:
        for proc in self._procs.values():
            proc.send_signal(signal.SIGKILL)
            proc.wait()
        self._procs.clear()

    def _spawn(self, port: int, argv: list[str]) -> None:
        self._procs[port] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)



def cluster_failover(slot_key: str) -> tuple[str, str]:
    """A manual ``CLUSTER FAILOVER`` (the replica catches up, then takes
    over) of the master holding ``slot_key``; returns (old, new) master
    addresses once the new one serves the slot."""
    cluster = cluster_sync_client()
    old = cluster.get_node_from_key(slot_key)
    replica = None
    for node in cluster.get_nodes():
        probe = redis.Redis(host=node.host, port=node.port)
        info = probe.info("replication")
        if info.get("role") == "slave" and info.get("master_port") == old.port:
            replica = probe
            break
        probe.close()
    cluster.close()
    assert replica is not None, "the master has no replica"
    replica.execute_command("CLUSTER", "FAILOVER")
    for _ in range(800):
        if replica.info("replication").get("role") == "master":
            break
        time.sleep(0.025)
    else:
        raise RuntimeError("the replica never took over")
    new = f"{replica.connection_pool.connection_kwargs['host']}:{replica.connection_pool.connection_kwargs['port']}"
    replica.close()
    return f"{old.host}:{old.port}", new


def cluster_kill_master(slot_key: str) -> tuple[str, str]:
    """kill -9 of the master holding ``slot_key``; returns (old, new) master
    addresses once its replica, elected by the others, serves the slot.
    ``cluster_restore`` brings the killed node back (as a replica)."""
    cluster = cluster_sync_client()
    old = cluster.get_node_from_key(slot_key)
    cluster.close()
    victim = redis.Redis(host=old.host, port=old.port)
    pid = int(victim.info("server")["process_id"])
    victim.close()
    os.kill(pid, signal.SIGKILL)
    for _ in range(1200):  # node timeout (2 s) and the election, well within 30 s
        try:
            probe = cluster_sync_client()
            node = probe.get_node_from_key(slot_key)
            addr = f"{node.host}:{node.port}"
            up = addr != f"{old.host}:{old.port}" and redis.Redis(host=node.host, port=node.port).ping()
            probe.close()
            if up:
                return f"{old.host}:{old.port}", addr
        except redis.RedisError:
            pass
        time.sleep(0.025)
    raise RuntimeError("no replica took over from the killed master")


def cluster_restore() -> None:
    """Starts the cluster's nodes that are down again (scripts/redis_cluster.sh start)."""
    script = pathlib.Path(__file__).resolve().parents[2] / "scripts" / "redis_cluster.sh"
    subprocess.run([str(script), "start"], check=True, stdout=subprocess.DEVNULL, timeout=120)
