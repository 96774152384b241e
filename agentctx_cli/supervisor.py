"""Several server processes on one port (``agentctx serve ... --workers N``).

A Python gRPC server runs on one core. The supervisor reserves the port
with SO_REUSEPORT (a bound, never-listening socket it holds until the end,
which also resolves port 0), then starts N copies of the same ``serve``
command bound to that port with ``grpc.so_reuseport`` on, as gRPC's
multiprocessing example does: the kernel spreads new connections over the
workers. It forwards SIGTERM and SIGINT to every worker and exits when they
have exited; when one worker exits on its own, the others are stopped too
(and the supervisor's exit code is that worker's), so an orchestrator sees
one service that failed, never a half-sized one that looks healthy.

Everything shared between workers lives in the database (sessions, events,
compaction jobs with their leases, group commit per process under the
database's write lock) or is a per-process cache that reads what it lacks
from there (the history cache re-reads by sequence), exactly as between
replicas.
"""

from __future__ import annotations

import logging
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from types import FrameType

from agentctx_common.errors import ConfigError

log = logging.getLogger("agentctx.supervisor")

# How long the workers get after a forwarded signal before they are killed
# (their own graceful shutdown drains RPCs for shutdown_grace_s first).
STOP_TIMEOUT_S = 60.0
# How long the first worker may take to start serving before the others start anyway.
STARTUP_TIMEOUT_S = 60.0


def reserve_port(host: str, port: int) -> socket.socket:
    """A bound socket with SO_REUSEPORT on ``host:port`` (0: any free port)."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise ConfigError(f"cannot listen on {host}:{port}: the address is in use or not available") from None
    return sock


def supervise(worker_argv: Sequence[str], workers: int, host: str, port: int) -> int:
    """Runs ``workers`` copies of ``worker_argv`` (extended with the
    reserved port) until they exit; returns the exit code."""
    with reserve_port(host, port) as reserved:
        bound = reserved.getsockname()[1]
        argv = [sys.executable, "-m", "agentctx_cli.main", *worker_argv, "--port", str(bound), "--reuse-port"]
        children: list[subprocess.Popen[bytes]] = []
        stopping = False

        def forward(signum: int, _frame: FrameType | None) -> None:
            nonlocal stopping
            stopping = True
            for child in children:
                if child.poll() is None:
                    child.send_signal(signum)

        previous = {sig: signal.signal(sig, forward) for sig in (signal.SIGTERM, signal.SIGINT)}
        try:
            for i in range(workers):
                if stopping:
                    break
                children.append(subprocess.Popen(argv))
                if i == 0 and workers > 1:
                    # The first worker creates and checks the database (a new
                    # SQLite file, its schema) alone; the others start once it serves.
                    _wait_serving(host, bound, children[0], lambda: stopping)
            if stopping:  # a signal came while they were starting
                for child in children:
                    child.send_signal(signal.SIGTERM)
            log.info("workers started", extra={"workers": workers, "port": bound,
                                               "pids": ",".join(str(c.pid) for c in children)})
            if not children:
                return 0
            code = _wait_first(children)
            if not stopping:
                log.error("a worker exited; stopping the others", extra={"exit_code": code})
                stopping = True
                for child in children:
                    if child.poll() is None:
                        child.send_signal(signal.SIGTERM)
            deadline = time.monotonic() + STOP_TIMEOUT_S
            for child in children:
                try:
                    child.wait(timeout=max(0.0, deadline - time.monotonic()))
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
            codes = [code, *(c.returncode for c in children)]
            failed = next((c for c in codes if c), 0)
            return 128 - failed if failed < 0 else failed  # killed by a signal: 128 + its number
        finally:
            for sig, handler in previous.items():
                signal.signal(sig, handler)


def _wait_serving(host: str, port: int, child: subprocess.Popen[bytes], stopping: Callable[[], bool]) -> None:
    """Until something listens on ``port`` (the reserved socket never
    does), ``child`` exits, a signal arrives, or STARTUP_TIMEOUT_S passes."""
    target = "127.0.0.1" if host in ("0.0.0.0", "") else ("::1" if host == "::" else host)
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while child.poll() is None and not stopping() and time.monotonic() < deadline:
        try:
            socket.create_connection((target, port), timeout=0.5).close()
            return
        except OSError:
            time.sleep(0.05)


def _wait_first(children: Sequence[subprocess.Popen[bytes]]) -> int:
    """The exit code of the first worker to exit."""
    while True:
        for child in children:
            code = child.poll()
            if code is not None:
                return code
        time.sleep(0.2)
