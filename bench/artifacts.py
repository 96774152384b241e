"""Artifact save and load over gRPC against writing and reading the same
bytes to a local file, in the same run, and the context service's peak RSS
while many clients stream large artifacts at once.

A context service runs as a subprocess (``agentctx serve context``, SQLite
with synchronous=FULL, TLS) on 127.0.0.1. Per size (1 MiB and 32 MiB) each
round saves fresh random bytes through the Python client (streamed in
1 MiB messages) and loads them back, then writes the same bytes to a file
(write + fsync, as the database commits) and reads them back; medians of
the rounds. Then ``--clients`` clients save a 32 MiB artifact each at once
(streamed from 1 MiB pieces, never whole on the client) and load them
back at once, and the service's peak RSS (VmHWM) is read.

Figures: ``artifact_save_ratio_32m`` and ``artifact_load_ratio_32m``
(gRPC over file; aim at most 1.5), the same at 1 MiB, the medians in
seconds, the service's CPU seconds per save and load
(``artifact_save_cpu_s_32m``, from /proc, its threads and children) and
the bench client's (``client_save_cpu_s_32m``), ``peak_rss_mib`` (aim
under 512) and ``rss_before_mib``.

The gRPC floor (``bench.grpc_floor``): the same 32 MiB in 1 MiB messages
over the same kind of TLS channel to a bare server with the service's
transport options and nothing behind it, medians of the same rounds:
``grpc_floor_save_s_32m``, ``grpc_floor_load_s_32m``, their ratios over
the file (``grpc_floor_save_ratio_32m``: what no service can beat) and the
artifact's over the floor (``artifact_save_over_floor_32m``: the service's
own share). With
``--stores database,s3`` (the default) the same run repeats with the bytes
in an S3-compatible object store (a local moto server on 127.0.0.1,
started here; metadata in the same SQLite): the same figures prefixed
``s3_`` (``s3_artifact_save_ratio_32m``, ...), against the same file
baseline. moto is an in-process Python server, far slower than S3 or
MinIO: its figures bound the service's overhead from above.

Run: ``.venv/bin/python -m bench.artifacts [--rounds 5 --clients 16
--stores database,s3]`` from the repository root. The last line is one
JSON object.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import pathlib
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import AsyncIterator
from typing import Any

from agentctx_client import ContextClient
from agentctx_common.certs import init_dev_certs
from bench import grpc_floor
from bench.cputime import cpu_s
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.s3 import moto_server, new_bucket, settings_for
from tests.support.servers import secure_channel

MIB = 1024 * 1024
AIM_RATIO = 1.5
AIM_PEAK_RSS_MIB = 512
PARENT = "apps/bench/users/u/sessions/s"


def _rss_mib(pid: int, field: str) -> float:
    for line in pathlib.Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return round(int(line.split()[1]) / 1024, 1)
    return float("nan")


def _file_round(path: pathlib.Path, data: bytes) -> tuple[float, float]:
    started = time.perf_counter()
    with open(path, "wb") as out:
        out.write(data)
        out.flush()
        os.fsync(out.fileno())
    wrote = time.perf_counter() - started
    started = time.perf_counter()
    assert path.read_bytes() == data
    read = time.perf_counter() - started
    path.unlink()
    return wrote, read


async def _artifact_round(client: ContextClient, name: str, data: bytes, pid: int) -> tuple[float, ...]:
    """Wall seconds of a save and a load, then the service's CPU seconds
    and this process's for each."""
    cpu, own, started = cpu_s(pid), time.process_time(), time.perf_counter()
    await client.save_artifact(PARENT, name, data)
    saved = time.perf_counter() - started
    cpu_saved, own_saved = cpu_s(pid) - cpu, time.process_time() - own
    cpu, own, started = cpu_s(pid), time.process_time(), time.perf_counter()
    loaded = await client.load_artifact(PARENT, name)
    load = time.perf_counter() - started
    cpu_load, own_load = cpu_s(pid) - cpu, time.process_time() - own
    assert loaded.data == data
    return saved, load, cpu_saved, cpu_load, own_saved, own_load


async def _stream(seed: int, size: int) -> AsyncIterator[bytes]:
    block = os.urandom(MIB)
    for i in range(size // MIB):
        yield seed.to_bytes(4, "big") + i.to_bytes(4, "big") + block[8:]


async def _concurrent(client: ContextClient, clients: int, size: int) -> dict[str, float]:
    started = time.perf_counter()
    await asyncio.gather(*(client.save_artifact(PARENT, f"many-{i}", _stream(i, size)) for i in range(clients)))
    saved = time.perf_counter() - started

    async def drain(i: int) -> int:
        _, chunks = await client.open_artifact(PARENT, f"many-{i}")
        return sum([len(chunk) async for chunk in chunks])

    started = time.perf_counter()
    sizes = await asyncio.gather(*(drain(i) for i in range(clients)))
    assert sizes == [size] * clients
    return {"concurrent_save_s": round(saved, 3), "concurrent_load_s": round(time.perf_counter() - started, 3)}


def _start_floor(port: int, certs: pathlib.Path, log: pathlib.Path) -> subprocess.Popen[bytes]:
    """The floor server (bench.grpc_floor), once it serves."""
    with open(log, "ab") as out:
        proc = subprocess.Popen([sys.executable, "-m", "bench.grpc_floor", str(port), str(certs), str(4 * MIB)],
                                stdout=subprocess.PIPE, stderr=out)
    assert proc.stdout is not None
    if proc.stdout.readline() != b"serving\n":
        proc.kill()
        raise RuntimeError(f"the gRPC floor server did not start: {log}")
    return proc


async def run_floor(rounds: int, tmp: pathlib.Path, certs: pathlib.Path, size: int) -> dict[str, Any]:
    """The gRPC floor's medians and ratios over the file (its own file
    rounds, the same size)."""
    port = free_port()
    proc = await asyncio.to_thread(_start_floor, port, certs, tmp / "floor.log")
    try:
        channel = secure_channel(port, certs)
        try:
            await grpc_floor.save(channel, MIB)  # warm-up: the TLS handshake
            ours: list[tuple[float, float]] = []
            file: list[tuple[float, float]] = []
            for _ in range(rounds):
                ours.append((await grpc_floor.save(channel, size), await grpc_floor.load(channel, size)))
                file.append(await asyncio.to_thread(_file_round, tmp / "floor.bin", os.urandom(size)))
        finally:
            await channel.close()
    finally:
        proc.terminate()
        await asyncio.to_thread(proc.wait)
    save, load = (statistics.median(x[k] for x in ours) for k in (0, 1))
    fsave, fload = (statistics.median(x[k] for x in file) for k in (0, 1))
    return {"grpc_floor_save_s_32m": round(save, 4), "grpc_floor_load_s_32m": round(load, 4),
            "grpc_floor_save_ratio_32m": round(save / fsave, 3), "grpc_floor_load_ratio_32m": round(load / fload, 3)}


async def run(rounds: int, clients: int, tmp: pathlib.Path, stores: list[str]) -> dict[str, Any]:
    certs = tmp / "certs"
    init_dev_certs(certs)
    floor = await run_floor(rounds, tmp, certs, 32 * MIB)
    figures: dict[str, Any] = {**floor}
    for store in stores:
        if store == "s3":
            with moto_server(tmp / "moto.log") as endpoint:
                # The default part size (tests use the smallest).
                s3 = {**settings_for(endpoint, new_bucket(endpoint)), "artifact_s3_part_bytes": 8 * MIB}
                measured = await run_store(rounds, clients, tmp / store, certs, s3)
            prefix = "s3_"
        else:
            measured = await run_store(rounds, clients, tmp / store, certs, {})
            prefix = ""
        for op in ("save", "load"):
            measured[f"artifact_{op}_over_floor_32m"] = round(
                measured[f"artifact_{op}_s_32m"] / floor[f"grpc_floor_{op}_s_32m"], 3)
        figures |= {f"{prefix}{k}": v for k, v in measured.items()}
    return {
        **figures, "rounds": rounds, "clients": clients, "stores": ",".join(stores),
        "aim_ratio_max": AIM_RATIO, "aim_peak_rss_mib_max": AIM_PEAK_RSS_MIB,
    }


async def run_store(rounds: int, clients: int, tmp: pathlib.Path, certs: pathlib.Path,
                    context: dict[str, Any]) -> dict[str, Any]:
    """The figures of one context service, artifact bytes where ``context`` says."""
    os.makedirs(tmp)
    port = free_port()
    config = write_config(tmp / "agentctx.toml", certs, context_port=port, cache_port=free_port(),
                          data_dir=tmp / "data", context={"max_message_bytes": 4 * MIB, **context})
    proc = spawn("context", config, tmp / "context.log")
    figures: dict[str, Any] = {}
    try:
        await asyncio.to_thread(wait_healthy, port, certs, "agent-client", proc)
        async with ContextClient(secure_channel(port, certs), timeout=600) as client:
            await _artifact_round(client, "warm-up", os.urandom(MIB), proc.pid)
            for label, size in (("1m", MIB), ("32m", 32 * MIB)):
                ours: list[tuple[float, ...]] = []
                file: list[tuple[float, float]] = []
                for i in range(rounds):
                    data = os.urandom(size)
                    ours.append(await _artifact_round(client, f"{label}-{i}", data, proc.pid))
                    file.append(await asyncio.to_thread(_file_round, tmp / "baseline.bin", data))
                save, load, cpu_save, cpu_load, own_save, own_load = (
                    statistics.median(x[k] for x in ours) for k in range(6))
                fsave, fload = (statistics.median(x[k] for x in file) for k in (0, 1))
                figures |= {
                    f"artifact_save_ratio_{label}": round(save / fsave, 3),
                    f"artifact_load_ratio_{label}": round(load / fload, 3),
                    f"artifact_save_s_{label}": round(save, 4), f"artifact_load_s_{label}": round(load, 4),
                    f"artifact_save_cpu_s_{label}": round(cpu_save, 4),
                    f"artifact_load_cpu_s_{label}": round(cpu_load, 4),
                    f"client_save_cpu_s_{label}": round(own_save, 4),
                    f"client_load_cpu_s_{label}": round(own_load, 4),
                    f"file_write_s_{label}": round(fsave, 4), f"file_read_s_{label}": round(fload, 4),
                }
            figures["rss_before_mib"] = _rss_mib(proc.pid, "VmHWM")
            figures |= await _concurrent(client, clients, 32 * MIB)
            figures["peak_rss_mib"] = _rss_mib(proc.pid, "VmHWM")
    finally:
        await asyncio.to_thread(stop, proc)
    return figures


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--clients", type=int, default=16)
    parser.add_argument("--stores", default="database,s3", help="where artifact bytes live: database, s3, or both")
    args = parser.parse_args()
    stores = [s for s in args.stores.split(",") if s]
    if not stores or set(stores) - {"database", "s3"}:
        parser.error("--stores: database, s3, or database,s3")
    with tempfile.TemporaryDirectory(prefix="agentctx-bench-artifacts-") as tmp:
        result = asyncio.run(run(args.rounds, args.clients, pathlib.Path(tmp), stores))
    for key, value in result.items():
        print(f"{key:>28}: {value}")
    print(json.dumps(result, sort_keys=True))


if __name__ == "__main__":
    main()
