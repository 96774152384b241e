"""Scopes, prefixes and their fingerprints.

- Scope fingerprint: SHA-256 of the canonical JSON of {provider, app, user,
  model, policy}. Nothing is shared across scopes.
- Prefix fingerprint (public): SHA-256 of the canonical JSON of
  ``canonical.prefix_json`` (model, system instruction, tools, tool config,
  history); the context service computes the same value.
- Chain digests (private, for matching): ``chain[0]`` covers the head (model,
  system instruction, tools, tool config) and ``chain[i]`` the head plus the
  first ``i`` history contents. A cached prefix of ``n`` contents is a
  leading part of a longer request exactly when their ``chain[n]`` agree, so
  one linear pass over a request finds every cache or sighting it extends.
- Token estimate: canonical UTF-8 bytes / bytes_per_token, rounded up (the
  context service and the local simulator count the same way).

Measured once: a ``CanonicalContent`` (what the api layer's content memo
hands out) carries its canonical bytes and digest, its last chain link and
the fingerprint hash state after it, so a turn that repeats the previous
prefix hashes only its new contents. Every value is the one the plain-dict
path computes (tests/cache/test_digests.py checks this over random
prefixes): a memoized link is used only after the exact predecessor
digest it was computed from, a hash state only at the chain digest it was
left at (the same match the registry relies on).
"""

from __future__ import annotations

import copy
import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

from agentctx_common.canonical import canonical_json, fingerprint
from cache_service.domain.model import JSON, ModelCall


def estimate_tokens(size_bytes: int, bytes_per_token: float = 4.0) -> int:
    return math.ceil(size_bytes / bytes_per_token) if size_bytes > 0 else 0


@dataclass(frozen=True)
class Scope:
    provider: str
    app: str
    user: str
    model: str
    policy: JSON

    def __post_init__(self) -> None:
        # The caller keeps no handle on our copy, nested maps included.
        object.__setattr__(self, "policy", copy.deepcopy(self.policy))

    def json(self) -> JSON:
        return {"provider": self.provider, "app": self.app, "user": self.user, "model": self.model,
                "policy": self.policy}

    @functools.cached_property
    def size_bytes(self) -> int:
        return len(canonical_json(self.json()))

    @functools.cached_property
    def fingerprint(self) -> str:
        return fingerprint(self.json())

    @functools.cached_property
    def group(self) -> str:
        """The app's scopes on this provider (first-sighting outcomes are
        pooled there: domain.policy, rule 7)."""
        return fingerprint({"provider": self.provider, "app": self.app})[:32]


@dataclass(frozen=True)
class Prefix:
    """The stable start of a request: what a cache holds."""

    model: str
    system_instruction: JSON | None
    tools: tuple[JSON, ...]
    tool_config: JSON | None
    history: tuple[JSON, ...]

    @classmethod
    def of_call(cls, call: ModelCall, history_len: int) -> Prefix:
        return cls(call.model, call.system_instruction, call.tools, call.tool_config, call.contents[:history_len])

    def head_json(self) -> JSON:
        return {"model": self.model, "systemInstruction": self.system_instruction, "tools": list(self.tools),
                "toolConfig": self.tool_config}

    def json(self) -> JSON:
        # Same shape as agentctx_common.canonical.prefix_json.
        return {**self.head_json(), "history": list(self.history)}

    @property
    def is_empty(self) -> bool:
        return not self.history and not self.tools and not _has_parts(self.system_instruction)


def _has_parts(content: JSON | None) -> bool:
    return bool(content and content.get("parts"))


def _digest(*chunks: bytes) -> bytes:
    h = hashlib.sha256()
    for c in chunks:
        h.update(c)
    return h.digest()


class CanonicalContent(dict[str, Any]):
    """A content's canonical JSON dict that also carries what hashing it
    costs: its canonical bytes and their SHA-256, plus two memos filled by
    ``chain_digests`` and ``PrefixView.of``.

    Shared between requests (the content memo hands the same object to
    every request that sends the same bytes), so it must never change: the
    top level refuses edits, and nested values are, like every domain
    value, treated as immutable. A copy is a plain dict, free to edit.
    """

    __slots__ = ("_body", "_link", "canonical", "digest")

    def __init__(self, value: JSON) -> None:
        super().__init__(value)
        self.canonical = canonical_json(value)
        self.digest = _digest(self.canonical)
        # (chain digest before this content, chain digest after it)
        self._link: tuple[bytes, bytes] | None = None
        # (chain digest after this content, fingerprint hash state after
        # this content's bytes, body bytes so far); see PrefixView.of.
        self._body: tuple[bytes, Any, int] | None = None

    def _frozen(self, *args: object, **kwargs: object) -> NoReturn:
        raise TypeError("a CanonicalContent is shared and cannot change; edit a copy (dict(content))")

    __setitem__ = __delitem__ = __ior__ = _frozen
    clear = pop = popitem = setdefault = update = _frozen

    def __copy__(self) -> JSON:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, Any]) -> JSON:
        return copy.deepcopy(dict(self), memo)

    def __reduce__(self) -> tuple[Any, ...]:
        return (dict, (dict(self),))


def _next_link(prev: bytes, content: Any) -> bytes:
    if type(content) is CanonicalContent:
        link = content._link
        if link is not None and link[0] == prev:
            return link[1]
        nxt = _digest(prev, content.digest)
        content._link = (prev, nxt)
        return nxt
    return _digest(prev, _digest(canonical_json(content)))


def chain_digests(head: JSON, history: Sequence[Any]) -> tuple[bytes, ...]:
    """``chain[i]`` identifies the head plus the first ``i`` contents."""
    return _chain(canonical_json(head), history)


def _chain(head: bytes, history: Sequence[Any]) -> tuple[bytes, ...]:
    """``chain_digests`` of a head already in canonical bytes."""
    prev = _digest(b"head", head)
    chain = [prev]
    append = chain.append
    for content in history:
        # The memoized link inline: this loop runs once per content per call.
        if type(content) is CanonicalContent and (link := content._link) is not None and link[0] == prev:
            prev = link[1]
        else:
            prev = _next_link(prev, content)
        append(prev)
    return tuple(chain)


# canonical_json(prefix.json()) sorts "history" before every head key, so
# the body is this opening, the contents joined by commas, then "]," and
# the head's canonical JSON without its opening brace.
_BODY_OPEN = b'{"history":['


def _body_digest(head: JSON, head_bytes: bytes, history: Sequence[Any], chain: Sequence[bytes]) -> tuple[str, int]:
    """SHA-256 hex and length of ``canonical_json({**head, "history": history})``
    (``head_bytes``: the head's canonical JSON), resuming from the hash
    state memoized on the latest content whose chain digest still matches
    (same head and same contents up to it)."""
    if not history or type(history[-1]) is not CanonicalContent:
        # Nothing measured (domain callers, tests): the definition itself.
        whole = canonical_json({**head, "history": list(history)})
        return hashlib.sha256(whole).hexdigest(), len(whole)
    hasher: Any = None
    size = start = 0
    for i in range(len(history), 0, -1):
        content = history[i - 1]
        if type(content) is not CanonicalContent:
            break
        body = content._body
        if body is not None and body[0] == chain[i]:
            hasher, size, start = body[1].copy(), body[2], i
            break
    if hasher is None:
        hasher, size = hashlib.sha256(_BODY_OPEN), len(_BODY_OPEN)
    for i in range(start, len(history)):
        content = history[i]
        data = content.canonical if type(content) is CanonicalContent else canonical_json(content)
        if i:
            hasher.update(b",")
            size += 1
        hasher.update(data)
        size += len(data)
    last = history[-1]
    if start < len(history):
        last._body = (chain[-1], hasher.copy(), size)
    tail = b"]," + head_bytes[1:]
    hasher.update(tail)
    return hasher.hexdigest(), size + len(tail)


@dataclass(frozen=True)
class PrefixView:
    """A prefix measured once: public fingerprint, size, tokens and chain."""

    prefix: Prefix
    fingerprint: str
    size_bytes: int
    tokens: int
    chain: tuple[bytes, ...]

    @classmethod
    def of(cls, prefix: Prefix, bytes_per_token: float = 4.0) -> PrefixView:
        head = prefix.head_json()
        head_bytes = canonical_json(head)  # once, for the chain and the body
        chain = _chain(head_bytes, prefix.history)
        fp, size = _body_digest(head, head_bytes, prefix.history, chain)
        return cls(
            prefix=prefix,
            fingerprint=fp,
            size_bytes=size,
            tokens=estimate_tokens(size, bytes_per_token),
            chain=chain,
        )

    @property
    def history_len(self) -> int:
        return len(self.prefix.history)

    @property
    def digest(self) -> bytes:
        return self.chain[-1]


def canonical_list(items: Sequence[Any]) -> bytes:
    """``canonical_json(list(items))``: the measured bytes of the items that
    carry them (CanonicalContent), each run of other items encoded in one
    call (a call per small item would cost more than the whole list)."""
    chunks: list[bytes] = []
    plain: list[Any] = []
    for item in items:
        if type(item) is CanonicalContent:
            if plain:
                chunks.append(canonical_json(plain)[1:-1])
                plain = []
            chunks.append(item.canonical)
        else:
            plain.append(item)
    if plain:
        chunks.append(canonical_json(plain)[1:-1])
    return b"[" + b",".join(chunks) + b"]"


def canonical_size(prefix: Prefix) -> int:
    """``len(canonical_json(prefix.json()))``: ``{"history":`` then the
    history list, a comma and the head's canonical JSON without its opening
    brace (see ``_body_digest``), from the contents' measured bytes."""
    return len(_BODY_OPEN) - 1 + len(canonical_list(prefix.history)) + len(canonical_json(prefix.head_json()))


def call_chain(call: ModelCall, upto: int) -> bytes:
    """The chain digest of a request's first ``upto`` contents (with its head)."""
    prefix = Prefix.of_call(call, upto)
    return chain_digests(prefix.head_json(), prefix.history)[-1]


def _has_part(content: Any, key: str) -> bool:
    return any(key in part for part in (content.get("parts") or ()))


def invocation_count(history: Sequence[Any]) -> int:
    """Invocations (as adk-python counts them) up to the call this history
    precedes: each user content that is not a function response starts one,
    and so does the call's own input unless it answers the model's function
    calls. The cache service sees no invocation id; the history says it."""
    starts = sum(1 for c in history if c.get("role") == "user" and not _has_part(c, "functionResponse"))
    if not history:
        return 1
    last = history[-1]
    return starts + (1 if last.get("role") == "model" and not _has_part(last, "functionCall") else 0)
