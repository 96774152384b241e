"""The effective selection policy of one call: built-in defaults, then the
session's policy, then the per-call override.

Defaults follow erlang_adk: every budget unlimited, overflow ERROR, 4 bytes
per token; attached artifacts (``max_attachment_bytes``, which erlang_adk
lacks) at most 8 MiB together, so that a request naming a 64 MiB artifact
is refused before its bytes are read. ``extra_secret_keys`` is the one field that accumulates instead
of being replaced: a per-call override can add keys to prune, never take the
session's away.
"""

from __future__ import annotations

import dataclasses

from context_service.domain.config import OverflowMode, SelectionPolicy, overlay
from context_service.domain.selection.secrets import SecretKeys
from context_service.domain.selection.tokens import DEFAULT_BYTES_PER_TOKEN

DEFAULT_MAX_ATTACHMENT_BYTES = 8 * 1024 * 1024
DEFAULT_POLICY = SelectionPolicy(
    bytes_per_token=DEFAULT_BYTES_PER_TOKEN, overflow=OverflowMode.ERROR,
    max_attachment_bytes=DEFAULT_MAX_ATTACHMENT_BYTES,
)


def effective_policy(session: SelectionPolicy | None, call: SelectionPolicy | None) -> SelectionPolicy:
    merged = overlay(overlay(DEFAULT_POLICY, session), call)
    extra = tuple(dict.fromkeys((*(session.extra_secret_keys if session else ()), *(call.extra_secret_keys if call else ()))))
    return dataclasses.replace(merged, extra_secret_keys=extra)


def secret_keys(policy: SelectionPolicy) -> SecretKeys:
    return SecretKeys.with_extra(policy.extra_secret_keys)
