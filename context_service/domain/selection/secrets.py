"""Key-based credential pruning for JSON values (tool args, tool results,
session state).

A key matches when its normalized form (lower case, ``-`` read as ``_``) is
in the key set, so ``API-Key``, ``api_key`` and ``Api_Key`` all match.
Matching keys are DROPPED (not masked): nothing of the key or its value
reaches a model request, and the count of dropped keys is reported.

This is a safety boundary for well-known credential fields, not PII
detection: a secret inside free text, or under an unlisted key, passes.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

BUILTIN_SECRET_KEYS: tuple[str, ...] = (
    "api_key", "apikey", "x-api-key", "authorization", "password", "passwd", "secret",
    "client_secret", "token", "access_token", "refresh_token", "id_token", "private_key",
    "cookie", "set-cookie", "credentials",
)


def normalize_key(key: str) -> str:
    return key.strip().lower().replace("-", "_")


@dataclass(frozen=True, slots=True)
class SecretKeys:
    """A normalized key set. ``fingerprint`` names the set without listing it,
    so per-event work done under one set can be cached by it."""

    keys: frozenset[str]
    fingerprint: str

    @classmethod
    def with_extra(cls, extra: Iterable[str] = ()) -> SecretKeys:
        keys = frozenset(normalize_key(k) for k in (*BUILTIN_SECRET_KEYS, *extra) if k.strip())
        digest = hashlib.sha256("\n".join(sorted(keys)).encode()).hexdigest()[:16]
        return cls(keys, digest)

    def matches(self, key: str) -> bool:
        return normalize_key(key) in self.keys


DEFAULT_SECRET_KEYS = SecretKeys.with_extra()


def prune(value: Any, keys: SecretKeys) -> tuple[Any, int]:
    """``value`` without any secret key at any depth (dicts inside lists
    included), and how many keys were dropped. The input is not modified;
    subtrees without a secret are returned as they are, not copied."""
    if isinstance(value, dict):
        count = 0
        changed = False
        out: dict[str, Any] = {}
        for k, v in value.items():
            if normalize_key(k) in keys.keys:
                count += 1
                changed = True
                continue
            new, n = prune(v, keys)
            count += n
            changed = changed or new is not v
            out[k] = new
        return (out if changed else value), count
    if isinstance(value, (list, tuple)):
        count = 0
        changed = False
        items = []
        for item in value:
            new, n = prune(item, keys)
            count += n
            changed = changed or new is not item
            items.append(new)
        return (items if changed else value), count
    return value, 0
