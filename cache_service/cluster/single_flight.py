"""Single flight across replicas (the SingleFlight port on Redis).

This process's flights and their waiters stay in a LocalSingleFlight; the
create of a key is claimed with a lock ``f:<scope>:<key>`` (SET NX PX, in
one script with the slot reservation, cluster.scripts.CLAIM) with a short
lease, ``claim_s``, that its holder renews every third of it while the
create runs (cluster.scripts.RENEW): a replica that dies mid-create blocks
the key no longer than ``claim_s`` (its slot toward ``max_entries`` stays
reserved for ``slot_s``, the create's deadline), then one waiter elsewhere claims the
key and runs the create, and the others wait for it. ``end`` releases the
lock, leaves the outcome in ``<lock>:r`` for a short while and publishes it
on ``done:<key>``. Every Redis step runs under the registry's guard
(cluster.guard): an unreachable Redis raises RegistryUnavailable.

``max_entries`` across shards (cluster.names): a claim reads the other
shards' entries and live slots, then reserves its slot in its own shard's
script against that sum. This process runs one such claim at a time, so
only claims of other replicas can fall between the read and the script:
the tier holds at most ``max_entries + replicas - 1`` entries and creates
(a claim that meets a full tier evicts, domain.creates), exactly
``max_entries`` with one replica or when claims do not race.

Waiters on other replicas listen on that channel (one pattern
subscription per process) and re-read the lock at most every
``poll_s``, so a lost message or a dead holder costs them a poll, never
their deadline. Invalidations are published on ``inv`` so every replica
cancels its creates in the scope.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable

from redis.exceptions import RedisError

from cache_service.cluster import scripts
from cache_service.cluster.client import RedisClient, Scripts, Subscriber
from cache_service.cluster.codec import text
from cache_service.cluster.guard import RegistryGuard, outage_cause
from cache_service.cluster.names import Names, Shard
from cache_service.domain.entry import EntryKey
from cache_service.domain.flight import Claim, Flight
from cache_service.domain.ports import RegistryUnavailable
from cache_service.domain.single_flight import LocalSingleFlight

log = logging.getLogger("agentctx.cache.cluster")
_RESULT_TTL_MS = 10_000


class RedisSingleFlight:
    def __init__(self, client: RedisClient, names: Names, *, max_entries: int, claim_s: float,
                 slot_s: float | None = None, poll_s: float = 0.25, guard: RegistryGuard | None = None) -> None:
        self._r = client
        self._n = names
        self._max_entries = max_entries
        self._lock_ms = int(claim_s * 1000)
        self._slot_ms = int((slot_s if slot_s is not None else claim_s) * 1000)
        self._renew_s = claim_s / 3
        self._poll_s = poll_s
        self._g = guard or RegistryGuard(client, timeout_s=5.0, retry_s=1.0)
        self._local = LocalSingleFlight()
        self._tokens: dict[int, str] = {}  # id(flight) -> its lock token
        self._renewals: dict[int, asyncio.Task[None]] = {}  # id(flight) -> its claim's heartbeat
        self._scripts = Scripts(client, {"CLAIM": scripts.CLAIM, "RELEASE": scripts.RELEASE, "RENEW": scripts.RENEW,
                                         "PROBE": scripts.PROBE})
        self._reserving = asyncio.Lock()  # one claim's read-then-reserve at a time in this process
        self._claiming: dict[str, asyncio.Lock] = {}  # lock -> this process's claim in progress
        self._woken: dict[str, asyncio.Event] = {}  # lock -> set when its done message arrives
        self._cancel: Callable[[str], Awaitable[None]] | None = None
        self._listener: asyncio.Task[None] | None = None
        self._subscribed = asyncio.Event()
        self._subscriber = Subscriber(client)

    # --- SingleFlight ---------------------------------------------------------------

    def find(self, scope_fp: str, key: EntryKey) -> Flight | None:
        return self._local.find(scope_fp, key)

    async def begin(self, flight: Flight) -> Claim:
        # One claim per key at a time in this process, so its concurrent
        # callers join the local flight; into the local table only once the
        # lock is ours (a caller that joined a flight whose claim then
        # failed would never be answered).
        lock = self._n.lock(flight.scope_fp, flight.key)
        guard = self._claiming.setdefault(lock, asyncio.Lock())
        try:
            async with guard:
                if self._local.find(flight.scope_fp, flight.key) is not None:
                    return Claim.TAKEN
                token = secrets.token_hex(8)
                async with self._reserving:  # waiting for the turn is not the step's time
                    claim = Claim(text(await self._g.run(lambda: self._reserve(flight.scope_fp, lock, token))))
                if claim is Claim.WON:
                    self._local.add(flight)
                    self._tokens[id(flight)] = token
                    self._renewals[id(flight)] = asyncio.create_task(self._heartbeat(lock, token),
                                                                     name="cache-flight-claim")
                return claim
        finally:
            if not guard.locked():
                self._claiming.pop(lock, None)

    async def _reserve(self, scope_fp: str, lock: str, token: str) -> object:
        shard = self._n.of_scope(scope_fp)
        others = await self._used(exclude=shard)
        return await self._scripts("CLAIM", [lock, shard.flights, shard.all, self._n.result(lock)],
                                   [token, self._lock_ms, self._max_entries, self._slot_ms, others])

    async def _used(self, exclude: Shard | None = None) -> int:
        """Entries plus live reserved slots of every shard but ``exclude``."""
        shards = [s for s in self._n.shards if s != exclude]
        now_ms = int(time.time() * 1000)
        async with self._r.pipeline(transaction=False) as pipe:
            for shard in shards:
                pipe.zcard(shard.all)
                pipe.zcount(shard.flights, f"({now_ms}", "+inf")
            return sum(int(v) for v in await pipe.execute())

    async def end(self, flight: Flight) -> None:
        # Out of the local table before the first suspension (see the port).
        if self._local.find(flight.scope_fp, flight.key) is not flight:
            return
        self._local.discard(flight)
        token = self._tokens.pop(id(flight), None)
        renewal = self._renewals.pop(id(flight), None)
        if renewal is not None:
            renewal.cancel()
        if token is None:
            return
        lock = self._n.lock(flight.scope_fp, flight.key)
        try:
            await self._g.run(lambda: self._scripts(
                "RELEASE", [lock, self._n.of_scope(flight.scope_fp).flights, self._n.result(lock)],
                [token, flight.outcome, _RESULT_TTL_MS, self._n.done_channel(lock)]))
        except RegistryUnavailable:
            pass  # the claim's lease frees the key (the guard logged the outage); waiters elsewhere poll it
        except RedisError as exc:
            log.warning("flight release failed", extra={"error_type": type(exc).__name__})

    async def _heartbeat(self, lock: str, token: str) -> None:
        """Renews the claim while this process runs its create."""
        while True:
            await asyncio.sleep(self._renew_s)
            try:
                held = await self._g.run(lambda: self._scripts("RENEW", [lock], [token, self._lock_ms]))
            except RegistryUnavailable:
                continue  # tried again next beat; the create goes on
            except RedisError as exc:
                log.warning("flight claim renewal failed", extra={"error_type": type(exc).__name__})
                continue
            if not held:
                return  # lost (it outlived its lease): the key is another's now

    async def wait_remote(self, scope_fp: str, key: EntryKey, timeout_s: float) -> str | None:
        await self._listen()
        lock = self._n.lock(scope_fp, key)
        loop = asyncio.get_running_loop()
        until = loop.time() + timeout_s
        while True:
            woken = self._woken.setdefault(lock, asyncio.Event())
            result, held = await self._g.run(lambda: self._probe(lock))
            if result is not None:
                return text(result)
            if not held:
                return ""
            left = until - loop.time()
            if left <= 0:
                return None
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(woken.wait(), min(left, self._poll_s))

    async def _probe(self, lock: str) -> list[object]:
        return list(await self._scripts("PROBE", [self._n.result(lock), lock]))

    async def invalidated(self, scope_fp: str) -> None:
        await self._g.run(lambda: self._r.publish(self._n.invalidations, scope_fp))

    def on_invalidated(self, cancel: Callable[[str], Awaitable[None]]) -> None:
        self._cancel = cancel

    def in_scope(self, scope_fp: str) -> list[Flight]:
        return self._local.in_scope(scope_fp)

    def count(self) -> int:
        return self._local.count()

    # --- messages -------------------------------------------------------------------

    async def start(self) -> None:
        await self._listen()

    async def _listen(self) -> None:
        if self._listener is None:
            self._listener = asyncio.create_task(self._run_listener(), name="cache-flight-listener")
        with contextlib.suppress(TimeoutError):
            # Polling covers the time until the subscription is in place.
            await asyncio.wait_for(self._subscribed.wait(), self._poll_s)

    async def _run_listener(self) -> None:
        done_prefix = self._n.done_channel(self._n.prefix)
        while True:
            pubsub = await self._subscriber.pubsub()
            try:
                await pubsub.psubscribe(f"{done_prefix}*")
                await pubsub.subscribe(self._n.invalidations)
                self._subscribed.set()
                async for message in pubsub.listen():
                    await self._on_message(message, done_prefix)
            except (RedisError, OSError) as exc:
                if outage_cause(exc) is not None and not self._subscriber.spread:
                    self._g.failed(exc)  # logged once per outage
                else:
                    log.warning("flight listener reconnecting", extra={"error_type": type(exc).__name__})
                await asyncio.sleep(max(self._poll_s, self._g.retry_s if self._g.down else 0.0))
            finally:
                with contextlib.suppress(RedisError):
                    await pubsub.aclose()

    async def _on_message(self, message: dict[str, object], done_prefix: str) -> None:
        kind, channel = message.get("type"), message.get("channel")
        if not isinstance(channel, bytes):
            return
        name = channel.decode()
        if kind == "pmessage" and name.startswith(done_prefix):
            woken = self._woken.pop(self._n.prefix + name[len(done_prefix):], None)
            if woken is not None:
                woken.set()
        elif kind == "message" and name == self._n.invalidations and self._cancel is not None:
            data = message.get("data")
            if isinstance(data, bytes):
                await self._cancel(data.decode())

    async def close(self) -> None:
        for renewal in self._renewals.values():
            renewal.cancel()
        self._renewals.clear()
        if self._listener is not None:
            self._listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._listener
            self._listener = None
        await self._subscriber.close()
