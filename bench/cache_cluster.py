"""The cache tier as a cluster: three cache replicas on Redis, each a real
process (``agentctx serve cache``), sharing one simulated provider (the
simulator's caches in Redis), behind one context service whose
``cache_target`` is the ``ipv4:`` list of the three. Loopback only, its own
Redis key prefixes, deleted at the end.

- ``creates_for_256``: 256 concurrent AcquireLease misses for one prefix,
  spread round-robin over the three replicas; provider creates counted in
  the shared simulator's stats (single flight across replicas: 1).
- ``hit_ratio_vs_single``: p50 of a lease hit on the cluster (round-robin
  over the replicas) over the p50 of the same hit on one in-memory replica
  (a fourth process without Redis), interleaved rounds in the same run
  (aim: at most 1.5); ``hit_p50_ms_one_redis_replica``, the same hits on
  one Redis replica only, tells the Redis share from the spread's
  (``hit_redis_share_p50_ms``: that p50 less the in-memory one's;
  ``hit_spread_share_p50_ms``: the cluster's less that one's).
- ``turns_failed``: concurrent conversations of Generate turns (caching on)
  through the context service while one replica is killed with SIGKILL and
  started again on its port; a turn is retried once, and this counts the
  turns that failed after the retry (aim: 0).
- ``orphans``: caches left at the provider (rows in the shared simulator,
  expired or not) once the conversations are over, the killed replica is
  back, and every cache's TTL plus the tier's dead-replica window has
  passed (0): ``orphans_at_window`` right then, ``orphans`` after waiting
  up to the turns' wall time more for sweeps a loaded machine ran late
  (``orphans_swept_late_s``: how long that took).

Nothing here fails because the machine is slow: a hit whose cache expired
while the machine stalled between two batches (caches live CACHE_TTL_S
past their last use) is counted in ``hits_expired_under_load`` and not
timed, instead of failing the run; so is a miss answered without a lease
because its create outlasted the wait (``misses_without_lease_of_256``).

Run: ``.venv/bin/python -m bench.cache_cluster`` from the repository root.
The last line is one JSON object with every figure. ``--redis-url`` puts
the registry elsewhere (e.g. ``redis+cluster://127.0.0.1:7000,...``, the
local cluster of scripts/redis_cluster.sh; the simulator's state stays on
the single Redis, as a provider is not the registry); ``--quick`` runs
fewer rounds (one miss round, four hit rounds, shorter conversations).
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import json
import pathlib
import secrets
import signal
import statistics
import sys
import tempfile
import time
from typing import Any

import grpc
import redis

from agentctx.cache.v1 import cache_service_pb2 as cpb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.type.v1 import cache_pb2
from agentctx_common.certs import init_dev_certs
from tests.cache import protos
from tests.support import processes
from tests.support.servers import context_settings, secure_channel, start_context
from tests.turns.builders import SYSTEM, TOOLS, create_session, user_text

REDIS_URL = "redis://127.0.0.1:6379/0"
REPLICAS = 3
MISSES = 256
MISS_REPEATS = 3
PREFIX_TURNS = 6
HIT_ROUNDS = 10
HITS_PER_ROUND = 100
CONVERSATIONS = 6
TURNS = 40
KILL_AFTER_TURNS = 12  # turns completed (all conversations) before the kill
CACHE_TTL_S = 4.0
HEARTBEAT_S = 0.3
DEAD_AFTER_S = 1.2
TURN_TIMEOUT_S = 15.0


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


class Tier:
    """The replica processes, their configs and ports."""

    def __init__(self, tmp: pathlib.Path, certs: pathlib.Path, prefix: str, registry_url: str = REDIS_URL) -> None:
        self.tmp, self.certs, self.prefix, self.registry_url = tmp, certs, prefix, registry_url
        self.sim_prefix = prefix.rstrip(":") + "-sim:"
        self.ports = [processes.free_port() for _ in range(REPLICAS)]
        self.single_port = processes.free_port()
        self.procs: dict[int, Any] = {}
        common = dict(sightings_before_create=0, min_prefix_tokens=64, local_min_cache_tokens=64,
                      max_waiters=MISSES, max_inflight_rpcs=2 * MISSES, default_ttl_s=CACHE_TTL_S,
                      max_ttl_s=CACHE_TTL_S, expiry_margin_s=0.5, sweep_interval_s=0.3, log_level="WARNING")
        shared = dict(redis_url=registry_url, redis_key_prefix=prefix, local_state_url=REDIS_URL,
                      redis_encryption_key=base64.b64encode(secrets.token_bytes(32)).decode(),
                      lease_keys=[{"id": "bench", "secret": secrets.token_hex(32)}], active_lease_key_id="bench",
                      local_shared_state=True, local_state_prefix=self.sim_prefix,
                      replica_heartbeat_s=HEARTBEAT_S, replica_dead_after_s=DEAD_AFTER_S,
                      tier_sweep_interval_s=HEARTBEAT_S)
        self.configs = {port: self._config(f"r{i}", port, {**common, **shared}) for i, port in enumerate(self.ports)}
        self.configs[self.single_port] = self._config("single", self.single_port, common)

    def _config(self, name: str, port: int, cache: dict[str, Any]) -> pathlib.Path:
        data = self.tmp / name
        data.mkdir()
        return processes.write_config(self.tmp / f"{name}.toml", self.certs, context_port=processes.free_port(),
                                      cache_port=port, data_dir=data, cache=cache)

    def start(self, port: int) -> None:
        proc = processes.spawn("cache", self.configs[port], self.tmp / f"{port}.log")
        self.procs[port] = proc
        processes.wait_healthy(port, self.certs, "context-client", proc, timeout=60)

    def kill(self, port: int) -> None:
        processes.stop(self.procs.pop(port), sig=signal.SIGKILL)

    def stop_all(self) -> None:
        for port in list(self.procs):
            processes.stop(self.procs.pop(port))

    def creates(self, r: redis.Redis) -> int:
        return int(r.hget(f"{self.sim_prefix}stats", "create") or 0)

    def provider_rows(self, r: redis.Redis) -> int:
        return int(r.hlen(f"{self.sim_prefix}caches"))

    def cleanup(self, r: redis.Redis) -> int:
        deleted = 0
        nodes = [r]
        if self.registry_url.startswith("redis+cluster://"):
            from cache_service.cluster.client import parse

            cluster = redis.RedisCluster(startup_nodes=[redis.cluster.ClusterNode(h, p)
                                                        for h, p in parse(self.registry_url).nodes])
            nodes += [redis.Redis(host=n.host, port=n.port) for n in cluster.get_primaries()]
            cluster.close()
        for node in nodes:
            for prefix in (self.prefix, self.sim_prefix):
                for key in node.scan_iter(match=f"{prefix}*", count=500):
                    deleted += node.delete(key)
        return deleted


async def concurrent_misses(stubs: list[Any], tier: Tier, r: redis.Redis) -> dict[str, Any]:
    creates, walls, unserved = [], [], []
    for repeat in range(MISS_REPEATS):
        request = protos.acquire(PREFIX_TURNS, user=f"miss-{repeat}")
        before = tier.creates(r)
        started = time.perf_counter()
        replies = await asyncio.gather(*(stubs[i % len(stubs)].AcquireLease(request, timeout=30)
                                         for i in range(MISSES)))
        walls.append((time.perf_counter() - started) * 1000)
        creates.append(tier.creates(r) - before)
        # A waiter whose create outlasted its wait on a stalled machine is
        # answered without a lease (the caller goes uncached): counted, as
        # the machine's doing, not the code's.
        unserved.append(sum(1 for reply in replies if not reply.lease))
    return {f"creates_for_{MISSES}": max(creates), f"wall_ms_{MISSES}": round(statistics.median(walls), 3),
            f"misses_without_lease_of_{MISSES}": max(unserved)}


async def _hits(stubs: list[Any], request: cpb.AcquireLeaseRequest, n: int, out: list[float],
                expired: list[int]) -> None:
    """``n`` lease hits timed into ``out``. A cache lives CACHE_TTL_S past
    its last use; on a loaded machine the gap between two batches on one
    replica can outlast it, and the next acquire creates the cache again:
    that call is not a hit, so it is counted in ``expired`` and not timed
    (how long the machine stalls is not the code's figure)."""
    for i in range(n):
        stub = stubs[i % len(stubs)]
        started = time.perf_counter()
        reply = await stub.AcquireLease(request)
        elapsed = (time.perf_counter() - started) * 1000
        if not reply.lease:  # expired, and its create outlasted the wait
            expired.append(reply.metadata.state)
            continue
        if reply.metadata.state == cache_pb2.CACHE_STATE_HIT:
            out.append(elapsed)
        else:
            expired.append(reply.metadata.state)
        await stub.ReleaseLease(cpb.ReleaseLeaseRequest(lease=reply.lease))


async def hit_vs_single(cluster: list[Any], single: Any) -> dict[str, Any]:
    request = protos.acquire(PREFIX_TURNS, user="hit")
    expired: list[int] = []
    for stubs in (cluster, [single]):
        first = await stubs[0].AcquireLease(request)
        if first.lease:
            await stubs[0].ReleaseLease(cpb.ReleaseLeaseRequest(lease=first.lease))
        await _hits(stubs, request, 100, [], [])  # warm-up
    on_cluster: list[float] = []
    on_single: list[float] = []
    on_one: list[float] = []  # one Redis replica only: the Redis share apart from the spread
    for _ in range(HIT_ROUNDS):
        await _hits(cluster, request, HITS_PER_ROUND, on_cluster, expired)
        await _hits([single], request, HITS_PER_ROUND, on_single, expired)
        await _hits(cluster[:1], request, HITS_PER_ROUND, on_one, expired)
    cluster_p50, single_p50, one_p50 = statistics.median(on_cluster), statistics.median(on_single), statistics.median(on_one)
    return {"hit_p50_ms_one_redis_replica": round(one_p50, 4),
            # The gap apart: one Redis replica over the in-memory one (the store's round trips), and the
            # three replicas over that one (the spread: three processes on the machine's cores, each one
            # serving a third of the hits).
            "hit_redis_share_p50_ms": round(one_p50 - single_p50, 4),
            "hit_spread_share_p50_ms": round(cluster_p50 - one_p50, 4),
            "hit_p50_ms_cluster": round(cluster_p50, 4), "hit_p99_ms_cluster": round(_pct(on_cluster, 0.99), 4),
            "hit_p50_ms_single": round(single_p50, 4), "hit_p99_ms_single": round(_pct(on_single, 0.99), 4),
            "hit_ratio_vs_single": round(cluster_p50 / single_p50, 3), "hit_samples": len(on_cluster),
            "hits_expired_under_load": len(expired)}


async def turns_through_a_kill(stub: Any, tier: Tier) -> dict[str, Any]:
    sessions = [await create_session(stub, cache=True, user=f"conv-{i}") for i in range(CONVERSATIONS)]
    done = {"turns": 0, "retried": 0, "failed": 0, "deduplicated": 0}
    killed, reached = asyncio.Event(), asyncio.Event()

    async def turn(session: str, i: int) -> bool:
        request = pb.GenerateRequest(session=session, input=[user_text(f"t-{i}", f"Turn {i}: the next stop?")],
                                     system_instruction=SYSTEM, tools=TOOLS)
        for attempt in range(2):
            try:
                reply = await stub.Generate(request, timeout=TURN_TIMEOUT_S)
                done["deduplicated"] += reply.deduplicated  # the retry of a turn that had landed
                return True
            except grpc.RpcError:
                if attempt == 0:
                    done["retried"] += 1
        return False

    async def conversation(session: str) -> None:
        for i in range(TURNS):
            if not await turn(session, i):
                done["failed"] += 1
            done["turns"] += 1
            if done["turns"] >= KILL_AFTER_TURNS:
                reached.set()

    async def killer() -> None:
        await reached.wait()
        victim = tier.ports[1]
        await asyncio.to_thread(tier.kill, victim)
        killed.set()
        await asyncio.sleep(DEAD_AFTER_S)
        await asyncio.to_thread(tier.start, victim)

    started = time.perf_counter()
    await asyncio.gather(killer(), *(conversation(s.name) for s in sessions))
    return {"turns": done["turns"], "turns_retried": done["retried"], "turns_failed": done["failed"],
            "turns_wall_s": round(time.perf_counter() - started, 3), "turns_deduplicated": done["deduplicated"],
            "killed": killed.is_set()}


def _options() -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.cache_cluster")
    parser.add_argument("--redis-url", default=REDIS_URL, help="the registry's Redis (redis://, redis+cluster://, "
                        "redis+sentinel://)")
    parser.add_argument("--quick", action="store_true", help="fewer rounds")
    return parser.parse_args()


async def main(registry_url: str = REDIS_URL) -> dict[str, Any]:
    r = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
    r.ping()
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        tier = Tier(tmp, certs, f"agentctx-bench-{secrets.token_hex(4)}:", registry_url)
        channels: list[grpc.aio.Channel] = []
        context = None
        try:
            for port in [*tier.ports, tier.single_port]:
                await asyncio.to_thread(tier.start, port)
            channels = [secure_channel(p, certs, client="context-client") for p in [*tier.ports, tier.single_port]]
            stubs = [cache_service_pb2_grpc.CacheServiceStub(c) for c in channels]
            figures: dict[str, Any] = {"replicas": REPLICAS, "registry": registry_url.partition("://")[0]}
            figures.update(await concurrent_misses(stubs[:REPLICAS], tier, r))
            figures.update(await hit_vs_single(stubs[:REPLICAS], stubs[REPLICAS]))
            target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in tier.ports)
            context = await start_context(context_settings(certs, tmp, cache_target=target, log_level="WARNING"))
            agent = secure_channel(context.port, certs)
            channels.append(agent)
            figures.update(await turns_through_a_kill(context_service_pb2_grpc.ContextServiceStub(agent), tier))
            # Every cache's TTL and the dead replica's window pass; the
            # janitors and the tier sweep what is left. On a loaded machine
            # the sweeps run late: ``orphans`` is what is left once they
            # have had a while, measured from how long the turns took.
            await asyncio.sleep(CACHE_TTL_S + 2 * DEAD_AFTER_S + 1.0)
            figures["orphans_at_window"] = tier.provider_rows(r)
            waited, patience = 0.0, max(10.0, figures["turns_wall_s"])
            while tier.provider_rows(r) and waited < patience:
                await asyncio.sleep(0.5)
                waited += 0.5
            figures["orphans"] = tier.provider_rows(r)
            figures["orphans_swept_late_s"] = waited
            figures["provider_creates"] = tier.creates(r)
        finally:
            for channel in channels:
                await channel.close()
            if context is not None:
                await context.stop(grace=1)
            tier.stop_all()
            tier.cleanup(r)
    r.close()
    return figures


if __name__ == "__main__":
    options = _options()
    if options.quick:
        MISS_REPEATS, HIT_ROUNDS, CONVERSATIONS, TURNS, KILL_AFTER_TURNS = 1, 4, 4, 20, 6
    result = asyncio.run(main(options.redis_url))
    for key, value in result.items():
        print(f"{key:>22}: {value}", file=sys.stderr)
    print(json.dumps(result, sort_keys=True))
