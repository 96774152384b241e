"""The complete request envelope: per-section sizes and token estimates,
the request budget, and the three fingerprints.

Sections (bytes of canonical JSON, inline data at its raw length):
instructions, settings (generation config + tool config), history (the
summary included), memory, input, attachments (artifacts the caller
attached, ``RequestParts.current`` places them), tools, and a framing
allowance of 64 bytes per content and per tool plus 256 for what a
provider's wire format adds around them. ``request`` is their sum; its token estimate is taken on
the summed bytes. Over ``max_request_bytes`` / ``max_request_tokens``:
RESOURCE_EXHAUSTED, reason REQUEST_CONTEXT_BUDGET_EXCEEDED, with the figures.

Fingerprints (SHA-256 hex):
- prefix: canonical JSON of ``agentctx_common.canonical.prefix_json`` over
  model, system instruction, tools, tool config and every content before the
  current input (summary, history; never the memory or the attachments,
  which ``RequestParts.current`` places after the history) - the value the
  cache service computes for the same request, so memory retrieved anew
  each turn leaves it, and the provider's cached prefix, as they were;
- selection: over the SHA-256 digests of the selected history contents, in
  order (each content hashed once, when it was stored);
- envelope: canonical JSON of the whole request
  ``{contents, generationConfig, model, systemInstruction, toolConfig, tools}``.

Each of the three hashes the whole history, so a build keeps, on its
grouping (``Grouping.derive``), the SHA-256 state after the history part
of each (``_SavedHashes``): the next build on the same history copies the
state and hashes only what comes after the history; a build after an
append copies its older state and hashes only the appended contents. The
values are byte-identical to hashing the whole (tests/selection/
test_incremental_fingerprints.py).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from agentctx_common.canonical import canonical_json
from agentctx_common.reasons import Reason
from context_service.domain.config import SelectionPolicy
from context_service.domain.selection import errors
from context_service.domain.selection.grouping import Grouping
from context_service.domain.selection.records import ContentRecord
from context_service.domain.selection.select import Selection
from context_service.domain.selection.tokens import estimate

FRAMING_PER_ITEM = 64
FRAMING_BASE = 256


@dataclass(frozen=True, slots=True)
class Section:
    bytes: int
    tokens: int


@dataclass(frozen=True, slots=True)
class RequestParts:
    """The caller-supplied pieces of a request, each already canonical:
    contents as records, the rest as canonical JSON bytes (None: not set)."""

    model: str
    system_instruction: ContentRecord | None
    tools: Sequence[bytes]
    tool_config: bytes | None
    generation_config: bytes | None
    memory: Sequence[ContentRecord]
    inputs: Sequence[ContentRecord]
    attachments: Sequence[ContentRecord] = ()

    @property
    def current(self) -> list[ContentRecord]:
        """The contents after the stable prefix (summary and history), as
        sent: the current input with the memory, then the attachments,
        right before it, after the function responses it opens with (a
        response must follow its call). Without an input of the request's
        own, the memory ends the request."""
        if not self.attachments and not self.memory:
            return list(self.inputs)
        at = attachment_index(self.inputs)
        return [*self.inputs[:at], *self.memory, *self.attachments, *self.inputs[at:]]


def attachment_index(inputs: Sequence[ContentRecord]) -> int:
    """Where memory and attachments go among the current input: after the
    contents it opens with that answer function calls."""
    at = 0
    while at < len(inputs) and inputs[at].response_ids:
        at += 1
    return at


@dataclass(frozen=True, slots=True)
class Accounting:
    events_seen: int
    events_filtered: int
    events_selected: int
    units_selected: int
    units_dropped: int
    secrets_pruned: int
    instructions: Section
    settings: Section
    history: Section
    memory: Section
    input: Section
    tools: Section
    framing: Section
    request: Section
    bytes_per_token: float
    calibrated: bool
    prefix_fingerprint: str
    selection_fingerprint: str
    envelope_fingerprint: str
    compaction_sequence: int
    last_sequence: int
    compressed: bool
    attachments: Section = Section(0, 0)


def _join(items: Sequence[bytes | memoryview]) -> bytes:
    return b",".join(items)


def _tail(parts: RequestParts) -> tuple[bytes, bytes, bytes]:
    """The canonical pieces after the contents: model, system instruction,
    tool config (tools come last in both shapes)."""
    si = parts.system_instruction.canonical if parts.system_instruction is not None else b"null"
    tool_config = parts.tool_config if parts.tool_config is not None else b"null"
    return canonical_json(parts.model), si, tool_config


_PREFIX_HEAD = b'{"history":['
_ENVELOPE_HEAD = b'{"contents":['


def _prefix_after(parts: RequestParts) -> tuple[bytes, ...]:
    """The prefix's canonical JSON after its history."""
    model, si, tool_config = _tail(parts)
    return (
        b'],"model":', model, b',"systemInstruction":', si,
        b',"toolConfig":', tool_config, b',"tools":[', _join(parts.tools), b"]}",
    )


def _envelope_after(parts: RequestParts) -> tuple[bytes, ...]:
    """The envelope's canonical JSON after its contents."""
    model, si, tool_config = _tail(parts)
    generation = parts.generation_config if parts.generation_config is not None else b"null"
    return (
        b'],"generationConfig":', generation, b',"model":', model,
        b',"systemInstruction":', si, b',"toolConfig":', tool_config, b',"tools":[', _join(parts.tools), b"]}",
    )


def _prefix_chunks(parts: RequestParts, history: bytes) -> tuple[bytes, ...]:
    return (_PREFIX_HEAD, history, *_prefix_after(parts))


def _envelope_chunks(parts: RequestParts, contents: bytes) -> tuple[bytes, ...]:
    return (_ENVELOPE_HEAD, contents, *_envelope_after(parts))


def prefix_bytes(parts: RequestParts, before_input: Sequence[ContentRecord]) -> bytes:
    """Byte-for-byte ``canonical_json(prefix_json(...))``: keys in sorted
    order, assembled from canonical pieces instead of re-encoding them."""
    return b"".join(_prefix_chunks(parts, _join([c.canonical for c in before_input])))


def envelope_bytes(parts: RequestParts, contents: Sequence[ContentRecord]) -> bytes:
    return b"".join(_envelope_chunks(parts, _join([c.canonical for c in contents])))


def _sha256(chunks: Sequence[bytes]) -> str:
    h = hashlib.sha256()
    for chunk in chunks:
        h.update(chunk)
    return h.hexdigest()


def selection_fingerprint(history: Sequence[ContentRecord]) -> str:
    h = hashlib.sha256()
    for c in history:
        h.update(c.digest)
    return h.hexdigest()


# Saved states kept per history (heads and first positions; a build uses three).
_SAVED_STATES = 12


class _SavedHashes:
    """SHA-256 states after ``head`` + the bytes of ``bodies[position:]``
    (the grouping's comma-joined canonical bytes, or its digests), per
    (name, head, position), for the ``count`` bodies of one history; made
    from the states of the shorter history it extends (``older``) by
    hashing the appended bodies alone. A saved state is never updated:
    callers get a copy."""

    __slots__ = ("count", "older", "states")

    def __init__(self, count: int, older: _SavedHashes | None) -> None:
        self.count = count
        self.older = older
        self.states: dict[tuple[str, bytes, int], Any] = {}

    @classmethod
    def make(cls, bodies: Sequence[ContentRecord], older: _SavedHashes | None) -> _SavedHashes:
        if older is not None:
            older.older = None  # one step back is all a state extends
        return cls(len(bodies), older)

    def state(self, name: str, head: bytes, position: int, tail: Callable[[int], bytes],
              separator: bytes) -> Any:
        """A copy of the state after ``head`` + ``tail(position)``, where
        ``tail(p)`` is the bytes of ``bodies[p:]``, each body's bytes
        ``separator`` apart, and ``position`` < ``count``."""
        key = (name, head, position)
        h = self.states.get(key)
        if h is None:
            older = self.older
            base = older.states.get(key) if older is not None else None
            if base is not None and older is not None and position < older.count:
                h = base.copy()
                if older.count < self.count:
                    h.update(separator)
                    h.update(tail(older.count))
            else:
                h = hashlib.sha256(head)
                h.update(tail(position))
            if len(self.states) >= _SAVED_STATES:
                self.states.clear()
            self.states[key] = h
        return h.copy()


def _selection_fingerprint(selection: Selection, g: Grouping) -> str:
    h = hashlib.sha256()
    if selection.summary is not None:
        h.update(selection.summary.digest)
    h.update(g.digests_from(selection.first_event))
    return h.hexdigest()


def _grouping_fingerprints(selection: Selection, g: Grouping, parts: RequestParts) -> tuple[str, str, str]:
    """Prefix, selection and envelope fingerprints of a selection that
    takes its history from the grouping, from ``first_event`` on (at least
    one event), through the grouping's saved hash states."""
    saved: _SavedHashes = g.derive("fingerprint_states", _SavedHashes.make)
    first = selection.first_event
    summary = selection.summary
    lead = summary.canonical + b"," if summary is not None else b""
    digest = summary.digest if summary is not None else b""
    joined: dict[int, bytes] = {}

    def tail(position: int) -> bytes:  # joined once for both states that lack it
        found = joined.get(position)
        if found is None:
            found = joined[position] = g.joined_from(position)
        return found

    prefix = saved.state("prefix", _PREFIX_HEAD + lead, first, tail, b",")
    for chunk in _prefix_after(parts):
        prefix.update(chunk)
    envelope = saved.state("envelope", _ENVELOPE_HEAD + lead, first, tail, b",")
    for c in parts.current:
        envelope.update(b",")
        envelope.update(c.canonical)
    for chunk in _envelope_after(parts):
        envelope.update(chunk)
    chosen = saved.state("selection", digest, first, g.digests_from, b"")
    return prefix.hexdigest(), chosen.hexdigest(), envelope.hexdigest()


def account(selection: Selection, parts: RequestParts, policy: SelectionPolicy) -> Accounting:
    """The accounting of the request ``parts`` + ``selection`` make. Raises
    REQUEST_CONTEXT_BUDGET_EXCEEDED when it is over a request limit."""
    bpt = selection.bytes_per_token

    def section(size: int) -> Section:
        return Section(size, estimate(size, bpt))

    g = selection.grouping
    assert g is not None, "selections come from select()"
    paired = selection.paired
    # The contents before the current input: summary and history (the memory
    # goes with the input, ``RequestParts.current``).
    opening: list[bytes] = []
    if paired is not None:
        # Pairing changed the history: its records, not the grouping's layout.
        opening += [c.canonical for c in paired]
    elif selection.summary is not None:
        opening.append(selection.summary.canonical)
    n_history = len(paired) if paired is not None else len(selection.events)
    n_contents = len(parts.memory) + n_history + len(parts.inputs) + len(parts.attachments)
    if paired is None and selection.summary is not None:
        n_contents += 1
    si = parts.system_instruction
    sizes = {
        "instructions": si.size if si is not None else 0,
        "settings": len(parts.tool_config or b"") + len(parts.generation_config or b""),
        "history": selection.history_bytes,
        "memory": sum(c.size for c in parts.memory),
        "input": sum(c.size for c in parts.inputs),
        "attachments": sum(c.size for c in parts.attachments),
        "tools": sum(len(t) for t in parts.tools),
        "framing": FRAMING_PER_ITEM * (n_contents + len(parts.tools) + (1 if si is not None else 0)) + FRAMING_BASE,
    }
    total = sum(sizes.values())
    total_tokens = estimate(total, bpt)
    over_bytes = policy.max_request_bytes is not None and total > policy.max_request_bytes
    over_tokens = policy.max_request_tokens is not None and total_tokens > policy.max_request_tokens
    if over_bytes or over_tokens:
        raise errors.budget_exceeded(
            Reason.REQUEST_CONTEXT_BUDGET_EXCEEDED,
            "the complete request exceeds the request budget",
            kind="request",
            measured_bytes=total,
            measured_tokens=total_tokens,
            max_bytes=policy.max_request_bytes,
            max_tokens=policy.max_request_tokens,
            bytes_per_token=bpt,
        )
    pruned = sum(c.secrets_pruned for c in (*parts.memory, *parts.inputs, *parts.attachments))
    if paired is not None:
        pruned += sum(c.secrets_pruned for c in paired)
    else:
        pruned += g.pruned_from(selection.first_event)
        pruned += selection.summary.secrets_pruned if selection.summary is not None else 0
    if paired is None and selection.first_event < len(g.units.bodies):
        prefix_fingerprint, fingerprint, envelope_fingerprint = _grouping_fingerprints(selection, g, parts)
    else:
        # A paired history, or none: its records (a summary at most) hashed whole.
        if paired is None:
            fingerprint = _selection_fingerprint(selection, g)
        else:
            fingerprint = selection_fingerprint(paired)
        # One join of the contents serves both fingerprints.
        before_bytes = _join(opening)
        contents_bytes = _join([b for b in (before_bytes, *(c.canonical for c in parts.current)) if b])
        prefix_fingerprint = _sha256(_prefix_chunks(parts, before_bytes))
        envelope_fingerprint = _sha256(_envelope_chunks(parts, contents_bytes))
    return Accounting(
        events_seen=selection.events_seen,
        events_filtered=selection.events_filtered,
        events_selected=len(selection.events),
        units_selected=selection.units_selected,
        units_dropped=selection.units_dropped,
        secrets_pruned=pruned,
        request=Section(total, total_tokens),
        bytes_per_token=bpt,
        calibrated=selection.calibrated,
        prefix_fingerprint=prefix_fingerprint,
        selection_fingerprint=fingerprint,
        envelope_fingerprint=envelope_fingerprint,
        compaction_sequence=selection.compaction_sequence,
        last_sequence=selection.last_sequence,
        compressed=selection.compressed,
        **{name: section(size) for name, size in sizes.items()},
    )
