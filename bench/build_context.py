"""BuildContext latency through gRPC for sessions of 100, 1,000 and 10,000
events, against an empty unary RPC (grpc.health.v1 Check) on the same
server, in the same run, over the same mTLS channel.

Bars: at 100 events, p50 within 2x the floor's p50; from 1,000 to 10,000
events, p50 grows no more than 11x. The timed calls repeat one request on
an unchanged session (history cache and grouping warm). Also reported: the
selection pipeline in-process (no gRPC) over the same cached records, warm
and regrouped (the first build after an append).

After an append (what every turn does): on sessions of 100 and 1,000
events, each round appends one event through AppendEvent (the realistic
mix, so tool calls and their results land in separate appends), then
times one BuildContext right after it and one more on the unchanged
session. ``after_append_p50_ms_{100,1k}`` and ``after_append_ratio_{100,1k}``
(after-append p50 over that warm p50; aim: at most 1.2), and the same at
10,000 events.

The ADK peer: ADK's contents processor (``_get_contents``, what ADK's
``_ContentLlmRequestProcessor`` builds ``LlmRequest.contents`` with from a
session's events; in process, no I/O) over the same events, run in the ADK
venv (tests/adk/venv.py; google-adk needs google-genai < 3) as a process
that times batches on request, interleaved with agentctx's after-append
batches (A B B A ...), so that a change in the machine's load falls on both
sides of the ratio. ``adk_peer_p50_us_{100,1000,10000}`` and
``adk_ratio_{100,1k,10k}``: agentctx's after-append p50 (through gRPC) over
ADK's p50 (aim: at most 1.0 each); ``adk_ratio_*_per_pair`` the same per
pair of batches and ``adk_ratio_*_spread`` their max over min. Without the
ADK venv the figures say why.

Events are of realistic size: every tool result is a file's worth of lines
(about 3 KB, ``tool_result_bytes``); agentctx's time follows bytes and
ADK's the number of events, so short events alone would flatter agentctx.
``--quick``: 100 and 1,000 events only, a fifth of the samples.

Run: ``.venv/bin/python -m bench.build_context`` from the repository root.
The last line is one JSON object with every figure.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from typing import Any

import grpc
from google.protobuf import json_format
from grpc_health.v1 import health_pb2, health_pb2_grpc

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.type.v1 import content_pb2, generation_pb2
from agentctx_common.certs import SAMPLE_AGENT_ID, init_dev_certs
from agentctx_common.tls import channel_credentials
from bench import cputime
from context_service.domain import model as m
from context_service.domain import selection as sel
from context_service.domain.config import ContextConfig
from context_service.domain.model import SessionKey
from context_service.mapping.convert import event_to_proto
from context_service.settings import ContextSettings
from context_service.storage.sql_store import open_store
from tests.adk.venv import ROOT, adk_python
from tests.support.servers import context_settings, start_context

SIZES = (100, 1_000, 10_000)
# Sessions timed right after an append, and the rounds (append, build, build).
AFTER_APPEND = {100: ("100", 600), 1_000: ("1k", 300), 10_000: ("10k", 60)}
# ADK's contents processor: samples per size.
ADK_SAMPLES = {100: 200, 1_000: 60, 10_000: 12}
AIM_ADK_RATIO = 1.0
# Samples per size, gathered in interleaved rounds so drift hits all alike.
SAMPLES = {0: 3000, 100: 3000, 1_000: 600, 10_000: 80}
ROUNDS = 10
# ADK and agentctx timed in alternating batches (A B B A ...) per size.
BATCHES = 6
TOOL_RESULT_LINES = 60
APP = "bench"
PEER_TIMEOUT_S = 600.0


def session_events(n: int) -> list[m.Event]:
    """A realistic mix: user question, tool call, tool result, answer."""
    events: list[m.Event] = []
    prompt = 900
    for i in range(n):
        step = i % 4
        if step == 0:
            content = m.Content("user", (m.Part(text=f"Question {i}: what changed in module {i % 17} and why? " * 2),))
            author = "user"
            usage = None
        elif step == 1:
            args = {"path": f"src/module_{i % 17}.py", "limit": 200, "api_key": "sk-not-sent", "flags": ["a", "b"]}
            content = m.Content("model", (m.Part(function_call=m.FunctionCall(f"call{i}", "read_file", args)),))
            author, usage = "agent", None
        elif step == 2:
            # A file's worth of lines (~3 KB): tool results are what makes
            # real histories heavy, and agentctx's time follows bytes.
            result = {"lines": [f"line {j}: value = {j * i}  # {'checked ' * 4}" for j in range(TOOL_RESULT_LINES)],
                      "token": "t", "ok": True}
            content = m.Content("user", (m.Part(function_response=m.FunctionResponse(f"call{i - 1}", "read_file", result)),))
            author, usage = "agent", None
        else:
            content = m.Content("model", (m.Part(text=f"Module {i % 17} now validates its input before use. " * 3),))
            author = "agent"
            prompt += 180
            usage = m.Usage(prompt_tokens=prompt, output_tokens=40, total_tokens=prompt + 40)
        events.append(m.Event(id=f"e{i}", author=author, content=content, invocation_id=f"inv{i // 4}", usage=usage))
    return events


def request(n: int) -> pb.BuildContextRequest:
    tool = generation_pb2.Tool(function_declarations=[generation_pb2.FunctionDeclaration(name="read_file", description="Reads a file.")])
    tool.function_declarations[0].parameters.update({"type": "object", "properties": {"path": {"type": "string"}}})
    return pb.BuildContextRequest(
        session=f"apps/{APP}/users/u/sessions/s{n}",
        input=[content_pb2.Content(role="user", parts=[content_pb2.Part(text="And what should I do next?")])],
        system_instruction=content_pb2.Content(parts=[content_pb2.Part(text="You are a careful coding assistant.")]),
        tools=[tool],
        generation_config=generation_pb2.GenerationConfig(temperature=0.2, max_output_tokens=1024),
    )


async def populate(db_url: str, sizes: tuple[int, ...]) -> dict[int, list[m.Event]]:
    store = await open_store(db_url, create_if_empty=True)
    made = {}
    try:
        for n in sizes:
            key = SessionKey(APP, "u", f"s{n}")
            await store.create_session(key, state={}, config=ContextConfig())
            events = session_events(n)
            for e in events:
                await store.append_event(key, e)
            made[n] = await store.list_events(key)
        for n in sizes:
            key = SessionKey(APP, "u", f"a{n}")
            await store.create_session(key, state={}, config=ContextConfig())
            for e in session_events(n):
                await store.append_event(key, e)
    finally:
        await store.close()
    return made


async def after_append(stub: Any, peer: AdkPeer | str, sizes: dict[int, tuple[str, int]],
                       adk_samples: dict[int, int]) -> dict[int, tuple[list[float], list[float], list[list[float]]]]:
    """Per size: BuildContext seconds right after an AppendEvent, and on the
    unchanged session right after that, in alternation; and ADK's contents
    processor's seconds, in batches interleaved with agentctx's (A B B A
    ...: the machine's load falls on both sides alike), one list per batch
    (agentctx's batches are marked in the after-append list by position)."""
    out: dict[int, tuple[list[float], list[float], list[list[float]]]] = {}
    for n, (_, rounds) in sizes.items():
        name = f"apps/{APP}/users/u/sessions/a{n}"
        req = request(n)
        req.session = name
        fresh = session_events(n + rounds)[n:]
        for _ in range(3):
            await stub.BuildContext(req)
        appended: list[float] = []
        warm: list[float] = []
        adk: list[list[float]] = []
        per_batch = -(-len(fresh) // BATCHES)
        for b in range(BATCHES):
            batch = fresh[b * per_batch:(b + 1) * per_batch]
            if b % 2 == 0 and not isinstance(peer, str):
                adk.append(await peer.batch(n, max(1, adk_samples[n] // BATCHES)))
            for event in batch:
                await stub.AppendEvent(pb.AppendEventRequest(parent=name, event=event_to_proto(event, None)))
                await timed(lambda req=req: stub.BuildContext(req), 1, appended)
                await timed(lambda req=req: stub.BuildContext(req), 1, warm)
            if b % 2 == 1 and not isinstance(peer, str):
                adk.append(await peer.batch(n, max(1, adk_samples[n] // BATCHES)))
        out[n] = (appended, warm, adk)
    return out


def pair_ratios(appended: list[float], adk: list[list[float]], batches: int) -> list[float]:
    """agentctx's after-append p50 over ADK's p50 per pair of batches (A B
    B A), whose spread shows how far the machine moved the ratio."""
    if not adk:
        return []
    per_batch = -(-len(appended) // batches)
    ratios = []
    for pair in range(len(adk) // 2):
        ours = appended[2 * pair * per_batch:(2 * pair + 2) * per_batch]
        theirs = adk[2 * pair] + adk[2 * pair + 1]
        if ours and theirs:
            ratios.append(statistics.median(ours) / statistics.median(theirs))
    return ratios


async def timed(call: Callable[[], Awaitable[Any]], count: int, into: list[float]) -> None:
    for _ in range(count):
        start = time.perf_counter()
        await call()
        into.append(time.perf_counter() - start)


def quantiles(samples: list[float]) -> tuple[float, float]:
    cuts = statistics.quantiles(samples, n=100, method="inclusive")
    return cuts[49] * 1e6, cuts[98] * 1e6


def inprocess(events: list[m.Event], req: pb.BuildContextRequest, count: int, *, warm: bool = True) -> float:
    """Median seconds of the pure pipeline (select, pair_calls, account) over cached
    records (no I/O, no proto). ``warm``: the grouping memo is kept between
    calls, as for repeated builds of an unchanged session; cold: regrouped
    every call, as for the first build after an append."""
    keys = sel.DEFAULT_SECRET_KEYS
    records = [sel.event_record(e, keys) for e in events]
    policy = sel.effective_policy(None, None)
    inputs = [sel.content_record(m.Content("user", (m.Part(text=req.input[0].parts[0].text),)), keys)]
    parts = sel.RequestParts("local-sim-1", None, [], None, None, [], inputs)
    samples = []
    memo: dict = {}  # as the server's history cache keeps it between calls
    for _ in range(count):
        start = time.perf_counter()
        selection = sel.select(records, inputs, policy, memo=memo if warm else None)
        selection, paired = sel.pair_calls(selection, parts)
        sel.account(selection, paired, policy)
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


class AdkPeer:
    """ADK's contents processor in the ADK venv, timed in batches on request
    (bench/adk_side.py ``contents-serve``), so that its batches interleave
    with agentctx's while the server runs."""

    def __init__(self, proc: asyncio.subprocess.Process, tmp: tempfile.TemporaryDirectory[str]) -> None:
        self.proc, self.tmp = proc, tmp

    @classmethod
    async def start(cls, made: dict[int, list[m.Event]]) -> AdkPeer | str:
        """The running peer over ``made``'s events per size, or why not."""
        try:
            python = await asyncio.to_thread(adk_python)
        except Exception as exc:  # noqa: BLE001 - reported instead of numbers
            return f"unavailable: the ADK venv could not be built ({type(exc).__name__}: {exc})"
        spec = {}
        for n, events in made.items():
            protos = [event_to_proto(e, None) for e in events]
            spec[str(n)] = ([{"id": p.id, "author": p.author, "invocation_id": p.invocation_id,
                              "content": json_format.MessageToDict(p.content)} for p in protos], 0)
        tmp = tempfile.TemporaryDirectory()
        path = pathlib.Path(tmp.name) / "adk_events.json"
        path.write_text(json.dumps(spec))
        clean = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV")}
        err = os.open(pathlib.Path(tmp.name) / "stderr", os.O_WRONLY | os.O_CREAT, 0o600)
        try:
            proc = await asyncio.create_subprocess_exec(
                str(python), "-m", "bench.adk_side", "contents-serve", "--events", str(path), cwd=str(ROOT),
                env=clean, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=err,
                limit=1 << 24)
        finally:
            os.close(err)
        peer = cls(proc, tmp)
        try:
            await peer._reply()
        except Exception as exc:  # noqa: BLE001 - reported instead of numbers
            await peer.close()
            return f"failed: {exc}"
        return peer

    async def _reply(self) -> dict[str, Any]:
        assert self.proc.stdout is not None
        line = await asyncio.wait_for(self.proc.stdout.readline(), timeout=PEER_TIMEOUT_S)
        if not line:
            tail = (pathlib.Path(self.tmp.name) / "stderr").read_text(errors="replace").strip().splitlines()
            raise RuntimeError(tail[-1] if tail else f"exited with {await self.proc.wait()}")
        return dict(json.loads(line))

    async def batch(self, n: int, count: int) -> list[float]:
        """Seconds of ``count`` calls over the events of size ``n``."""
        assert self.proc.stdin is not None
        self.proc.stdin.write(json.dumps({"size": n, "count": count}).encode() + b"\n")
        await self.proc.stdin.drain()
        return list((await self._reply())["samples"])

    async def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        try:
            await asyncio.wait_for(self.proc.wait(), timeout=30)
        except TimeoutError:
            self.proc.kill()
            await self.proc.wait()
        self.tmp.cleanup()


async def adk_peer(made: dict[int, list[m.Event]], samples: dict[int, int] | None = None) -> dict[int, float] | str:
    """Median seconds of ADK's contents processor over the same events per
    size (``samples`` timed calls each), from the ADK venv, or why it could
    not run."""
    peer = await AdkPeer.start(made)
    if isinstance(peer, str):
        return peer
    try:
        return {n: statistics.median(await peer.batch(n, (samples or ADK_SAMPLES)[n])) for n in made}
    finally:
        await peer.close()


def bench_settings(tmp: pathlib.Path) -> tuple[pathlib.Path, ContextSettings]:
    """Dev certificates under ``tmp`` and the context service's settings:
    mTLS, SQLite in ``tmp``, the sample agent granted ``APP``."""
    certs = tmp / "certs"
    init_dev_certs(certs)
    settings = context_settings(certs, tmp, app_grants={SAMPLE_AGENT_ID: [APP]}, require_client_cert=True,
                                log_level="WARNING")
    return certs, settings


async def main(quick: bool = False) -> dict[str, Any]:
    # --quick: 100 and 1k events only, a fifth of the samples.
    sizes = SIZES[:2] if quick else SIZES
    scale = 5 if quick else 1
    counts = {n: c // scale for n, c in SAMPLES.items()}
    plan = {n: (label, rounds // scale) for n, (label, rounds) in AFTER_APPEND.items() if n in sizes}
    adk_samples = {n: c // scale for n, c in ADK_SAMPLES.items()}
    with tempfile.TemporaryDirectory() as tmp_name:
        certs, settings = bench_settings(pathlib.Path(tmp_name))
        made = await populate(settings.resolved_database_url, sizes)
        peer = await AdkPeer.start(made)
        server = await start_context(settings)
        creds = channel_credentials(certs / "ca.pem", certs / "agent-client.pem", certs / "agent-client.key")
        channel = grpc.aio.secure_channel(f"127.0.0.1:{server.port}", creds, options=[
            ("grpc.ssl_target_name_override", "localhost"), ("grpc.max_receive_message_length", 64 << 20)])
        try:
            stub = context_service_pb2_grpc.ContextServiceStub(channel)
            health = health_pb2_grpc.HealthStub(channel)
            ping = health_pb2.HealthCheckRequest()
            requests = {n: request(n) for n in sizes}
            response_bytes = {}
            for n in sizes:  # warm up: the first call per session fills the history cache
                for _ in range(3):
                    reply = await stub.BuildContext(requests[n])
                response_bytes[n] = reply.ByteSize()
                assert len(reply.request.contents) == n + 1, "every event and the input are sent"
            for _ in range(200):
                await health.Check(ping)
            samples: dict[int, list[float]] = {k: [] for k in (0, *sizes)}
            for _ in range(ROUNDS):
                await timed(lambda: health.Check(ping), counts[0] // ROUNDS, samples[0])
                for n in sizes:
                    await timed(lambda n=n: stub.BuildContext(requests[n]), counts[n] // ROUNDS, samples[n])
            after = await after_append(stub, peer, plan, adk_samples)
        finally:
            await channel.close()
            await server.stop(None)
            if not isinstance(peer, str):
                await peer.close()

    figures: dict[str, Any] = {"quick": quick, "tool_result_bytes": len(json.dumps(
        session_events(3)[2].content.parts[0].function_response.response))}
    floor_p50, floor_p99 = quantiles(samples[0])
    figures["floor_p50_us"], figures["floor_p99_us"] = round(floor_p50, 1), round(floor_p99, 1)
    p50 = {}
    for n in sizes:
        p50[n], p99 = quantiles(samples[n])
        figures[f"p50_us_{n}"], figures[f"p99_us_{n}"] = round(p50[n], 1), round(p99, 1)
        figures[f"response_bytes_{n}"] = response_bytes[n]
    figures["floor_ratio_100"] = round(p50[100] / floor_p50, 3)
    for n, (label, _) in plan.items():
        appended_p50, warm_p50 = statistics.median(after[n][0]), statistics.median(after[n][1])
        figures[f"after_append_p50_ms_{label}"] = round(appended_p50 * 1e3, 3)
        figures[f"after_append_warm_p50_ms_{label}"] = round(warm_p50 * 1e3, 3)
        figures[f"after_append_ratio_{label}"] = round(appended_p50 / warm_p50, 3)
    if 10_000 in sizes:
        figures["growth_1k_to_10k"] = round(p50[10_000] / p50[1_000], 3)
    for n in sizes:
        count = (50 if n == 10_000 else 300) // scale
        figures[f"inprocess_p50_us_{n}"] = round(inprocess(made[n], requests[n], count) * 1e6, 1)
        figures[f"inprocess_regroup_p50_us_{n}"] = round(inprocess(made[n], requests[n], count, warm=False) * 1e6, 1)
    for n, (label, _) in plan.items():
        appended, _, adk = after[n]
        if isinstance(peer, str):
            figures[f"adk_peer_p50_us_{n}"] = figures[f"adk_ratio_{label}"] = peer
            continue
        adk_p50 = statistics.median(x for batch in adk for x in batch)
        figures[f"adk_peer_p50_us_{n}"] = round(adk_p50 * 1e6, 1)
        figures[f"adk_ratio_{label}"] = round(statistics.median(appended) / adk_p50, 3)
        pairs = pair_ratios(appended, adk, BATCHES)
        figures[f"adk_ratio_{label}_per_pair"] = [round(r, 3) for r in pairs]
        figures[f"adk_ratio_{label}_spread"] = cputime.spread(pairs)
    figures["aim_adk_ratio_max"] = AIM_ADK_RATIO
    figures["bar_floor_ratio_100_max"] = 2.0
    figures["bar_growth_1k_to_10k_max"] = 11.0
    figures["bars_met"] = figures["floor_ratio_100"] <= 2.0 and figures.get("growth_1k_to_10k", 0.0) <= 11.0
    return figures


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="100 and 1k events only, a fifth of the samples")
    result = asyncio.run(main(parser.parse_args().quick))
    for key, value in result.items():
        print(f"{key:>28}: {value}", file=sys.stderr)
    print(json.dumps(result))
