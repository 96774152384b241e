"""Builders and checks shared by the cache tests."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from cache_service.domain.cleanup import Janitor
from cache_service.domain.clock import ManualClock
from cache_service.domain.keys import Prefix, PrefixView, Scope
from cache_service.domain.model import AcquireResult, ModelCall
from cache_service.domain.registry import Registry
from cache_service.journal import FileJournal
from cache_service.providers.local import LocalProvider

MODEL = "local-sim-1"
SYSTEM = {"role": "", "parts": [{"text": "You are a careful assistant. " * 12}]}
TOOLS = ({"functionDeclarations": [{"name": "lookup", "description": "Looks a thing up.",
                                    "parameters": {"type": "object", "properties": {"q": {"type": "string"}}}}]},)


def scope(app: str = "app", user: str = "user-1", model: str = MODEL, policy: dict[str, Any] | None = None,
          provider: str = "local") -> Scope:
    return Scope(provider, app, user, model, policy or {})


def turn(i: int, words: int = 30) -> list[dict[str, Any]]:
    """One exchange: a user message and the model's answer."""
    return [
        {"role": "user", "parts": [{"text": f"question {i}: " + "word " * words}]},
        {"role": "model", "parts": [{"text": f"answer {i}: " + "reply " * words}]},
    ]


def history(turns: int, words: int = 30) -> tuple[dict[str, Any], ...]:
    return tuple(c for i in range(turns) for c in turn(i, words))


def prefix(turns: int, *, words: int = 30, model: str = MODEL, system: dict[str, Any] | None = SYSTEM,
           tools: tuple[dict[str, Any], ...] = TOOLS) -> Prefix:
    return Prefix(model, system, tools, None, history(turns, words))


def view(turns: int, **kw: Any) -> PrefixView:
    return PrefixView.of(prefix(turns, **kw))


def call_over(p: Prefix, question: str = "and now?") -> ModelCall:
    """The request whose leading part is ``p``, plus a new user input."""
    return ModelCall(model=p.model, contents=(*p.history, {"role": "user", "parts": [{"text": question}]}),
                     system_instruction=p.system_instruction, tools=p.tools, tool_config=p.tool_config)


@dataclass
class Harness:
    registry: Registry
    provider: Any  # LocalProvider, or GeminiProvider against the fake server
    journal: FileJournal
    janitor: Janitor
    clock: ManualClock
    # The provider's live cache names (revealed); the simulator's by default.
    live: Callable[[], set[str]] | None = field(default=None)

    def live_names(self) -> set[str]:
        if self.live is not None:
            return self.live()
        provider: LocalProvider = self.provider
        return {n.reveal() for n in provider.live_names()}

    async def acquire(self, p: Prefix | PrefixView, s: Scope | None = None, *, ttl: float | None = None,
                      deadline: float | None = None) -> AcquireResult:
        v = p if isinstance(p, PrefixView) else PrefixView.of(p)
        return await self.registry.acquire(s or scope(), v, ttl, deadline)

    async def settle(self) -> None:
        """Lets in-flight creates and queued deletes finish."""
        await self.registry.idle()
        await self.janitor.drain()
        await asyncio.sleep(0)

    async def assert_in_step(self) -> None:
        """The provider holds exactly the caches the registry knows, and the
        journal names exactly those as pending (intents of creates whose
        outcome is unknown stay until the next start looks them up)."""
        await self.settle()
        held = {e.handle.name.reveal() for e in (await self.registry.entries())}
        assert self.live_names() == held
        assert {r.name.reveal() for r in self.journal.pending() if r.name is not None} == held

    async def close(self) -> None:
        await self.registry.close()
        await self.janitor.close(1.0)
        await self.journal.close()


async def until_waiting(registry: Registry, s: Scope, n: int) -> None:
    """Until ``n`` callers wait on creates of ``s`` (a store on Redis takes
    a few round trips to get them there)."""
    for _ in range(2000):
        if (await registry.status(s)).waiter_count >= n:
            return
        await asyncio.sleep(0.005)
    raise AssertionError(f"{n} waiters never arrived")
