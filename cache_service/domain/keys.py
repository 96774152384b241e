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
"""

from __future__ import annotations

import copy
import functools
import hashlib
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

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


def chain_digests(head: JSON, history: Sequence[Any]) -> tuple[bytes, ...]:
    """``chain[i]`` identifies the head plus the first ``i`` contents."""
    chain = [_digest(b"head", canonical_json(head))]
    for content in history:
        chain.append(_digest(chain[-1], _digest(canonical_json(content))))
    return tuple(chain)


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
        body = canonical_json(prefix.json())
        return cls(
            prefix=prefix,
            fingerprint=hashlib.sha256(body).hexdigest(),
            size_bytes=len(body),
            tokens=estimate_tokens(len(body), bytes_per_token),
            chain=chain_digests(prefix.head_json(), prefix.history),
        )

    @property
    def history_len(self) -> int:
        return len(self.prefix.history)

    @property
    def digest(self) -> bytes:
        return self.chain[-1]


def call_chain(call: ModelCall, upto: int) -> bytes:
    """The chain digest of a request's first ``upto`` contents (with its head)."""
    prefix = Prefix.of_call(call, upto)
    return chain_digests(prefix.head_json(), prefix.history)[-1]
