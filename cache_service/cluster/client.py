"""The registry's Redis client from ``redis_url`` (see docs/ARCHITECTURE.md,
"Cache service", and the README's operations section):

- ``redis://`` / ``rediss://`` / ``unix://``: one Redis (redis-py's pooled
  client);
- ``redis+cluster://[user:password@]host:port[,host:port...]``: a Redis
  Cluster through redis-py's asyncio ``RedisCluster``, from those startup
  nodes (it learns the rest, and follows slots that move and replicas
  promoted by a failover);
- ``redis+sentinel://[user:password@]host:port[,host:port...]/service[/db]``:
  a Sentinel-managed Redis through redis-py's asyncio ``Sentinel``: every
  new connection asks the sentinels for the current master, so after a
  failover the client follows the new master (connections to the old one
  fail, cluster.guard empties the pool).

Scripts run by SHA with the source as the fallback (``Scripts``), which
holds on every node of a cluster and after a failover to a node that never
loaded them.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote

import redis.asyncio as aioredis
from redis.asyncio.client import PubSub
from redis.asyncio.cluster import ClusterNode, RedisCluster
from redis.asyncio.retry import Retry
from redis.asyncio.sentinel import Sentinel
from redis.backoff import ExponentialBackoff, NoBackoff
from redis.exceptions import ConnectionError, NoScriptError

RedisClient = aioredis.Redis | RedisCluster

CLUSTER_SCHEME = "redis+cluster"
SENTINEL_SCHEME = "redis+sentinel"
_CONNECT_TIMEOUT_S = 2.0
_SOCKET_TIMEOUT_S = 5.0


@dataclass(frozen=True)
class Endpoints:
    """A ``redis+cluster://`` or ``redis+sentinel://`` URL taken apart."""

    scheme: str
    nodes: tuple[tuple[str, int], ...]
    username: str | None
    password: str | None
    path: tuple[str, ...]  # sentinel: (service name[, db])


def parse(url: str) -> Endpoints:
    scheme, sep, rest = url.partition("://")
    if not sep or scheme not in (CLUSTER_SCHEME, SENTINEL_SCHEME):
        raise ValueError(f"not a {CLUSTER_SCHEME}:// or {SENTINEL_SCHEME}:// URL")
    rest = rest.split("?", 1)[0]
    netloc, _, path = rest.partition("/")
    username = password = None
    if "@" in netloc:
        userinfo, netloc = netloc.rsplit("@", 1)
        user, has_password, secret = userinfo.partition(":")
        username = unquote(user) or None
        password = unquote(secret) if has_password else None
    nodes = []
    for part in netloc.split(","):
        host, colon, port = part.strip().rpartition(":")
        if not colon or not host or not port.isdigit():
            raise ValueError("every node of the URL must be host:port")
        nodes.append((host.strip("[]"), int(port)))
    parts = tuple(p for p in path.split("/") if p)
    if scheme == SENTINEL_SCHEME and not parts:
        raise ValueError(f"{SENTINEL_SCHEME}:// needs the service name: {SENTINEL_SCHEME}://host:port/service")
    return Endpoints(scheme, tuple(nodes), username, password, parts)


def redis_client(url: str, max_connections: int = 64) -> RedisClient:
    """A client that waits for a connection when its pool is busy (a burst
    of acquires queues instead of failing), checks a pooled connection idle
    for a second before use, and sends a command that meets a dropped
    connection once more on a new one, so connections from before a Redis
    restart or failover are not reused (cluster.guard also empties the pool
    when Redis fails)."""
    scheme = url.partition("://")[0]
    if scheme == CLUSTER_SCHEME:
        ends = parse(url)
        # max_connections is per node; the cluster client re-reads the slots
        # after a MOVED or a connection error (a failover) and retries.
        return BoundedRedisCluster(
            max_connections, startup_nodes=[ClusterNode(h, p) for h, p in ends.nodes], username=ends.username,
            password=ends.password, max_connections=4 * max_connections, socket_connect_timeout=_CONNECT_TIMEOUT_S,
            socket_timeout=_SOCKET_TIMEOUT_S, health_check_interval=1,
            retry=Retry(ExponentialBackoff(cap=0.2, base=0.02), 3))
    if scheme == SENTINEL_SCHEME:
        ends = parse(url)
        sentinel = Sentinel(list(ends.nodes), socket_timeout=_CONNECT_TIMEOUT_S,
                            sentinel_kwargs={"socket_timeout": _CONNECT_TIMEOUT_S,
                                             "socket_connect_timeout": _CONNECT_TIMEOUT_S})
        db = int(ends.path[1]) if len(ends.path) > 1 else 0
        return sentinel.master_for(ends.path[0], username=ends.username, password=ends.password, db=db,
                                   socket_connect_timeout=_CONNECT_TIMEOUT_S, socket_timeout=_SOCKET_TIMEOUT_S,
                                   health_check_interval=1, retry=Retry(NoBackoff(), 1),
                                   retry_on_error=[ConnectionError])
    pool = aioredis.BlockingConnectionPool.from_url(url, max_connections=max_connections, timeout=5.0,
                                                    socket_connect_timeout=_CONNECT_TIMEOUT_S,
                                                    socket_timeout=_SOCKET_TIMEOUT_S, health_check_interval=1,
                                                    retry=Retry(NoBackoff(), 1), retry_on_error=[ConnectionError])
    return aioredis.Redis(connection_pool=pool)


class BoundedRedisCluster(RedisCluster):
    """redis-py's cluster client fails a command when a node's connections
    are all busy (MaxConnectionsError, a ConnectionError the guard would
    take for an outage): this one makes commands beyond ``in_flight`` wait
    for their turn, as the single client's blocking pool does (each node
    allows four times as many, for pipelines on top). And commands that
    find the slot map to be (re)read wait for one of them to read it: the
    client's own reading, started by many at once, closes connections
    others are opening."""

    def __init__(self, in_flight: int, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._turns = asyncio.Semaphore(in_flight)
        self._mapping = asyncio.Lock()

    async def execute_command(self, *args: Any, **kwargs: Any) -> Any:
        if self._initialize:
            async with self._mapping:
                if self._initialize:
                    await self.initialize()
        async with self._turns:
            return await super().execute_command(*args, **kwargs)


class Subscriber:
    """Connections for pub/sub. A cluster broadcasts every PUBLISH to all its
    nodes, so a subscriber listens on any one of them through a plain client
    of its own (the next node after each failure), apart from the cluster
    client's command connections."""

    def __init__(self, client: RedisClient) -> None:
        self._r = client
        self._turn = 0
        self._own: aioredis.Redis | None = None

    @property
    def spread(self) -> bool:
        """A cluster: the node listened on failing is not the registry failing."""
        return isinstance(self._r, RedisCluster)

    async def pubsub(self) -> PubSub:
        if not isinstance(self._r, RedisCluster):
            return self._r.pubsub()
        await self.close()
        nodes = self._r.get_nodes() or list(self._r.nodes_manager.startup_nodes.values())
        node = nodes[self._turn % len(nodes)]
        self._turn += 1
        self._own = aioredis.Redis(host=node.host, port=int(node.port), **{
            k: v for k, v in node.connection_kwargs.items()
            if k in ("username", "password", "socket_connect_timeout", "health_check_interval")})
        return self._own.pubsub()

    async def close(self) -> None:
        if self._own is not None:
            with contextlib.suppress(Exception):
                await self._own.aclose()
            self._own = None


async def drop_idle_connections(client: RedisClient) -> None:
    """Closes the idle pooled connections (one Redis or Sentinel's master).
    A cluster client replaces a failed node's connections itself; it re-reads
    its slot map here, as the map a failover leaves can be stale in a way it
    does not notice (cluster.guard: a fault raised inside the client)."""
    if isinstance(client, RedisCluster):
        with contextlib.suppress(Exception):
            await client.nodes_manager.initialize()
        return
    with contextlib.suppress(Exception):
        # Idle ones only: a connection in use belongs to a step that fails or succeeds on its own.
        await client.connection_pool.disconnect(inuse_connections=False)


class Scripts:
    """Lua scripts run by SHA, by source where the node does not hold it."""

    def __init__(self, client: RedisClient, sources: Mapping[str, str]) -> None:
        self._r = client
        self._scripts = {name: (hashlib.sha1(src.encode()).hexdigest(), src) for name, src in sources.items()}

    async def __call__(self, name: str, keys: Sequence[str], args: Sequence[Any] = ()) -> Any:
        sha, source = self._scripts[name]
        try:
            return await self._r.evalsha(sha, len(keys), *keys, *args)
        except NoScriptError:
            return await self._r.eval(source, len(keys), *keys, *args)
