"""Both services as real processes (``agentctx serve``) for end-to-end
tests: one TOML config, fixed ports, logs in files, and a cache service
that can be killed and started again where the context service expects
it."""

from __future__ import annotations

import pathlib
import signal
import subprocess
import sys
from collections.abc import Mapping
from typing import Any

import grpc

from agentctx.context.v1 import context_service_pb2_grpc
from tests.support.processes import free_port, spawn, stop, wait_healthy, write_config
from tests.support.servers import secure_channel


class ServiceProcesses:
    def __init__(
        self,
        certs: pathlib.Path,
        tmp: pathlib.Path,
        *,
        context: Mapping[str, Any] | None = None,
        cache: Mapping[str, Any] | None = None,
    ) -> None:
        self.certs = certs
        self.tmp = tmp
        self.context_port, self.cache_port = free_port(), free_port()
        self.config = write_config(
            tmp / "agentctx.toml", certs, context_port=self.context_port, cache_port=self.cache_port,
            data_dir=tmp / "data", context=context, cache=cache,
        )
        self.context_log = tmp / "context.log"
        self.cache_log = tmp / "cache.log"
        self.context: subprocess.Popen | None = None
        self.cache: subprocess.Popen | None = None

    def start(self) -> ServiceProcesses:
        self.start_cache()
        self.context = spawn("context", self.config, self.context_log)
        wait_healthy(self.context_port, self.certs, "agent-client", self.context)
        return self

    def start_cache(self) -> None:
        self.cache = spawn("cache", self.config, self.cache_log)
        wait_healthy(self.cache_port, self.certs, "context-client", self.cache)

    def kill_cache(self) -> None:
        """kill -9: no drain, no goodbye."""
        assert self.cache is not None
        stop(self.cache, signal.SIGKILL)
        self.cache = None

    def stop(self) -> None:
        """SIGTERM both (graceful: spans and logs are flushed)."""
        for proc in (self.context, self.cache):
            if proc is not None:
                stop(proc)
        self.context = self.cache = None

    def channel(self) -> grpc.aio.Channel:
        return secure_channel(self.context_port, self.certs)

    def stub(self, channel: grpc.aio.Channel) -> context_service_pb2_grpc.ContextServiceStub:
        return context_service_pb2_grpc.ContextServiceStub(channel)


def upgrade_database(url: str) -> None:
    """``agentctx db upgrade`` for a PostgreSQL database (never automatic)."""
    subprocess.run(
        [sys.executable, "-m", "agentctx_cli.main", "db", "upgrade", "--database-url", url],
        check=True, capture_output=True, timeout=60,
    )
