"""Function calls and their responses, paired as every provider takes them.

A provider refuses a request that holds a function call without its
response right after it (Anthropic: "tool_use ids were found without
tool_result blocks"; OpenAI: "must be followed by tool messages") or a
response without its call. An agent that sends a user message instead of a
tool's result would otherwise poison every later turn. So the BUILT request
(never a stored event) is paired after selection, on whole units, over its
contents in the order they are sent (summary, history, then the current
input with the memory after the responses it opens with,
``RequestParts.current``):

- a response belongs to the oldest unanswered call of its id (id-less: of
  its function name) in an earlier model content; a response to no such call
  (its call dropped by selection or compaction, or never made), or inside a
  model content, is dropped;
- the contents right after a model content with calls, up to and including
  the first that holds anything but responses, and before the next model
  content, are its answer: a response there stays where it is;
- a response further on is moved right after its call;
- a call answered nowhere gets a synthesized response (``NOT_ANSWERED``)
  right after it.

A content left without parts is dropped. The current input is part of the
sequence, so the calls a turn's input answers (the newest model content's)
are answered, never synthesized. A well-formed request (the usual case) is
left as it is, object for object: ``pair_calls`` returns its arguments.
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, replace

from context_service.domain import model as m
from context_service.domain.selection.envelope import RequestParts, attachment_index
from context_service.domain.selection.records import ContentRecord, Render, content_record
from context_service.domain.selection.secrets import SecretKeys
from context_service.domain.selection.select import Selection

NOT_ANSWERED = "no result: the call was not answered"
# Records are pruned already: rebuilt ones are not pruned again.
_NO_KEYS = SecretKeys(frozenset(), "")

_Ref = tuple[int, int]  # (entry, part)


def _key(name: str, call_id: str) -> str:
    return call_id if call_id else "\0" + name


def _tool_positions(
    bodies: Sequence[ContentRecord], older: tuple[int, list[int]] | None
) -> tuple[int, list[int]]:
    """(bodies seen, positions of those holding calls or responses),
    extended after appends (``Grouping.derive``)."""
    seen, out = (older[0], older[1].copy()) if older is not None else (0, [])
    out += [i for i in range(seen, len(bodies)) if bodies[i].call_ids or bodies[i].response_ids]
    return len(bodies), out


@dataclass(frozen=True, slots=True)
class _Scan:
    """The local check of a history, one body at a time (so an append only
    scans what it added): a response must answer an open call of the
    nearest model content before it, within that content's answer; every
    call of a model content must be answered before the next one.
    ``bad``: the newest position failing it (-1: none). The rest is the
    state at the end: the newest model content with calls (its position,
    its unanswered call keys, whether its answer is still open)."""

    seen: int = 0
    bad: int = -1
    caller: int = -1
    open: tuple[str, ...] = ()
    answering: bool = False


def _scan(contents: Sequence[m.Content], state: _Scan, start: int) -> _Scan:
    """``state`` continued over ``contents`` (positions from ``start``)."""
    bad, caller, waiting, answering = state.bad, state.caller, list(state.open), state.answering
    for at, content in enumerate(contents, start):
        if content.role == "model":
            if waiting:
                bad = max(bad, caller)
            calls = [_key(p.function_call.name, p.function_call.id) for p in content.parts if p.function_call is not None]
            if any(p.function_response is not None for p in content.parts):
                bad = at
            caller, waiting, answering = (at, calls, True) if calls else (-1, [], False)
            continue
        other = False
        for p in content.parts:
            fr = p.function_response
            if fr is None:
                other = True
                continue
            key = _key(fr.name, fr.id)
            if answering and key in waiting:
                waiting.remove(key)
            else:
                bad = at
        if other:
            answering = False
    return _Scan(state.seen + len(contents), bad, caller, tuple(waiting), answering)


def _history_scan(bodies: Sequence[ContentRecord], older: _Scan | None) -> _Scan:
    """``_scan`` of a grouping's bodies, extended after appends
    (``Grouping.derive``)."""
    state = older if older is not None else _Scan()
    return _scan([b.content for b in bodies[state.seen:]], state, state.seen)


def _current(inputs: Sequence[ContentRecord], memory: Sequence[ContentRecord]) -> list[ContentRecord]:
    """The current input as sent (``RequestParts.current``, less the
    attachments, which hold no call or response)."""
    at = attachment_index(inputs)
    return [*inputs[:at], *memory, *inputs[at:]]


def paired_already(selection: Selection, parts: RequestParts) -> bool:
    """True when the request certainly needs no repair, found without
    looking at every selected event: the history's scan is kept with its
    grouping, and fails nowhere from the first selected event on (units
    never straddle ``first_event``, so the suffix passes as the whole did);
    memory holds no call or response; the current input (the memory in
    it) completes the scan."""
    g = selection.grouping
    if g is None or any(r.call_ids or r.response_ids for r in parts.memory):
        return False
    state: _Scan = g.derive("pairing_scan", _history_scan)
    first = selection.first_event
    if state.bad >= first or (state.open and state.caller < first):
        return False
    if state.caller < first:
        state = _Scan(state.seen)
    end = _scan([r.content for r in _current(parts.inputs, parts.memory)], state, state.seen)
    return end.bad < first and not end.open


@dataclass(frozen=True, slots=True)
class Plan:
    """What pairing changes: per entry, its new parts (None: unchanged),
    and per entry, the parts to insert right after it."""

    parts: dict[int, tuple[m.Part, ...]]
    inserts: dict[int, list[m.Part]]
    synthesized: int
    moved: int
    dropped: int


def plan(entries: Sequence[tuple[int, m.Content]]) -> Plan | None:
    """The repairs of a request whose contents holding calls or responses
    are ``entries`` (position in the request, content), in order; any
    position not listed holds neither. None: nothing to repair."""
    waiting: dict[str, list[_Ref]] = {}
    answer: dict[_Ref, _Ref] = {}
    drop: set[_Ref] = set()
    for e, (_, content) in enumerate(entries):
        model = content.role == "model"
        for p, part in enumerate(content.parts):
            fc, fr = part.function_call, part.function_response
            if fc is not None and model:
                waiting.setdefault(_key(fc.name, fc.id), []).append((e, p))
            elif fr is not None:
                queue = None if model else waiting.get(_key(fr.name, fr.id))
                if queue:
                    answer[queue.pop(0)] = (e, p)
                else:
                    drop.add((e, p))
    inserts: dict[int, list[m.Part]] = {}
    moves: set[_Ref] = set()
    synthesized = 0
    for e, (position, content) in enumerate(entries):
        if content.role != "model" or not any(p.function_call is not None for p in content.parts):
            continue
        run, at, j = set(), position, e + 1
        while j < len(entries) and entries[j][0] == at + 1 and entries[j][1].role != "model":
            run.add(j)
            at += 1
            if any(p.function_response is None for p in entries[j][1].parts):
                break
            j += 1
        added: list[m.Part] = []
        for p, part in enumerate(content.parts):
            fc = part.function_call
            if fc is None:
                continue
            got = answer.get((e, p))
            if got is None:
                synthesized += 1
                added.append(m.Part(function_response=m.FunctionResponse(fc.id, fc.name, {"error": NOT_ANSWERED})))
            elif got[0] not in run:
                moves.add(got)
                added.append(entries[got[0]][1].parts[got[1]])
        if added:
            inserts[e] = added
    removed = drop | moves
    if not removed and not inserts:
        return None
    parts: dict[int, tuple[m.Part, ...]] = {}
    for e in {r[0] for r in removed}:
        content = entries[e][1]
        parts[e] = tuple(part for p, part in enumerate(content.parts) if (e, p) not in removed)
    return Plan(parts, inserts, synthesized, len(moves), len(drop))


def pair_calls(selection: Selection, parts: RequestParts, render: Render | None = None) -> tuple[Selection, RequestParts]:
    """``selection`` and ``parts`` with every call answered right after it
    and no response without its call (see the module docstring). Unchanged
    (the same objects) when they already are."""
    if paired_already(selection, parts):
        return selection, parts
    return repaired(selection, parts, render)


def repaired(selection: Selection, parts: RequestParts, render: Render | None = None) -> tuple[Selection, RequestParts]:
    """``pair_calls`` without its shortcut: every call and response in the
    selected window looked at."""
    memory, inputs = parts.memory, parts.inputs
    history_at = 1 if selection.summary is not None else 0
    entries: list[tuple[int, ContentRecord]] = []
    first = selection.first_event
    g = selection.grouping
    if g is not None:
        bodies = g.units.bodies
        tools = g.derive("tool_positions", _tool_positions)[1]
        for k in tools[bisect.bisect_left(tools, first):]:
            entries.append((history_at + k - first, bodies[k]))
        n_history = len(bodies) - first
    else:
        history = [r.body for r in selection.events if r.body is not None]
        entries += [(history_at + k, r) for k, r in enumerate(history) if r.call_ids or r.response_ids]
        n_history = len(history)
    # The current input as sent: the memory after the responses it opens with.
    input_at = history_at + n_history
    at = attachment_index(inputs)
    input_positions = [input_at + i + (len(memory) if i >= at else 0) for i in range(len(inputs))]
    memory_positions = [input_at + at + j for j in range(len(memory))]
    current = sorted([*zip(input_positions, inputs, strict=True), *zip(memory_positions, memory, strict=True)],
                     key=lambda e: e[0])
    entries += [(pos, r) for pos, r in current if r.call_ids or r.response_ids]
    if not entries:
        return selection, parts
    repairs = plan([(pos, r.content) for pos, r in entries])
    if repairs is None:
        return selection, parts

    changed: dict[int, ContentRecord | None] = {}
    added: dict[int, ContentRecord] = {}
    for e, kept in repairs.parts.items():
        pos, old = entries[e]
        changed[pos] = replace(
            content_record(m.Content(old.content.role, kept), _NO_KEYS, render), secrets_pruned=old.secrets_pruned
        ) if kept else None
    for e, new in repairs.inserts.items():
        added[entries[e][0]] = content_record(m.Content("user", tuple(new)), _NO_KEYS, render)

    def section(records: Sequence[ContentRecord], positions: Sequence[int]) -> list[ContentRecord]:
        out: list[ContentRecord] = []
        for pos, r in zip(positions, records, strict=True):
            new = changed.get(pos, r)
            if new is not None:
                out.append(new)
            extra = added.get(pos)
            if extra is not None:
                out.append(extra)
        return out

    history = section(selection.history, range(len(selection.history)))
    request_parts = replace(parts, memory=section(memory, memory_positions), inputs=section(inputs, input_positions))
    new_selection = replace(
        selection, paired=history, history_bytes=sum(r.size for r in history),
        calls_synthesized=repairs.synthesized, responses_moved=repairs.moved, responses_dropped=repairs.dropped,
    )
    return new_selection, request_parts
