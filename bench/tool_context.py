"""What a tool token costs: a tool's state read and artifact load with its
token against the same reads with the agent's own credential, in the same
run, and the cost of minting per function call.

A context service runs as a subprocess (``agentctx serve context``, SQLite,
TLS with client certificates, a configured tool token key). The session
declares a tool with ``state_read`` and ``artifact_get``; one model event
calls it and ``MintToolTokens`` gives the token. Then, in interleaved
blocks of ``--calls`` each (so drift hits both sides alike), the agent
reads the session (``GetSession``) and loads a 1 KiB artifact
(``LoadArtifact``) with its certificate's app grant, and the tool reads
the same (``GetToolState``, ``LoadToolArtifact``) with only its token;
medians per call. The token side verifies an HMAC and reads the call's row
(the revocation check) on top of the same read.

Minting: ``ToolContexts.prepare`` (what a Generate does per function call:
claims and an HMAC; the rows ride the reply's own append) timed in
process, per call, and the reply append with 4 calls' rows against the
same append without them on a SQLite store (``mint_append_ratio``).

Figures: ``token_overhead_ratio`` (the larger of the state and artifact
ratios; aim at most 1.1), ``state_read_ratio``, ``artifact_load_ratio``,
the medians in ms, ``mint_overhead_ms`` (per function call; aim under
0.2), ``mint_append_ratio``.

Run: ``.venv/bin/python -m bench.tool_context [--blocks 6 --calls 100]``
from the repository root. The last line is one JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import pathlib
import statistics
import tempfile
import time
from typing import Any

from agentctx.context.v1 import artifacts_pb2 as apb
from agentctx.context.v1 import (
    artifacts_pb2_grpc,
    context_service_pb2_grpc,
    policy_pb2,
    session_pb2,
    tool_context_pb2_grpc,
)
from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import tool_context_pb2 as tpb
from agentctx.type.v1 import content_pb2, event_pb2
from agentctx_common.certs import init_dev_certs
from context_service.domain.config import ToolDeclaration
from context_service.domain.model import Content, Event, FunctionCall, Part, SessionKey
from context_service.domain.tool_tokens import KeySet, SigningKey, ToolTokenCodec
from context_service.tools import ToolContexts
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.servers import secure_channel

AIM_RATIO = 1.1
AIM_MINT_MS = 0.2
KEY = {"id": "bench", "secret": "b" * 48}
TOOL = "reader"


async def _timed(call: Any) -> float:
    started = time.perf_counter()
    await call
    return time.perf_counter() - started


async def _load(stub: Any, request: Any, metadata: Any = None) -> float:
    started = time.perf_counter()
    async for _ in stub(request, metadata=metadata):
        pass
    return time.perf_counter() - started


async def _setup(channel: Any) -> tuple[str, str]:
    agent = context_service_pb2_grpc.ContextServiceStub(channel)
    config = policy_pb2.ContextConfig(tools=[policy_pb2.ToolDeclaration(name=TOOL,
                                                                        capabilities=["state_read", "artifact_get"])])
    session = (await agent.CreateSession(pb.CreateSessionRequest(
        parent="apps/bench/users/u", session_id="s",
        session=session_pb2.Session(config=config, state={"city": "Oslo", "n": 3})))).name
    call = event_pb2.Event(id="m1", author="agent", content=content_pb2.Content(role="model", parts=[
        content_pb2.Part(function_call=content_pb2.FunctionCall(id="c1", name=TOOL))]))
    await agent.AppendEvent(pb.AppendEventRequest(parent=session, event=call))

    async def one() -> Any:
        yield apb.SaveArtifactRequest(header=apb.SaveArtifactHeader(
            parent=session, artifact="notes.txt", part=content_pb2.Part(text="x" * 1024)))

    await artifacts_pb2_grpc.ArtifactServiceStub(channel).SaveArtifact(one())
    minted = await agent.MintToolTokens(tpb.MintToolTokensRequest(session=session, event_id="m1"))
    return session, minted.tokens[0].token


async def _reads(port: int, certs: pathlib.Path, blocks: int, calls: int) -> dict[str, Any]:
    async with secure_channel(port, certs) as agent_channel, \
            secure_channel(port, certs, "context-client") as tool_channel:
        session, token = await _setup(agent_channel)
        agent = context_service_pb2_grpc.ContextServiceStub(agent_channel)
        artifacts = artifacts_pb2_grpc.ArtifactServiceStub(agent_channel)
        tool = tool_context_pb2_grpc.ToolContextServiceStub(tool_channel)
        meta = (("agentctx-tool-token", token),)
        get_session = pb.GetSessionRequest(name=session)
        get_state = tpb.GetToolStateRequest()
        load = apb.LoadArtifactRequest(parent=session, artifact="notes.txt")
        tool_load = tpb.LoadToolArtifactRequest(artifact="notes.txt")
        samples: dict[str, list[float]] = {"agent_state": [], "tool_state": [], "agent_load": [], "tool_load": []}
        for block in range(blocks + 1):  # the first block warms both sides up
            got: dict[str, list[float]] = {k: [] for k in samples}
            for _ in range(calls):
                got["agent_state"].append(await _timed(agent.GetSession(get_session)))
                got["tool_state"].append(await _timed(tool.GetToolState(get_state, metadata=meta)))
                got["agent_load"].append(await _load(artifacts.LoadArtifact, load))
                got["tool_load"].append(await _load(tool.LoadToolArtifact, tool_load, meta))
            if block:
                for k, v in got.items():
                    samples[k] += v
    med = {k: statistics.median(v) * 1000 for k, v in samples.items()}
    state, artifact = med["tool_state"] / med["agent_state"], med["tool_load"] / med["agent_load"]
    return {
        "token_overhead_ratio": round(max(state, artifact), 3),
        "state_read_ratio": round(state, 3), "artifact_load_ratio": round(artifact, 3),
        **{f"{k}_ms": round(v, 3) for k, v in med.items()},
    }


def _model_event(event_id: str, calls: int) -> Event:
    parts = tuple(Part(function_call=FunctionCall(f"{event_id}-c{i}", TOOL, {"q": i})) for i in range(calls))
    return Event(id=event_id, author="agent", content=Content("model", parts))


async def _minting(tmp: pathlib.Path, rounds: int) -> dict[str, Any]:
    from context_service.domain.config import ContextConfig
    from context_service.storage.sql_store import open_store
    from tests.sessions.helpers import migrate

    url = f"sqlite:///{tmp / 'mint.db'}"
    await migrate(url)
    store = await open_store(url)
    tools = ToolContexts(ToolTokenCodec(KeySet([SigningKey("k", b"k" * 32)], "k")), calls=None,  # type: ignore[arg-type]
                         ttl_s=600)
    declared = (ToolDeclaration(TOOL, ("state_read", "artifact_get")),)
    key = SessionKey("bench", "u", "mint")
    try:
        await store.create_session(key, state={}, config=ContextConfig())
        event = _model_event("probe", 4)
        started = time.perf_counter()
        for _ in range(rounds):
            tools.prepare(key, event, declared)
        per_call_ms = (time.perf_counter() - started) / (rounds * 4) * 1000
        plain: list[float] = []
        minted: list[float] = []
        for i in range(60):
            a, b = _model_event(f"p{i}", 4), _model_event(f"m{i}", 4)
            started = time.perf_counter()
            await store.append_event(key, a)
            plain.append(time.perf_counter() - started)
            rows = [row for _, row in tools.prepare(key, b, declared)]
            started = time.perf_counter()
            await store.append_event(key, b, open_calls=rows)
            minted.append(time.perf_counter() - started)
    finally:
        await store.close()
    return {
        "mint_overhead_ms": round(per_call_ms, 4),
        "mint_append_ratio": round(statistics.median(minted) / statistics.median(plain), 3),
        "append_plain_ms": round(statistics.median(plain) * 1000, 3),
        "append_with_4_tokens_ms": round(statistics.median(minted) * 1000, 3),
    }


async def run(blocks: int, calls: int, tmp: pathlib.Path) -> dict[str, Any]:
    certs = tmp / "certs"
    init_dev_certs(certs)
    port = free_port()
    config = write_config(tmp / "agentctx.toml", certs, context_port=port, cache_port=free_port(),
                          data_dir=tmp / "data",
                          context={"require_client_cert": True, "dev_anonymous_apps": [], "tool_token_keys": [KEY]})
    proc = spawn("context", config, tmp / "context.log")
    try:
        await asyncio.to_thread(wait_healthy, port, certs, "agent-client", proc)
        figures = await _reads(port, certs, blocks, calls)
    finally:
        await asyncio.to_thread(stop, proc)
    figures |= await _minting(tmp, 2000)
    return {**figures, "blocks": blocks, "calls_per_block": calls,
            "aim_token_overhead_ratio_max": AIM_RATIO, "aim_mint_overhead_ms_max": AIM_MINT_MS}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--blocks", type=int, default=6)
    parser.add_argument("--calls", type=int, default=100)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-tools-") as tmp:
        result = asyncio.run(run(args.blocks, args.calls, pathlib.Path(tmp)))
    for key, value in result.items():
        print(f"{key:>30}: {value}")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
