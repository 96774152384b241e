"""The economics benchmark's own measures, on small hand-made traces: the
ideal share counts only what a call shares with the call before it, and the
invocation count follows the simulator's tool rule."""

from __future__ import annotations

from bench.economics import _tokens, ideal_share, invocations_for
from cache_service.domain.model import ModelCall

SYSTEM = {"role": "user", "parts": [{"text": "system " * 50}]}


def _call(*texts: str, system: dict = SYSTEM) -> ModelCall:
    contents = tuple({"role": "user" if i % 2 == 0 else "model", "parts": [{"text": t}]} for i, t in enumerate(texts))
    return ModelCall(model="local-sim-1", contents=contents, system_instruction=system)


def test_ideal_share_counts_the_prefix_shared_with_the_previous_call() -> None:
    a = _call("one " * 40)
    b = _call("one " * 40, "reply", "two " * 40)
    c = _call("summary", "three")  # a compaction rewrote the history: only the head is shared
    total = sum(_tokens(x, len(x.contents)) for x in (a, b, c))
    shared = _tokens(b, 1) + _tokens(c, 0)
    assert ideal_share([a, b, c]) == shared / total
    assert ideal_share([a]) == 0.0
    other_head = _call("one " * 40, "reply", system={"role": "user", "parts": [{"text": "changed"}]})
    assert ideal_share([a, other_head]) == 0.0


def test_invocations_follow_the_tool_rule() -> None:
    # The first three tasks: two name a tool (two calls each), one does not.
    assert invocations_for(1) == 1
    assert invocations_for(4) == 2
    assert invocations_for(5) == 3
