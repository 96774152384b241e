"""Cache service benchmark, through gRPC (mTLS on loopback) with the local
simulator, everything measured in the same run:

- AcquireLease hit latency against an empty RPC on the same server
  (GetScopeStatus of an empty scope: same channel, same interceptors), in
  interleaved rounds so drift hits both alike -> ``hit_floor_ratio``
  (hit p50 / floor p50).
- The wall time of N concurrent misses for one key (N = 1, 16, 256) while
  the provider's create takes ``CREATE_LATENCY_S``, and the number of
  provider creates each made -> ``creates_for_256`` and ``wall_ratio_256``
  (256 concurrent misses over one). Single flight keeps the creates at one;
  the wall time grows only by the cost of serving 256 RPCs, reported as
  ``floor_wall_ms_256`` (256 concurrent empty RPCs on the same server).
- The digest work of one turn at 1,000 contents, in process: AcquireLease's
  (convert the prefix, fingerprint and chain it) plus GenerateContent's
  (convert the request, the lease check's chain digest), in the steady
  state of a growing conversation (each call's newest content is new, the
  rest were sent before) -> ``digest_ms_1000``, with the servicer's content
  memo; ``digest_ms_1000_unmemoized``, the same turns without it,
  interleaved in the same run (p50s; ``digest_ms_1000_p95`` too);
  ``digest_ms_1000_cold``, a first sight of all 1,000 contents with the
  memo; ``digest_memo_hits``/``_misses``, the memo's counts over the run.

Run: ``.venv/bin/python -m bench.cache`` from the repository root. The last
line is one JSON object with every figure.
"""

from __future__ import annotations

import asyncio
import json
import pathlib
import statistics
import sys
import tempfile
import time
from typing import Any

from agentctx.cache.v1 import cache_service_pb2 as pb
from agentctx.cache.v1 import cache_service_pb2_grpc
from agentctx.type.v1 import cache_pb2, content_pb2, generation_pb2
from agentctx_common.certs import init_dev_certs
from cache_service.api import convert
from cache_service.api.content_memo import ContentMemo
from cache_service.app import CacheApp
from cache_service.domain.keys import PrefixView, call_chain
from cache_service.providers.local import LocalProvider
from cache_service.server import build_server
from tests.cache import protos
from tests.support.servers import cache_settings, secure_channel

HIT_SAMPLES = 2000
ROUNDS = 10
MISS_SIZES = (1, 16, 256)
MISS_REPEATS = 5
CREATE_LATENCY_S = 0.25  # real Gemini creates take longer; this keeps the run short
PREFIX_TURNS = 6
DIGEST_CONTENTS = 1000
DIGEST_TURNS = 60


def _pct(samples: list[float], q: float) -> float:
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


async def _timed(call: Any) -> float:
    started = time.perf_counter()
    await call
    return (time.perf_counter() - started) * 1000


async def hit_vs_floor(stub: cache_service_pb2_grpc.CacheServiceStub) -> dict[str, float]:
    request = protos.acquire(PREFIX_TURNS, user="hit")
    first = await stub.AcquireLease(request)
    assert first.metadata.state == cache_pb2.CACHE_STATE_CREATED, first.metadata
    floor_request = pb.GetScopeStatusRequest(scope=protos.scope(user="floor"))
    for _ in range(200):  # warm both paths
        await stub.GetScopeStatus(floor_request)
        reply = await stub.AcquireLease(request)
        await stub.ReleaseLease(pb.ReleaseLeaseRequest(lease=reply.lease))
    hits: list[float] = []
    floor: list[float] = []
    per_round = HIT_SAMPLES // ROUNDS
    for _ in range(ROUNDS):
        for _ in range(per_round):
            floor.append(await _timed(stub.GetScopeStatus(floor_request)))
        for _ in range(per_round):
            started = time.perf_counter()
            reply = await stub.AcquireLease(request)
            hits.append((time.perf_counter() - started) * 1000)
            assert reply.metadata.state == cache_pb2.CACHE_STATE_HIT
            await stub.ReleaseLease(pb.ReleaseLeaseRequest(lease=reply.lease))
    hit_p50, floor_p50 = statistics.median(hits), statistics.median(floor)
    return {
        "hit_p50_ms": round(hit_p50, 4), "hit_p99_ms": round(_pct(hits, 0.99), 4),
        "floor_p50_ms": round(floor_p50, 4), "floor_p99_ms": round(_pct(floor, 0.99), 4),
        "hit_floor_ratio": round(hit_p50 / floor_p50, 3),
        "prefix_bytes": request.prefix.ByteSize(), "hit_samples": len(hits),
    }


async def concurrent_misses(stub: cache_service_pb2_grpc.CacheServiceStub, provider: LocalProvider) -> dict[str, Any]:
    figures: dict[str, Any] = {"create_latency_ms": CREATE_LATENCY_S * 1000}
    walls: dict[int, float] = {}
    for n in MISS_SIZES:
        samples, creates = [], []
        for repeat in range(MISS_REPEATS):
            request = protos.acquire(PREFIX_TURNS, user=f"miss-{n}-{repeat}")
            before = provider.counts["create"]
            started = time.perf_counter()
            replies = await asyncio.gather(*(stub.AcquireLease(request, timeout=30) for _ in range(n)))
            samples.append((time.perf_counter() - started) * 1000)
            creates.append(provider.counts["create"] - before)
            states = [r.metadata.state for r in replies]
            assert states.count(cache_pb2.CACHE_STATE_CREATED) == 1, states
        walls[n] = statistics.median(samples)
        figures[f"wall_ms_{n}"] = round(walls[n], 3)
        figures[f"creates_for_{n}"] = max(creates)
    for n in MISS_SIZES[1:]:
        figures[f"wall_ratio_{n}"] = round(walls[n] / walls[1], 3)
    # What 256 concurrent empty RPCs cost on this server, for scale: the
    # miss wall time is about one create plus this.
    floor_request = pb.GetScopeStatusRequest(scope=protos.scope(user="floor"))
    samples = []
    for _ in range(MISS_REPEATS):
        started = time.perf_counter()
        await asyncio.gather(*(stub.GetScopeStatus(floor_request, timeout=30) for _ in range(MISS_SIZES[-1])))
        samples.append((time.perf_counter() - started) * 1000)
    figures[f"floor_wall_ms_{MISS_SIZES[-1]}"] = round(statistics.median(samples), 3)
    return figures


def _digest_turn(prefix_pb: pb.CachePrefix, request_pb: generation_pb2.ModelRequest, memo: ContentMemo | None) -> float:
    """What the servicer does to digests in one turn, as AcquireLease and
    GenerateContent do it."""
    started = time.perf_counter()
    view = PrefixView.of(convert.prefix_from_proto(prefix_pb, "local-sim-1", memo))
    call = convert.call_from_proto(request_pb, memo)
    ok = call_chain(call, view.history_len) == view.digest
    elapsed = (time.perf_counter() - started) * 1000
    assert ok
    return elapsed


def digest_work() -> dict[str, float]:
    system, tools = protos.text("", protos.SYSTEM_TEXT), protos.tools()

    def message(role: str, i: int) -> content_pb2.Content:
        return protos.text(role, f"{role} message {i}: " + "word " * 30)

    # Grows by an input and an answer per turn, from 1,000 - DIGEST_TURNS
    # contents: the median turn sends 1,000.
    start = DIGEST_CONTENTS - DIGEST_TURNS
    history = [message("user" if i % 2 == 0 else "model", i) for i in range(start - 2)]
    memo = ContentMemo(64 * 1024 * 1024)

    def turn(t: int, memo: ContentMemo | None) -> float:
        prefix_pb = pb.CachePrefix(system_instruction=system, tools=tools, history=history)
        request_pb = generation_pb2.ModelRequest(model="local-sim-1", system_instruction=system, tools=tools,
                                                 contents=[*history, message("user", start + 2 * t)])
        return _digest_turn(prefix_pb, request_pb, memo)

    cold = turn(-1, memo)
    memoized, unmemoized = [], []
    for t in range(DIGEST_TURNS):
        # The last turn's input and the model's answer to it: in the
        # prefix, only the answer is new; in the request, only the input.
        history += [message("user", start + 2 * (t - 1)), message("model", start + 2 * t - 1)]
        unmemoized.append(turn(t, None))
        memoized.append(turn(t, memo))
    return {
        "digest_ms_1000": round(statistics.median(memoized), 3),
        "digest_ms_1000_p95": round(_pct(memoized, 0.95), 3),
        "digest_ms_1000_unmemoized": round(statistics.median(unmemoized), 3),
        "digest_ms_1000_cold": round(cold, 3),
        "digest_memo_hits": memo.hits,
        "digest_memo_misses": memo.misses,
    }


async def main() -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        certs = pathlib.Path(tmp) / "certs"
        init_dev_certs(certs)
        settings = cache_settings(certs, pathlib.Path(tmp), max_waiters=256, sightings_before_create=0, max_inflight_rpcs=512,
                                  min_prefix_tokens=64, local_min_cache_tokens=64, log_level="WARNING")
        app = await CacheApp.create(settings)
        server = await build_server(settings, app=app)
        await server.start()
        provider = app.providers["local"]
        assert isinstance(provider, LocalProvider)
        try:
            async with secure_channel(server.port, certs, client="context-client") as channel:
                stub = cache_service_pb2_grpc.CacheServiceStub(channel)
                figures = await hit_vs_floor(stub)
                provider.latency_s = CREATE_LATENCY_S
                figures.update(await concurrent_misses(stub, provider))
        finally:
            await server.stop(grace=1)
    figures.update(digest_work())
    return figures


if __name__ == "__main__":
    result = asyncio.run(main())
    for key, value in result.items():
        print(f"{key:>20}: {value}", file=sys.stderr)
    print(json.dumps(result, sort_keys=True))
