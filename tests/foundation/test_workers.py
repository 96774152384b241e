"""``agentctx serve context --workers 2``: two server processes on one port
(SO_REUSEPORT), both serving (connections land on each, and both write the
same SQLite database correctly), and one SIGTERM to the supervisor stops
both. The cache service refuses more than one worker without Redis."""

from __future__ import annotations

import concurrent.futures
import os
import pathlib
import signal
import subprocess
import sys
import time

import grpc
import pytest

from agentctx.context.v1 import context_service_pb2 as pb
from agentctx.context.v1 import context_service_pb2_grpc
from agentctx.type.v1 import event_pb2
from agentctx_common.tls import channel_credentials
from tests.support.processes import free_port, wait_healthy, write_config

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")

CONNECTIONS = 24
EVENTS = 5


def children_of(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = pathlib.Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
                found.append(int(entry))
    return sorted(found)


ESTABLISHED, LISTEN = "01", "0A"


def sockets_on(pid: int, port: int, state: str) -> int:
    """TCP sockets of ``pid`` on local ``port`` in ``state``."""
    inodes = set()
    try:
        fds = os.listdir(f"/proc/{pid}/fd")
    except OSError:  # the process has exited
        return 0
    for fd in fds:
        try:
            target = os.readlink(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        if not os.path.exists(table):
            continue
        for line in pathlib.Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            local_port = int(fields[1].rsplit(":", 1)[1], 16)
            if local_port == port and fields[3] == state and fields[9] in inodes:
                count += 1
    return count


def session_work(port: int, certs: pathlib.Path, i: int) -> tuple[str, grpc.Channel]:
    """One connection of its own: a session and a few appends on it."""
    creds = channel_credentials(certs / "ca.pem", certs / "agent-client.pem", certs / "agent-client.key")
    channel = grpc.secure_channel(
        f"127.0.0.1:{port}", creds,
        options=[("grpc.ssl_target_name_override", "localhost"), ("grpc.use_local_subchannel_pool", 1)],
    )
    stub = context_service_pb2_grpc.ContextServiceStub(channel)
    name = stub.CreateSession(pb.CreateSessionRequest(parent="apps/app/users/u"), timeout=30).name
    for n in range(EVENTS):
        event = event_pb2.Event(id=f"c{i}-e{n}", author="user")
        event.content.role = "user"
        event.content.parts.add().text = f"connection {i} event {n}"
        stub.AppendEvent(pb.AppendEventRequest(parent=name, event=event), timeout=30)
    return name, channel


def test_two_workers_serve_one_port_and_stop_together(tmp_path: pathlib.Path, certs_dir: pathlib.Path) -> None:
    port = free_port()
    config = write_config(tmp_path / "agentctx.toml", certs_dir, context_port=port, cache_port=free_port(),
                          data_dir=tmp_path / "data")
    with open(tmp_path / "serve.log", "ab") as log:
        supervisor = subprocess.Popen(
            [sys.executable, "-m", "agentctx_cli.main", "serve", "context", "--config", str(config), "--workers", "2"],
            stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    channels: list[grpc.Channel] = []
    try:
        wait_healthy(port, certs_dir, "agent-client", supervisor)
        deadline = time.monotonic() + 60
        # The workers are the children listening on the port (a helper process
        # of the interpreter may come and go beside them). Both listening
        # before the load, or the kernel could only pick one.
        workers: list[int] = []
        while len(workers) < 2 and time.monotonic() < deadline:
            workers = [w for w in children_of(supervisor.pid) if sockets_on(w, port, LISTEN)]
            if len(workers) < 2:
                time.sleep(0.1)
        assert len(workers) == 2, (tmp_path / "serve.log").read_text()
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            done = list(pool.map(lambda i: session_work(port, certs_dir, i), range(CONNECTIONS)))
        channels = [c for _, c in done]
        # Every connection is still open: each worker holds some of them.
        per_worker = {w: sockets_on(w, port, ESTABLISHED) for w in workers}
        assert all(count > 0 for count in per_worker.values()), per_worker
        assert sum(per_worker.values()) >= CONNECTIONS
        # Writes from both processes into one SQLite file: all there, gapless.
        stub = context_service_pb2_grpc.ContextServiceStub(channels[0])
        for name, _ in done:
            events = stub.ListEvents(pb.ListEventsRequest(parent=name), timeout=30).events
            assert [e.sequence for e in events] == list(range(1, EVENTS + 1))
    finally:
        for channel in channels:
            channel.close()
        supervisor.send_signal(signal.SIGTERM)
        code = supervisor.wait(timeout=60)
    assert code == 0, (tmp_path / "serve.log").read_text()
    for worker in workers:
        assert not pathlib.Path(f"/proc/{worker}").exists() or "(Z)" in pathlib.Path(f"/proc/{worker}/stat").read_text()


def test_cache_workers_need_redis(tmp_path: pathlib.Path, certs_dir: pathlib.Path) -> None:
    config = write_config(tmp_path / "agentctx.toml", certs_dir, context_port=free_port(), cache_port=free_port(),
                          data_dir=tmp_path / "data")
    result = subprocess.run(
        [sys.executable, "-m", "agentctx_cli.main", "serve", "cache", "--config", str(config), "--workers", "2"],
        capture_output=True, text=True, timeout=60,
    )
    assert result.returncode == 2
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "redis_url" in lines[0], result.stderr
