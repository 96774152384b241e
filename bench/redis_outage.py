"""The cache tier's Redis killed under load: three cache replicas (real
processes, ``agentctx serve cache``) on a redis-server of the bench's own
(a free port, no persistence), the simulated provider's state on the shared
Redis (it stays up, as a real provider does), one context service (this
process, SQLite; the issue's shape has two on PostgreSQL) whose
``cache_target`` lists the three, and 16 agents running Generate turns.

Agents follow the README's retry rules: UNAVAILABLE and RESOURCE_EXHAUSTED
are retried after their RetryInfo (3 attempts), anything else is not.
Redis is killed with SIGKILL and started again (empty) twice: after 1 s and
after 20 s. Figures for each kill:

- ``turns_failed``: turns that still failed after the retries;
- ``turns_internal_or_unknown``: answers INTERNAL or UNKNOWN (aim 0);
- ``turns_bypassed_registry``: turns served uncached, BYPASS
  REGISTRY_UNAVAILABLE;
- ``first_cached_after_s``: from Redis answering again to the first turn
  that used a cache (CREATED, HIT or GROWN).

- ``unknown_live_after_restart``: 3 s after Redis answers again, the live
  (unexpired) caches at the provider that no registry entry names (the
  epoch reconcile and the spill reconcile delete them; aim 0).

``orphans_live``: once every TTL and the tier's windows have passed, the
unexpired caches at the provider (0). ``expired_rows_unknown``: the
simulator's rows left expired and never deleted: caches whose entries
went with the restarted Redis's data and which ended at their TTL (a real
provider drops those itself).

Run: ``.venv/bin/python -m bench.redis_outage`` from the repository root.
The last line is one JSON object with every figure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import pathlib
import secrets
import sys
import tempfile
import time
from typing import Any

import grpc
import redis

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.type.v1 import cache_pb2
from agentctx_common.certs import init_dev_certs
from agentctx_common.status import error_from_rpc
from tests.cluster.support import PrivateRedis
from tests.support import processes
from tests.support.servers import context_settings, secure_channel, start_context
from tests.turns.builders import SYSTEM, TOOLS, create_session, user_text

SHARED_REDIS = "redis://127.0.0.1:6379/0"
REPLICAS = 3
AGENTS = 16
CACHE_TTL_S = 4.0
TURN_TIMEOUT_S = 15.0
OUTAGES_S = (1.0, 20.0)
SETTLE_S = 6.0  # turns before each kill and after each restart
RETRYABLE = (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED)
CACHED = (cache_pb2.CACHE_STATE_CREATED, cache_pb2.CACHE_STATE_HIT, cache_pb2.CACHE_STATE_GROWN)


class Tally:
    def __init__(self) -> None:
        self.turns = self.failed = self.internal = self.bypassed = 0
        self.since: float | None = None  # when Redis answered again
        self.first_cached_after: float | None = None


async def main() -> dict[str, Any]:
    shared = redis.Redis.from_url(SHARED_REDIS, socket_connect_timeout=2)
    shared.ping()
    private = PrivateRedis()
    private.start()
    prefix = f"agentctx-bench-{secrets.token_hex(4)}:"
    sim_prefix = prefix.rstrip(":") + "-sim:"
    procs: list[Any] = []
    figures: dict[str, Any] = {"replicas": REPLICAS, "context_replicas": 1, "agents": AGENTS}
    with tempfile.TemporaryDirectory() as tmp_name:
        tmp = pathlib.Path(tmp_name)
        certs = tmp / "certs"
        init_dev_certs(certs)
        cache = dict(redis_url=private.url, redis_key_prefix=prefix,
                     redis_encryption_key=base64.b64encode(secrets.token_bytes(32)).decode(),
                     lease_keys=[{"id": "bench", "secret": secrets.token_hex(32)}], active_lease_key_id="bench",
                     local_shared_state=True, local_state_url=SHARED_REDIS, local_state_prefix=sim_prefix,
                     sightings_before_create=0, min_prefix_tokens=64, local_min_cache_tokens=64,
                     default_ttl_s=CACHE_TTL_S, max_ttl_s=CACHE_TTL_S, expiry_margin_s=0.5, sweep_interval_s=0.3,
                     replica_heartbeat_s=0.3, replica_dead_after_s=1.2, tier_sweep_interval_s=0.3,
                     registry_timeout_s=1.0, registry_retry_s=0.5, log_level="WARNING")
        ports = [processes.free_port() for _ in range(REPLICAS)]
        context = None
        channel = None
        try:
            for i, port in enumerate(ports):
                data = tmp / f"r{i}"
                data.mkdir()
                config = processes.write_config(tmp / f"r{i}.toml", certs, context_port=processes.free_port(),
                                                cache_port=port, data_dir=data, cache=cache)
                proc = processes.spawn("cache", config, tmp / f"r{i}.log")
                procs.append(proc)
                await asyncio.to_thread(processes.wait_healthy, port, certs, "context-client", proc, 60)
            target = "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in ports)
            context = await start_context(context_settings(certs, tmp, cache_target=target, log_level="WARNING"))
            channel = secure_channel(context.port, certs)
            stub = context_service_pb2_grpc.ContextServiceStub(channel)
            sessions = [(await create_session(stub, cache=True, user=f"agent-{i}")).name for i in range(AGENTS)]
            for outage in OUTAGES_S:
                figures.update({f"{k}_{int(outage)}s": v for k, v in (await _through_a_kill(
                    stub, sessions, private, outage, shared, (sim_prefix, prefix))).items()})
            await asyncio.sleep(CACHE_TTL_S + 4.0)
            live, _ = _provider_rows(shared, private, sim_prefix, prefix)
            figures["orphans_live"] = live
            figures["expired_rows_unknown"] = int(shared.hlen(f"{sim_prefix}caches")) - live
            figures["provider_creates"] = int(shared.hget(f"{sim_prefix}stats", "create") or 0)
        finally:
            if channel is not None:
                await channel.close()
            if context is not None:
                await context.stop(grace=1)
            for proc in procs:
                processes.stop(proc)
            private.kill()
            for key in shared.scan_iter(match=f"{sim_prefix}*", count=500):
                shared.delete(key)
    shared.close()
    return figures


def _provider_rows(shared: redis.Redis, private: PrivateRedis, sim_prefix: str, prefix: str) -> tuple[int, int]:
    """(live caches at the provider, those of them no registry entry names)."""
    registry = redis.Redis.from_url(private.url)
    now = time.time()
    live = unknown = 0
    for raw in shared.hvals(f"{sim_prefix}caches"):
        row = json.loads(raw)
        if row["expire"] <= now:
            continue
        live += 1
        entry_id = row["spec"]["display_name"].removeprefix("agentctx-")
        unknown += not registry.exists(f"{prefix}e:{entry_id}")
    registry.close()
    return live, unknown


async def _through_a_kill(stub: Any, sessions: list[str], private: PrivateRedis, outage_s: float,
                          shared: redis.Redis, prefixes: tuple[str, str]) -> dict[str, Any]:
    tally = Tally()
    unknown: list[int] = []
    stop = asyncio.Event()
    counter = iter(range(10**9))

    async def agent(session: str) -> None:
        while not stop.is_set():
            i = next(counter)
            request = pb.GenerateRequest(session=session, input=[user_text(f"t-{secrets.token_hex(6)}",
                                                                           f"Turn {i}: the next stop?")],
                                         system_instruction=SYSTEM, tools=TOOLS)
            await _turn(stub, request, tally)

    async def killer() -> None:
        await asyncio.sleep(SETTLE_S)
        await asyncio.to_thread(private.kill)
        await asyncio.sleep(outage_s)
        await asyncio.to_thread(private.start)
        tally.since = time.monotonic()
        await asyncio.sleep(3.0)
        unknown.append((await asyncio.to_thread(_provider_rows, shared, private, *prefixes))[1])
        await asyncio.sleep(SETTLE_S - 3.0)
        stop.set()

    await asyncio.gather(killer(), *(agent(s) for s in sessions))
    return {"turns": tally.turns, "turns_failed": tally.failed, "turns_internal_or_unknown": tally.internal,
            "turns_bypassed_registry": tally.bypassed, "unknown_live_after_restart": unknown[0],
            "first_cached_after_s": round(tally.first_cached_after, 3) if tally.first_cached_after else None}


async def _turn(stub: Any, request: pb.GenerateRequest, tally: Tally) -> None:
    tally.turns += 1
    for attempt in range(3):
        try:
            reply = (await stub.Generate(request, timeout=TURN_TIMEOUT_S)).reply
        except grpc.aio.AioRpcError as err:
            if err.code() in (grpc.StatusCode.INTERNAL, grpc.StatusCode.UNKNOWN):
                tally.internal += 1
            if err.code() not in RETRYABLE or attempt == 2:
                tally.failed += 1
                return
            await asyncio.sleep(error_from_rpc(err).retry_after or 1.0)
            continue
        meta = reply.cache_metadata
        if meta.bypass_reason == cache_pb2.CACHE_BYPASS_REASON_REGISTRY_UNAVAILABLE:
            tally.bypassed += 1
        if meta.state in CACHED and tally.since is not None and tally.first_cached_after is None:
            tally.first_cached_after = time.monotonic() - tally.since
        return


if __name__ == "__main__":
    result = asyncio.run(main())
    for key, value in result.items():
        print(f"{key:>36}: {value}", file=sys.stderr)
    print(json.dumps(result, sort_keys=True))
