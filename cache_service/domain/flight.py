"""One in-flight provider create and the callers waiting for it (see
docs/ARCHITECTURE.md, "Cache service").

Waiters are futures of this process: a coordinator shared by replicas
(domain.ports.SingleFlight) still keeps them here and coordinates only who
runs the create.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from agentctx_common.errors import AgentCtxError
from cache_service.domain.entry import Entry, EntryKey
from cache_service.domain.keys import PrefixView, Scope
from cache_service.domain.model import AcquireResult, CacheInfo


@dataclass
class Waiter:
    deadline: float  # monotonic
    future: asyncio.Future[AcquireResult | AgentCtxError]
    gone: bool = False  # its caller stopped waiting (deadline or cancellation)

    @property
    def live(self) -> bool:
        return not self.gone and not self.future.done()


@dataclass
class Flight:
    key: EntryKey
    scope: Scope
    scope_fp: str
    view: PrefixView
    ttl_s: float
    replaces: Entry | None  # the cache a grow replaces
    waiters: list[Waiter] = field(default_factory=list)
    cancelled: bool = False  # its scope was invalidated meanwhile
    background: bool = False  # installed even when nobody waits for it

    def live_waiters(self) -> int:
        return sum(1 for w in self.waiters if w.live)

    def info(self) -> CacheInfo:
        return CacheInfo(prefix_fingerprint=self.view.fingerprint, prefix_tokens=self.view.tokens,
                         scope_fingerprint=self.scope_fp)
