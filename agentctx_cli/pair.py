"""The service pair ``agentctx up`` and ``agentctx demo`` run on embedded
defaults (SQLite, the local simulated provider, dev certificates): the home
directory, the port check that comes before anything is written, one
process per service with only its own environment, and the pid file that
tells a second ``up`` who holds the ports.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import pathlib
import signal
import socket
import subprocess
import sys
import time
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field

from agentctx_common.certs import SAMPLE_AGENT_ID, init_dev_certs
from agentctx_common.errors import ConfigError
from agentctx_common.files import (
    PRIVATE_DIR,
    PRIVATE_FILE,
    create_file,
    make_dir,
    open_append,
    replace_file,
    tighten_file,
)

CONFIG_HEADER = """\
# Written once by `agentctx up` (or `agentctx init`), mode 0600; later starts
# read it and keep your edits (delete the file to get a fresh one).
# Command-line ports and environment variables (AGENTCTX_CONTEXT_*,
# AGENTCTX_CACHE_*) override these values, and `agentctx up` says which ones
# it overrode.

"""
CONTEXT_TABLE = """\
[context]
host = "127.0.0.1"
port = {context_port}
tls_cert = "{certs}/context-server.pem"
tls_key = "{certs}/context-server.key"
tls_client_ca = "{certs}/ca.pem"
data_dir = "{home}/data"
cache_target = "127.0.0.1:{cache_port}"
cache_ca = "{certs}/ca.pem"
cache_cert = "{certs}/context-client.pem"
cache_key = "{certs}/context-client.key"
require_client_cert = true
app_grants = {{ "{sample_agent}" = ["*"] }}
"""
CACHE_TABLE = """\
[cache]
host = "127.0.0.1"
port = {cache_port}
tls_cert = "{certs}/cache-server.pem"
tls_key = "{certs}/cache-server.key"
tls_client_ca = "{certs}/ca.pem"
data_dir = "{home}/data"
"""
CONFIG_TEMPLATE = CONFIG_HEADER + CONTEXT_TABLE + "\n" + CACHE_TABLE

PID_FILE = "pair.json"
CONFIG_FILE = "agentctx.toml"
# `up --cluster`'s own, so neither tramples agentctx.toml: one file per
# service, so the context replicas never hold the cache tier's Redis URL or keys.
CLUSTER_CONTEXT_FILE = "agentctx-cluster-context.toml"
CLUSTER_CACHE_FILE = "agentctx-cluster-cache.toml"
LEGACY_CLUSTER_FILE = "agentctx-cluster.toml"  # both tables in one file, before; its keys are carried over
DEFAULT_CONTEXT_PORT = 50051
DEFAULT_CACHE_PORT = 50052

# What every service process may inherit: where programs, home, locale,
# time zone and temporary files are, and how this Python finds its code.
# Nothing else: no credentials meant for the other service, no tokens.
BASE_ENV = ("PATH", "HOME", "USER", "LOGNAME", "LANG", "LANGUAGE", "TZ", "TMPDIR", "TERM",
            "PYTHONPATH", "VIRTUAL_ENV", "SYSTEMROOT")
# Per service: its settings prefix, plus what its code reads under other names
# (the cache service's provider clients: the Gemini key fallback, proxies and
# CA bundles for the provider's HTTPS endpoint, Google's ADC for Vertex AI).
SERVICE_ENV: dict[str, tuple[tuple[str, ...], tuple[str, ...]]] = {
    "context": (("AGENTCTX_CONTEXT_",), ()),
    "cache": (("AGENTCTX_CACHE_", "GOOGLE_"), ("GEMINI_API_KEY", "ANTHROPIC_API_KEY", "OPENAI_API_KEY",
                                              "HTTPS_PROXY", "https_proxy", "NO_PROXY",
                                              "no_proxy", "SSL_CERT_FILE", "SSL_CERT_DIR")),
}


# The cache tier's secrets: the context side must never hold them, in a
# file or in its environment.
CACHE_TIER_SECRETS = ("redis_url", "redis_encryption_key", "lease_keys")


def cache_secrets_in(config: pathlib.Path) -> list[str]:
    """The cache-tier secrets ``config``'s [cache] table sets (names only):
    a file the context service is given must set none. An unreadable or
    malformed file sets none here; loading it reports it."""
    try:
        table = tomllib.loads(config.read_text()).get("cache", {})
    except (OSError, tomllib.TOMLDecodeError):
        return []
    return [key for key in CACHE_TIER_SECRETS if isinstance(table, dict) and key in table]


def route_key_names(config: pathlib.Path | None, environ: Mapping[str, str]) -> frozenset[str]:
    """The variables the cache service's routes name as keys (``api_key_env``),
    from the config file's ``[cache] routes`` and ``AGENTCTX_CACHE_ROUTES``.
    Unreadable or malformed tables name none: the service reports them."""
    tables: list[object] = []
    if config is not None:
        try:
            tables.append(tomllib.loads(config.read_text()).get("cache", {}).get("routes"))
        except (OSError, tomllib.TOMLDecodeError, AttributeError):
            pass
    try:
        tables.append(json.loads(environ.get("AGENTCTX_CACHE_ROUTES", "null")))
    except ValueError:
        pass
    return frozenset(route["api_key_env"] for table in tables if isinstance(table, list)
                     for route in table if isinstance(route, dict) and isinstance(route.get("api_key_env"), str))


def service_env(service: str, environ: Mapping[str, str], config: pathlib.Path | None = None) -> dict[str, str]:
    """The environment ``service`` runs with: the safe base, the locale
    (``LC_*``) and that service's own variables only (for the cache service,
    every provider key, its routes' ``api_key_env`` included)."""
    prefixes, names = SERVICE_ENV[service]
    if service == "cache":
        names = (*names, *route_key_names(config, environ))
    env = {k: v for k, v in environ.items()
           if k in BASE_ENV or k in names or k.startswith("LC_") or k.startswith(prefixes)}
    env["PYTHONUNBUFFERED"] = "1"
    return env


@dataclass
class Pair:
    """The processes of one running pair (appended as they start, so the
    owner can stop whatever did start)."""

    home: pathlib.Path
    context_port: int
    cache_port: int
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)
    started: list[Started] = field(default_factory=list)

    @property
    def certs(self) -> pathlib.Path:
        return self.home / "certs"

    @property
    def logs(self) -> pathlib.Path:
        return self.home / "logs"


def _port_taken(port: int) -> bool:
    # A bind without SO_REUSEPORT fails even when the listener set that option
    # (gRPC servers do, so a second server could share the port unnoticed).
    # SO_REUSEADDR only lets it past connections of a stopped pair that are
    # still in TIME_WAIT; on Linux it never binds beside a listener.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind(("127.0.0.1", port))
        except OSError as exc:
            if exc.errno in (errno.EADDRINUSE, errno.EACCES):
                return True
            raise
    return False


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _holder(home: pathlib.Path, port: int) -> str:
    """Who holds ``port``: the pair of a pid file under ``home`` that is
    still running, else the listening process as /proc shows it, else
    "another program"."""
    try:
        record = json.loads((home / PID_FILE).read_text())
        pid = int(record["pid"])
        ports = (int(record["context_port"]), int(record["cache_port"]))
        if port in ports and _alive(pid):
            return f"`agentctx {record.get('command', 'up')}` (pid {pid}, home {home})"
    except (OSError, ValueError, KeyError, TypeError):
        pass
    listener = _listener(port)
    return listener or "another program"


def _listener(port: int) -> str | None:
    """``pid N (command line)`` of a process of ours listening on ``port``
    (Linux; None elsewhere or when it is not ours to see)."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with contextlib.suppress(OSError):
            for line in pathlib.Path(table).read_text().splitlines()[1:]:
                fields = line.split()
                if fields[3] == "0A" and int(fields[1].rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                    inodes.add(f"socket:[{fields[9]}]")
    if not inodes:
        return None
    for proc in pathlib.Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            if any(os.readlink(fd) in inodes for fd in (proc / "fd").iterdir()):
                words = (proc / "cmdline").read_bytes().split(b"\0")
                command = " ".join(w.decode(errors="replace") for w in words if w)
                return f"pid {proc.name} ({command[:200]})"
    return None


def check_ports_free(home: pathlib.Path, context_port: int, cache_port: int) -> None:
    """ConfigError naming each taken port and its holder; runs before any
    file is written, so a refused start changes nothing."""
    taken = [(name, port) for name, port in (("context", context_port), ("cache", cache_port)) if _port_taken(port)]
    if not taken:
        return
    what = ", ".join(f"{port} ({name})" for name, port in taken)
    holders = dict.fromkeys(_holder(home, port) for _, port in taken)
    raise ConfigError(f"port{'s' if len(taken) > 1 else ''} {what} already in use by {' and '.join(holders)}; "
                      "stop it or choose other ports (--context-port, --cache-port)")


def _file_tables(config: pathlib.Path) -> dict[str, dict[str, object]]:
    """The [context] and [cache] tables of an existing config file
    (ConfigError naming the file when it is not valid TOML)."""
    try:
        document = tomllib.loads(config.read_text())
    except OSError as exc:
        raise ConfigError(f"cannot read {config}: {exc.strerror}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {config} is not valid TOML: {exc} (fix it, or delete it to get a fresh one)"
                          ) from None
    return {name: table for name in ("context", "cache")
            if isinstance(table := document.get(name, {}), dict)}


def resolve_ports(home: pathlib.Path, context_port: int | None, cache_port: int | None) -> tuple[int, int]:
    """The ports a start from ``home`` uses: the flag when given, else the
    service's environment variable, else the existing config file's, else
    the default."""
    config = home / CONFIG_FILE
    tables = _file_tables(config) if config.exists() else {}

    def pick(flag: int | None, service: str, default: int) -> int:
        if flag is not None:
            return flag
        variable = os.environ.get(f"AGENTCTX_{service.upper()}_PORT", "")
        if variable.isdigit():
            return int(variable)
        value = tables.get(service, {}).get("port")
        return value if isinstance(value, int) else default

    return pick(context_port, "context", DEFAULT_CONTEXT_PORT), pick(cache_port, "cache", DEFAULT_CACHE_PORT)


@dataclass
class HomeConfig:
    """The config file a start runs with: ``written`` the first time;
    otherwise ``overrides`` (variables for the services, so that the
    command's ports win over the file's) and ``notes`` (one line per
    setting of the file that a flag or the environment overrides)."""

    path: pathlib.Path
    written: bool
    overrides: dict[str, str] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)


def _overrides(config: pathlib.Path, context_port: int, cache_port: int) -> HomeConfig:
    tables = _file_tables(config)
    wanted = {("context", "port"): context_port, ("cache", "port"): cache_port,
              ("context", "cache_target"): f"127.0.0.1:{cache_port}"}
    home = HomeConfig(config, written=False)
    for (service, key), value in wanted.items():
        variable = f"AGENTCTX_{service.upper()}_{key.upper()}"
        if key in tables.get(service, {}) and tables[service][key] != value and variable not in os.environ:
            home.overrides[variable] = str(value)
            home.notes.append(f"[{service}] {key} = {tables[service][key]!r} overridden by the command: {value!r}")
    for service, table in tables.items():
        for key in table:
            variable = f"AGENTCTX_{service.upper()}_{key.upper()}"
            if variable in os.environ:  # names only: a value may be a secret
                home.notes.append(f"[{service}] {key} overridden by the environment variable {variable}")
    return home


def make_home(home: pathlib.Path) -> None:
    """The home's directories and dev certificates, whatever the umask: the
    home 0700 when made here (an existing one is the user's), data/ and logs/
    0700 and certs/ 0755 with the keys 0600 (made so when an older version
    left them wider)."""
    make_dir(home, PRIVATE_DIR, tighten=False)
    make_dir(home / "certs", 0o755)  # never writable by others: they could replace the CA
    init_dev_certs(home / "certs")
    for sub in ("data", "logs"):
        make_dir(home / sub, PRIVATE_DIR)


def prepare_home(home: pathlib.Path, context_port: int, cache_port: int) -> HomeConfig:
    """Creates certificates if missing and writes the config file the first
    time only; a later start reads it as it is (with the user's edits) and
    reports which of its settings the ports given or the environment
    override."""
    certs = home / "certs"
    config = home / CONFIG_FILE
    try:
        make_home(home)
        if config.exists():
            tighten_file(config)  # written 0644 by an older version
            return _overrides(config, context_port, cache_port)
        text = CONFIG_TEMPLATE.format(
            home=home, certs=certs, context_port=context_port, cache_port=cache_port, sample_agent=SAMPLE_AGENT_ID,
        )
        try:
            create_file(config, text.encode())
        except FileExistsError:  # another start wrote it meanwhile: the first one wins
            return _overrides(config, context_port, cache_port)
    except OSError as exc:
        raise ConfigError(f"cannot write {exc.filename or home}: {exc.strerror}") from None
    return HomeConfig(config, written=True)


@dataclass
class Started:
    """A service process, its log and where in the log this start began."""

    proc: subprocess.Popen[bytes]
    log: pathlib.Path
    offset: int


def _spawn(service: str, config: pathlib.Path, log_path: pathlib.Path,
           overrides: Mapping[str, str] | None = None) -> Started:
    # The child writes to its own copy of the descriptor; ours can close at once.
    # Its own session: Ctrl-C at the terminal reaches `up` alone, which stops
    # the services with SIGTERM (a SIGINT to the whole group would also hit
    # the services' worker processes, which then die mid-call and leak their
    # semaphores).
    with os.fdopen(open_append(log_path, PRIVATE_FILE), "ab") as log:  # logs are 0600, older ones made so
        offset = log.seek(0, os.SEEK_END)
        proc = subprocess.Popen(
            [sys.executable, "-m", "agentctx_cli.main", "serve", service, "--config", str(config)],
            stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            env={**service_env(service, os.environ, config), **(overrides or {})},
        )
    return Started(proc, log_path, offset)


def failure_cause(log: pathlib.Path, offset: int) -> str:
    """The line of ``log`` (from ``offset``) that says why a service
    stopped: its one-line ``agentctx: …`` error, else the last line it wrote."""
    try:
        with open(log, "rb") as f:
            f.seek(offset)
            lines = [line.strip() for line in f.read().decode(errors="replace").splitlines() if line.strip()]
    except OSError:
        return ""
    for line in reversed(lines):
        if line.startswith("agentctx:"):
            return line.removeprefix("agentctx:").strip()
    return lines[-1][:500] if lines else ""


def service_exited(name: str, port: int, started: Started) -> ConfigError:
    """The error for ``name`` (a service or replica) that exited: its status, the cause from its
    log and the log's path."""
    cause = failure_cause(started.log, started.offset)
    why = f": {cause}" if cause else ""
    return ConfigError(f"{name} on port {port} exited with status {started.proc.returncode}{why} "
                       f"(log: {started.log})")


def wait_healthy(port: int, certs: pathlib.Path, client: str, deadline: float, started: Started,
                 name: str) -> None:
    import grpc
    from grpc_health.v1 import health_pb2, health_pb2_grpc

    from agentctx_common.tls import channel_credentials

    creds = channel_credentials(certs / "ca.pem", certs / f"{client}.pem", certs / f"{client}.key")
    while time.monotonic() < deadline:
        if started.proc.poll() is not None:
            raise service_exited(name, port, started)
        with grpc.secure_channel(f"127.0.0.1:{port}", creds) as channel:
            try:
                reply = health_pb2_grpc.HealthStub(channel).Check(health_pb2.HealthCheckRequest(), timeout=1)
                if reply.status == health_pb2.HealthCheckResponse.SERVING:
                    return
            except grpc.RpcError:
                pass
        time.sleep(0.2)
    raise ConfigError(f"{name} on port {port} did not become healthy in time (log: {started.log})")


def start_pair(pair: Pair, command: str) -> HomeConfig:
    """Starts both services from ``pair.home`` and waits until both are
    healthy (ConfigError otherwise). Refuses, changing nothing, when either
    port is taken. Returns the config file it ran with."""
    check_ports_free(pair.home, pair.context_port, pair.cache_port)
    home = prepare_home(pair.home, pair.context_port, pair.cache_port)
    if secrets := cache_secrets_in(home.path):
        raise ConfigError(
            f"{home.path} sets [cache] {', '.join(secrets)}, and the context service runs with this file too: it "
            "must never hold the cache tier's secrets. Set them in the environment instead "
            f"({', '.join('AGENTCTX_CACHE_' + s.upper() for s in secrets)}: `agentctx up` passes those to the "
            "cache service alone), or run each service with a file of its own (`agentctx serve … --config`)")
    cache = _spawn("cache", home.path, pair.logs / "cache.log", home.overrides)
    pair.procs.append(cache.proc)
    context = _spawn("context", home.path, pair.logs / "context.log", home.overrides)
    pair.procs.append(context.proc)
    pair.started = [cache, context]
    replace_file(pair.home / PID_FILE, (json.dumps({
        "pid": os.getpid(), "command": command, "context_port": pair.context_port, "cache_port": pair.cache_port,
        "service_pids": [p.pid for p in pair.procs],
    }) + "\n").encode())
    deadline = time.monotonic() + 60
    wait_healthy(pair.cache_port, pair.certs, "context-client", deadline, cache, "the cache service")
    wait_healthy(pair.context_port, pair.certs, "agent-client", deadline, context, "the context service")
    return home


def stop_pair(pair: Pair) -> None:
    for proc in pair.procs:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
    for proc in pair.procs:
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
    if pair.procs:
        with contextlib.suppress(OSError):
            (pair.home / PID_FILE).unlink()


# --- `agentctx up --cluster`: two context replicas on PostgreSQL, three
# cache replicas on Redis sharing one simulated provider -------------------

CLUSTER_CONTEXT_REPLICAS = 2
CLUSTER_CACHE_REPLICAS = 3
CLUSTER_PORT_STEP = 100  # replica i listens on the base port + i * 100

CLUSTER_HEADER = """\
# Written by `agentctx up --cluster` at every start (mode 0600), for the {service}
# replicas only: {what}.

"""
CLUSTER_CONTEXT_TEMPLATE = CLUSTER_HEADER.format(
    service="context", what="the cache tier's Redis URL and keys are in agentctx-cluster-cache.toml, never here",
) + CONTEXT_TABLE.replace(
    'cache_target = "127.0.0.1:{cache_port}"', 'cache_target = "{cache_target}"'
).replace('data_dir = "{home}/data"\ncache_target', 'database_url = "{database_url}"\ndata_dir = "{home}/data"\ncache_target') + """\
tool_token_keys = [{{ id = "{tool_key_id}", secret = "{tool_secret}" }}]
active_tool_token_key_id = "{tool_key_id}"
"""
CLUSTER_CACHE_TEMPLATE = CLUSTER_HEADER.format(
    service="cache", what="it holds the Redis URL, the encryption key and the lease signing secret",
) + CACHE_TABLE + """\
redis_url = "{redis_url}"
redis_key_prefix = "{redis_prefix}"
redis_encryption_key = "{encryption_key}"
lease_keys = [{{ id = "{lease_key_id}", secret = "{lease_secret}" }}]
active_lease_key_id = "{lease_key_id}"
local_shared_state = true
local_state_prefix = "{sim_prefix}"
"""


@dataclass
class Cluster(Pair):
    """The processes of ``up --cluster``: context replicas first, then cache
    replicas (``procs`` in start order)."""

    redis_url: str = "redis://127.0.0.1:6379/0"
    postgres_url: str = "postgresql://postgres@127.0.0.1:5432/postgres"
    database: str = "agentctx_cluster"

    def ports(self, base: int, n: int) -> list[int]:
        return [base + i * CLUSTER_PORT_STEP for i in range(n)]

    @property
    def context_ports(self) -> list[int]:
        return self.ports(self.context_port, CLUSTER_CONTEXT_REPLICAS)

    @property
    def cache_ports(self) -> list[int]:
        return self.ports(self.cache_port, CLUSTER_CACHE_REPLICAS)

    @property
    def database_url(self) -> str:
        base = self.postgres_url.rsplit("/", 1)[0].replace("postgresql://", "postgresql+asyncpg://", 1)
        return f"{base}/{self.database}"

    @property
    def context_target(self) -> str:
        return "ipv4:" + ",".join(f"127.0.0.1:{p}" for p in self.context_ports)


def _cluster_secrets(*configs: pathlib.Path) -> dict[str, str]:
    """The encryption key and lease key of the home's cluster: generated the
    first time, then read back from the first of ``configs`` that has them
    (the cache replicas' file, else the one file of an older version) so
    that restarts keep the leases and the stored names readable."""
    import base64
    import secrets

    for config in configs:
        with contextlib.suppress(OSError, tomllib.TOMLDecodeError, KeyError, IndexError, TypeError):
            cache = tomllib.loads(config.read_text())["cache"]
            key = cache["lease_keys"][0]
            return {"encryption_key": str(cache["redis_encryption_key"]), "lease_key_id": str(key["id"]),
                    "lease_secret": str(key["secret"])}
    return {"encryption_key": base64.b64encode(secrets.token_bytes(32)).decode(),
            "lease_key_id": "up1", "lease_secret": secrets.token_hex(32)}


def _tool_key(config: pathlib.Path) -> dict[str, str]:
    """The context replicas' shared tool token key (tokens minted on one
    verify on the other): generated once, then read back so restarts keep
    outstanding tokens valid."""
    import secrets

    with contextlib.suppress(OSError, tomllib.TOMLDecodeError, KeyError, IndexError, TypeError):
        key = tomllib.loads(config.read_text())["context"]["tool_token_keys"][0]
        return {"tool_key_id": str(key["id"]), "tool_secret": str(key["secret"])}
    return {"tool_key_id": "up1", "tool_secret": secrets.token_hex(32)}


@dataclass(frozen=True)
class ClusterConfigs:
    """The two files of ``up --cluster``: each service's replicas get only their own."""

    context: pathlib.Path
    cache: pathlib.Path


def prepare_cluster_home(cluster: Cluster) -> ClusterConfigs:
    import hashlib

    home, certs = cluster.home, cluster.certs
    configs = ClusterConfigs(home / CLUSTER_CONTEXT_FILE, home / CLUSTER_CACHE_FILE)
    legacy = home / LEGACY_CLUSTER_FILE
    tag = hashlib.sha256(str(home).encode()).hexdigest()[:8]  # one key space per home on a shared Redis
    values = dict(
        home=home, certs=certs, context_port=cluster.context_port, cache_port=cluster.cache_port,
        sample_agent=SAMPLE_AGENT_ID, database_url=cluster.database_url, redis_url=cluster.redis_url,
        cache_target="ipv4:" + ",".join(f"127.0.0.1:{p}" for p in cluster.cache_ports),
        redis_prefix=f"agentctx-up-{tag}:", sim_prefix=f"agentctx-up-{tag}-sim:",
    )
    try:
        make_home(home)
        keys = _cluster_secrets(configs.cache, legacy)
        replace_file(configs.context, CLUSTER_CONTEXT_TEMPLATE.format(**values, **_tool_key(configs.context)).encode())
        replace_file(configs.cache, CLUSTER_CACHE_TEMPLATE.format(**values, **keys).encode())
        with contextlib.suppress(FileNotFoundError):
            legacy.unlink()  # its keys are in the cache file now; a copy readable by the context side is not kept
    except OSError as exc:
        raise ConfigError(f"cannot write {exc.filename or home}: {exc.strerror}") from None
    return configs


async def _ensure_database(cluster: Cluster, context_config: pathlib.Path) -> None:
    import asyncpg

    from agentctx_cli.commands.db import _upgrade
    from context_service.settings import ContextSettings

    try:
        conn = await asyncpg.connect(cluster.postgres_url, timeout=10)
    except (OSError, asyncpg.PostgresError) as exc:
        raise ConfigError(f"cannot reach PostgreSQL for the cluster: {type(exc).__name__}") from None
    try:
        if not await conn.fetchval("SELECT 1 FROM pg_database WHERE datname = $1", cluster.database):
            await conn.execute(f'CREATE DATABASE "{cluster.database}"')
    finally:
        await conn.close()
    await _upgrade(ContextSettings.load(context_config, dev_plaintext=True, host="127.0.0.1", dev_anonymous_apps=[]))


def start_cluster(cluster: Cluster, command: str) -> None:
    """Creates and migrates the database if needed, then starts the cache
    replicas and the context replicas, each on its own port and data
    directory, and waits until all are healthy."""
    import asyncio

    ports = [*cluster.context_ports, *cluster.cache_ports]
    taken = [p for p in ports if _port_taken(p)]
    if taken:
        raise ConfigError(f"ports {', '.join(map(str, taken))} already in use; choose other base ports "
                          "(--context-port, --cache-port; replicas use base + 100 * i)")
    configs = prepare_cluster_home(cluster)
    asyncio.run(_ensure_database(cluster, configs.context))
    waits = []
    for i, port in enumerate(cluster.cache_ports):
        data = cluster.home / "data" / f"cache-{i}"
        make_dir(data, PRIVATE_DIR)
        started = _spawn("cache", configs.cache, cluster.logs / f"cache-{i}.log",
                         {"AGENTCTX_CACHE_PORT": str(port), "AGENTCTX_CACHE_DATA_DIR": str(data)})
        cluster.procs.append(started.proc)
        waits.append((port, "context-client", started, f"cache replica {i}"))
    for i, port in enumerate(cluster.context_ports):
        started = _spawn("context", configs.context, cluster.logs / f"context-{i}.log", {"AGENTCTX_CONTEXT_PORT": str(port)})
        cluster.procs.append(started.proc)
        waits.append((port, "agent-client", started, f"context replica {i}"))
    replace_file(cluster.home / PID_FILE, (json.dumps({
        "pid": os.getpid(), "command": command, "context_port": cluster.context_port,
        "cache_port": cluster.cache_port, "service_pids": [p.pid for p in cluster.procs],
    }) + "\n").encode())
    deadline = time.monotonic() + 90
    for port, client, started, name in waits:
        wait_healthy(port, cluster.certs, client, deadline, started, name)
