"""Context selection: the bounded, secret-pruned view of a session for one
model call, and its accounting. Pure domain code: no grpc, no storage.

Typical use (``context_service.building.builder`` does exactly this)::

    policy = effective_policy(session_policy, call_policy)
    keys = secret_keys(policy)
    records = [event_record(e, keys) for e in events]      # cacheable per event
    inputs = [content_record(c, keys) for c in current_input]
    selection = select(records, inputs, policy)           # budgets, units
    if selection.pending:                                  # overflow COMPRESS
        selection = finish_compression(selection, await compressor(...), keys)
    selection, parts = pair_calls(selection, RequestParts(...))  # calls answered
    accounting = account(selection, parts, policy)         # envelope
"""

from context_service.domain.selection.envelope import Accounting, RequestParts, Section, account
from context_service.domain.selection.pairing import NOT_ANSWERED, pair_calls
from context_service.domain.selection.policy import DEFAULT_POLICY, effective_policy, secret_keys
from context_service.domain.selection.records import (
    ContentRecord,
    EventRecord,
    content_record,
    event_record,
    prune_content,
    summary_content,
)
from context_service.domain.selection.secrets import DEFAULT_SECRET_KEYS, SecretKeys, prune
from context_service.domain.selection.select import (
    CompressionRequest,
    Compressor,
    Selection,
    finish_compression,
    latest_compaction,
    select,
)

__all__ = [
    "DEFAULT_POLICY",
    "DEFAULT_SECRET_KEYS",
    "NOT_ANSWERED",
    "Accounting",
    "CompressionRequest",
    "Compressor",
    "ContentRecord",
    "EventRecord",
    "RequestParts",
    "SecretKeys",
    "Section",
    "Selection",
    "account",
    "content_record",
    "effective_policy",
    "event_record",
    "finish_compression",
    "latest_compaction",
    "pair_calls",
    "prune",
    "prune_content",
    "secret_keys",
    "select",
    "summary_content",
]
