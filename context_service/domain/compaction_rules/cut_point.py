"""Where to cut a history into "summarize" and "keep verbatim".

A cut ``c`` summarizes ``events[:c]`` and keeps ``events[c:]``. A cut is
valid when the kept tail

* does not start with a tool response, and holds no response whose call is
  summarized or missing (pi #6832: an orphan tool result after chained
  compactions left the session stuck on a provider 400);
* keeps every call still waiting for its answer: a long-running call or a
  pending confirmation (adk-python #4740/#5602/#6179), or the calls of the
  newest model step while the agent is still running them.

An unanswered call the conversation has moved past is an orphan; it may be
summarized, so it never blocks compaction (adk-python #7236). A response
whose call is gone is summarized with what precedes it.

Among valid cuts the kept tail is the longest one within the token budget
(pi #8498: a kept tail over its budget). When no non-empty tail fits (pi
#7201: trailing tool results larger than keep_recent), the shortest valid
non-empty tail is kept and reported as over budget. Linear in the number of
events.
"""

from __future__ import annotations

import enum
from collections import defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass

from context_service.domain.compaction_rules.history import is_user_turn_start
from context_service.domain.compaction_rules.sizing import Measure, measure_all, tokens
from context_service.domain.model import Event


class NoCut(str, enum.Enum):
    """Why nothing can be summarized."""

    FITS = "FITS"  # the visible history already fits the keep budget
    NO_VALID_CUT = "NO_VALID_CUT"  # every cut would split a tool pair or drop a pending call
    TOO_FEW_EXCHANGES = "TOO_FEW_EXCHANGES"  # retain_recent_exchanges keeps everything


@dataclass(frozen=True, slots=True)
class KeepBudget:
    tokens: int
    exchanges: int | None = None  # keep at least this many user exchanges
    max_events: int | None = None  # and at most this many events (event-count trigger)


@dataclass(frozen=True, slots=True)
class Cut:
    index: int  # events[:index] are summarized; 0 means nothing
    kept_tokens: int
    kept_events: int
    kept_over_budget: bool = False
    held_by_pending_call: bool = False
    no_cut: NoCut | None = None

    @property
    def found(self) -> bool:
        return self.index > 0


@dataclass(frozen=True, slots=True)
class ToolLinks:
    """Calls and responses paired by id (or, for id-less calls, by name in
    order)."""

    # For each (event index, response) pair: the index of its call's event,
    # or -1 when the call is not in the history.
    response_calls: tuple[tuple[int, int], ...]
    # Indexes of events holding a call that still waits for its answer.
    pending_call_events: tuple[int, ...]


def link_tools(events: Sequence[Event]) -> ToolLinks:
    long_running = {tid for e in events for tid in e.long_running_tool_ids}
    call_events: list[int] = []  # event index of every call, in order
    call_ids: list[str] = []
    latest_by_id: dict[str, int] = {}  # call id -> position in call_events
    open_by_name: dict[str, deque[int]] = defaultdict(deque)  # id-less calls
    answered: set[int] = set()
    response_calls: list[tuple[int, int]] = []
    last_moving_on = -1  # newest user input or model step
    for j, e in enumerate(events):
        if e.content is None or e.partial:
            continue
        for fc in e.content.function_calls:
            if fc.id:
                latest_by_id[fc.id] = len(call_events)
            else:
                open_by_name[fc.name].append(len(call_events))
            call_events.append(j)
            call_ids.append(fc.id)
        for fr in e.content.function_responses:
            if fr.id:
                pos = latest_by_id.get(fr.id)
            else:
                pos = open_by_name[fr.name].popleft() if open_by_name[fr.name] else None
            if pos is not None:
                answered.add(pos)
            response_calls.append((j, call_events[pos] if pos is not None else -1))
        if is_user_turn_start(e) or e.content.role == "model":
            last_moving_on = j
    pending = {
        i
        for pos, i in enumerate(call_events)
        if pos not in answered
        # Waiting: declared long-running, or nothing but tool results came after it.
        and ((call_ids[pos] and call_ids[pos] in long_running) or i >= last_moving_on)
    }
    return ToolLinks(tuple(response_calls), tuple(sorted(pending)))


def valid_cuts(events: Sequence[Event], links: ToolLinks | None = None) -> list[bool]:
    """``valid[c]`` for c in 0..len(events), ignoring budgets."""
    links = links or link_tools(events)
    n = len(events)
    diff = [0] * (n + 2)
    for j, i in links.response_calls:
        lo = 0 if i < 0 else i + 1  # cuts in (call, response] split the pair
        lo = min(lo, j)  # a kept tail never starts with a response
        diff[lo] += 1
        diff[j + 1] -= 1
    cap = links.pending_call_events[0] if links.pending_call_events else n
    valid = []
    running = 0
    for c in range(n + 1):
        running += diff[c]
        valid.append(running == 0 and c <= cap)
    return valid


def find_cut(
    events: Sequence[Event],
    budget: KeepBudget,
    bytes_per_token: float,
    *,
    max_index: int | None = None,
    measures: Sequence[Measure] | None = None,
) -> Cut:
    """The cut for ``budget``; ``max_index`` caps how much may be summarized
    (the compactor's input bound); ``measures`` are the events' measures
    when the caller has them."""
    n = len(events)
    per_event = [tokens(m, bytes_per_token) for m in (measures if measures is not None else measure_all(events))]
    kept_tokens = [0] * (n + 1)  # kept_tokens[c]: tokens of events[c:]
    kept_events = [0] * (n + 1)
    for c in range(n - 1, -1, -1):
        kept_tokens[c] = kept_tokens[c + 1] + per_event[c]
        kept_events[c] = kept_events[c + 1] + (0 if events[c].partial else 1)

    def within(c: int) -> bool:
        return kept_tokens[c] <= budget.tokens and (budget.max_events is None or kept_events[c] <= budget.max_events)

    def cut(c: int, **extra: object) -> Cut:
        return Cut(c, kept_tokens[c], kept_events[c], **extra)  # type: ignore[arg-type]

    if within(0):
        return Cut(0, kept_tokens[0], kept_events[0], no_cut=NoCut.FITS)
    links = link_tools(events)
    valid = valid_cuts(events, links)
    upper = n - 1  # keep at least one event when any valid cut allows it
    if max_index is not None:
        upper = min(upper, max_index)
    if budget.exchanges:
        starts = [k for k, e in enumerate(events) if is_user_turn_start(e)]
        if len(starts) < budget.exchanges or starts[-budget.exchanges] == 0:
            return Cut(0, kept_tokens[0], kept_events[0], no_cut=NoCut.TOO_FEW_EXCHANGES)
        upper = min(upper, starts[-budget.exchanges])
    pending_cap = links.pending_call_events[0] if links.pending_call_events else n
    # The budget wanted to summarize a call that still waits for its answer.
    held = pending_cap <= upper and not within(pending_cap)
    upper = min(upper, pending_cap)

    # The longest valid tail within budget: the smallest valid c that fits.
    for c in range(1, upper + 1):
        if valid[c] and within(c):
            return cut(c)
    # None fits: the shortest valid non-empty tail, over budget.
    for c in range(upper, 0, -1):
        if valid[c]:
            return cut(c, kept_over_budget=True, held_by_pending_call=held)
    # No non-empty tail is valid (say, the newest event is an orphan
    # response): summarize everything, if nothing still waits for an answer.
    if valid[n] and not links.pending_call_events and not budget.exchanges and (max_index is None or max_index >= n):
        return cut(n)
    return Cut(0, kept_tokens[0], kept_events[0], no_cut=NoCut.NO_VALID_CUT)
