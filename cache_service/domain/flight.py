"""One in-flight provider create and the callers waiting for it (see
docs/ARCHITECTURE.md, "Cache service").

Waiters are futures of this process: a coordinator shared by replicas
(domain.ports.SingleFlight) still keeps them here and coordinates only who
runs the create.
"""

from __future__ import annotations

import asyncio
import enum
from dataclasses import dataclass, field

from agentctx_common.errors import AgentCtxError
from cache_service.domain.entry import Entry, EntryKey
from cache_service.domain.keys import PrefixView, Scope
from cache_service.domain.model import AcquireResult, CacheInfo


class Claim(enum.Enum):
    """What ``SingleFlight.begin`` got: the create (WON), or not because
    another replica runs it (TAKEN) or every slot is in use (FULL)."""

    WON = "WON"
    TAKEN = "TAKEN"
    FULL = "FULL"


# The outcome a finished flight leaves for waiters on other replicas: this,
# or the BypassReason value of its failure; "" when it left none (its cache
# was not installed), so they claim the create themselves.
INSTALLED = "INSTALLED"


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
    outcome: str = ""  # set before ``SingleFlight.end``: INSTALLED, a BypassReason value, or ""

    def live_waiters(self) -> int:
        return sum(1 for w in self.waiters if w.live)

    def info(self) -> CacheInfo:
        return CacheInfo(prefix_fingerprint=self.view.fingerprint, prefix_tokens=self.view.tokens,
                         scope_fingerprint=self.scope_fp)
