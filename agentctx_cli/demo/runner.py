"""Runs the scripted agent against a running context service, one Generate
call per turn, and records what each call cost and how the cache served
it. A client of the services: it uses only the generated stubs."""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field

from agentctx.context.v1 import policy_pb2
from agentctx_cli.demo import script
from agentctx_cli.demo.pricing import GEMINI, Shape, TurnCost, turn_cost
from agentctx_client import (
    CacheBypassReason,
    CacheMetadata,
    CacheState,
    CompactionTrigger,
    ContextClient,
    Event,
    FunctionCall,
    Usage,
)

APP = "demo"
USER = "newcomer"
CACHE_TTL_S = 300
# Small enough that the history outgrows it during a 30-call demo: threshold
# compaction keeps the newest ~2,500 tokens verbatim and summarizes the rest.
CONTEXT_WINDOW = 9_000
RESERVE_TOKENS = 2_000
KEEP_RECENT_TOKENS = 2_500


@dataclass(frozen=True)
class TurnRecord:
    number: int
    input_kind: str  # "user" or "tool"
    input_label: str
    prompt_tokens: int
    cached_tokens: int
    output_tokens: int
    cache_state: str  # created, hit, grown, bypass, off
    bypass_reason: str
    compactions: tuple[str, ...]  # triggers of compactions committed in this turn
    background_compaction: bool
    secrets_pruned: int
    cost: TurnCost


@dataclass
class DemoResult:
    session: str
    session_id: str
    turns: list[TurnRecord] = field(default_factory=list)
    elapsed_s: float = 0.0
    shape: Shape = GEMINI

    @property
    def prompt_tokens(self) -> int:
        return sum(t.prompt_tokens for t in self.turns)

    @property
    def cached_tokens(self) -> int:
        return sum(t.cached_tokens for t in self.turns)

    @property
    def cached_share(self) -> float:
        return self.cached_tokens / self.prompt_tokens if self.prompt_tokens else 0.0

    @property
    def cost(self) -> float:
        return sum(t.cost.with_cache for t in self.turns)

    @property
    def uncached_cost(self) -> float:
        return sum(t.cost.without_cache for t in self.turns)

    def count(self, state: str) -> int:
        return sum(1 for t in self.turns if t.cache_state == state)

    @property
    def compactions(self) -> list[str]:
        return [trigger for t in self.turns for trigger in t.compactions]


def session_config(shape: Shape = GEMINI) -> policy_pb2.ContextConfig:
    config = policy_pb2.ContextConfig(model=shape.model)
    config.cache.enabled = True
    config.cache.ttl.FromSeconds(CACHE_TTL_S)
    c = config.compaction
    c.enabled = True
    c.context_window = CONTEXT_WINDOW
    c.reserve_tokens = RESERVE_TOKENS
    c.keep_recent_tokens = KEEP_RECENT_TOKENS
    return config


def _state(meta: CacheMetadata | None) -> tuple[str, str]:
    if meta is None:
        return "off", ""
    state = CacheState.Name(meta.state).removeprefix("CACHE_STATE_").lower()
    reason = CacheBypassReason.Name(meta.bypass_reason).removeprefix("CACHE_BYPASS_REASON_").lower()
    if state == "unspecified" or reason == "disabled":
        return "off", ""
    return state, reason.replace("_", " ") if state == "bypass" else ""


def _trigger(event: Event) -> str:
    trigger = event.compaction_trigger or CompactionTrigger.COMPACTION_TRIGGER_UNSPECIFIED
    return CompactionTrigger.Name(trigger).removeprefix("COMPACTION_TRIGGER_").lower()


async def run_demo(
    client: ContextClient,
    *,
    turns: int = 30,
    on_turn: Callable[[TurnRecord], None] | None = None,
    timeout_s: float = 30.0,
    pace_s: float = 0.0,
    shape: Shape = GEMINI,
) -> DemoResult:
    """Creates a fresh session and runs ``turns`` model calls in it,
    ``pace_s`` apart (so a person can follow along), on the simulator in
    ``shape``'s cache semantics and prices."""
    session_id = "demo-" + time.strftime("%Y%m%d-%H%M%S") + "-" + uuid.uuid4().hex[:6]
    created = await client.create_session(APP, USER, session_id=session_id, config=session_config(shape), timeout=timeout_s)
    result = DemoResult(created.name, session_id, shape=shape)
    system, tools = script.system_instruction(), script.tools()
    tasks = iter(script.TASKS * (turns // len(script.TASKS) + 1))
    pending: tuple[FunctionCall, ...] = ()
    started = time.monotonic()
    for n in range(1, turns + 1):
        event_id = f"{session_id}-{n}"
        if pending:
            event = script.tool_results_event(event_id, pending, n)
            kind, label = "tool", ",".join(c.name for c in pending) + f" {event.to_proto().ByteSize() / 1024:.1f}KB"
        else:
            text = next(tasks)
            event, kind, label = script.user_event(event_id, text), "user", text
        turn = await client.generate(created.name, event, system_instruction=system, tools=tools, timeout=timeout_s)
        meta = turn.cache_metadata
        state, reason = _state(meta)
        usage = turn.usage or Usage()
        # A named cache's write is the prefix it was created over; a marked
        # provider reports what each call wrote; an automatic one writes free.
        written = meta.prefix_tokens if meta is not None and state in ("created", "grown") else 0
        record = TurnRecord(
            number=n, input_kind=kind, input_label=label,
            prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_prompt_tokens,
            output_tokens=usage.output_tokens, cache_state=state, bypass_reason=reason,
            compactions=tuple(_trigger(e) for e in turn.compactions),
            background_compaction=turn.background_compaction_scheduled,
            secrets_pruned=turn.accounting.secrets_pruned,
            cost=turn_cost(prompt_tokens=usage.prompt_tokens, cached_tokens=usage.cached_prompt_tokens,
                           output_tokens=usage.output_tokens, written_tokens=written, cache_ttl_s=CACHE_TTL_S,
                           reported_write_tokens=usage.cache_write_tokens, shape=shape),
        )
        result.turns.append(record)
        if on_turn is not None:
            on_turn(record)
        pending = turn.function_calls
        if pace_s and n < turns:
            await asyncio.sleep(pace_s)
    result.elapsed_s = time.monotonic() - started
    return result
