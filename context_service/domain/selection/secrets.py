"""Key-based credential pruning for JSON values (tool args, tool results,
session state).

A key matches when its normalized form is in the key set. Normalizing lower-
cases the key and drops the word separators ``_``, ``-``, ``.`` and spaces,
so snake, kebab, camel, Pascal, SCREAMING_SNAKE and dotted spellings of one
name are one key: ``access_token``, ``accessToken``, ``AccessToken``,
``ACCESS-TOKEN`` and ``access.token`` all match. The built-in list and a
caller's ``extra_secret_keys`` are normalized the same way.
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


_SEPARATORS = str.maketrans("", "", "_-. \t")
# Payload keys repeat (the same tool schemas, turn after turn), so each key
# string is normalized once; the memo is dropped whole if it grows past the cap,
# and long keys (never a credential field name) are not kept in it.
_MEMO_CAP = 65_536
_MEMO_KEY_CHARS = 128
_memo: dict[str, str] = {}


def normalize_key(key: str) -> str:
    """``key`` in the one spelling matching compares: lower case, without
    word separators."""
    found = _memo.get(key)
    if found is None:
        found = key.strip().lower().translate(_SEPARATORS)
        if len(key) <= _MEMO_KEY_CHARS:
            if len(_memo) >= _MEMO_CAP:
                _memo.clear()
            _memo[key] = found
    return found


@dataclass(frozen=True, slots=True)
class SecretKeys:
    """A normalized key set. ``fingerprint`` names the set without listing it,
    so per-event work done under one set can be cached by it."""

    keys: frozenset[str]
    fingerprint: str

    @classmethod
    def with_extra(cls, extra: Iterable[str] = ()) -> SecretKeys:
        # A key of separators only normalizes to "" and would match nothing real.
        keys = frozenset(n for n in (normalize_key(k) for k in (*BUILTIN_SECRET_KEYS, *extra)) if n)
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
