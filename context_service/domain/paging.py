"""ListSessions orders and the opaque page tokens of every list RPC (bound to
the query they came from).

Pure Python: no grpc, no protobuf, no storage.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import json
from dataclasses import dataclass

from agentctx_common.errors import FieldViolation, InvalidArgument
from agentctx_common.reasons import Reason
from context_service.domain.limits import ALL, Limits
from context_service.domain.session_records import SessionRecord

# ListSessions orders.
ORDER_CREATE = "create_time"
ORDER_UPDATE = "update_time"


def parse_session_order(order_by: str, path: str = "order_by") -> str:
    order = order_by.strip() or ORDER_CREATE
    if order not in (ORDER_CREATE, ORDER_UPDATE):
        raise InvalidArgument.fields([FieldViolation(path, "must be '', 'create_time' or 'update_time'")])
    return order


@dataclass(frozen=True)
class SessionQuery:
    """Which sessions to list: ``apps`` None means every app, ``user`` None
    every user."""

    apps: frozenset[str] | None
    user: str | None
    order: str = "create_time"

    @property
    def scope(self) -> str:
        apps = ",".join(sorted(self.apps)) if self.apps is not None else "*"
        suffix = "" if self.order == ORDER_CREATE else f"|{self.order}"
        return f"{apps}/{self.user or ALL}{suffix}"


@dataclass(frozen=True)
class SessionPage:
    sessions: list[SessionRecord]
    next_page_token: str


def page_size(requested: int, default: int, limits: Limits, path: str = "page_size") -> int:
    if requested < 0:
        raise InvalidArgument.fields([FieldViolation(path, "must not be negative")])
    if requested > limits.max_page_size:
        raise InvalidArgument.fields([FieldViolation(path, f"must be at most {limits.max_page_size}")])
    return requested or default


def encode_page_token(scope: str, after: int) -> str:
    """An opaque token: the position to resume after, bound to the query."""
    payload = {"s": _scope_tag(scope), "a": after}
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_page_token(token: str, scope: str, path: str = "page_token") -> int:
    """The position a token resumes after (0 for an empty token)."""
    if not token:
        return 0
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        after = payload["a"]
        tag = payload["s"]
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InvalidArgument.fields([FieldViolation(path, "is not a token this server issued")], reason=Reason.INVALID_PAGE_TOKEN) from None
    if tag != _scope_tag(scope) or not isinstance(after, int) or isinstance(after, bool) or after < 0:
        raise InvalidArgument.fields(
            [FieldViolation(path, "does not belong to this request; other fields must not change between pages")],
            reason=Reason.INVALID_PAGE_TOKEN,
        )
    return after


def encode_session_cursor(scope: str, update_time: dt.datetime, pk: int) -> str:
    """A token resuming a listing ordered by update time after (time, pk)."""
    stamp = update_time.astimezone(dt.UTC).isoformat()
    payload = {"s": _scope_tag(scope), "t": stamp, "a": pk}
    return base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")


def decode_session_cursor(token: str, scope: str, path: str = "page_token") -> tuple[dt.datetime, int] | None:
    if not token:
        return None
    try:
        payload = json.loads(base64.urlsafe_b64decode(token + "=" * (-len(token) % 4)))
        tag, after, stamp = payload["s"], payload["a"], dt.datetime.fromisoformat(payload["t"])
    except (binascii.Error, ValueError, KeyError, TypeError, UnicodeDecodeError):
        raise InvalidArgument.fields([FieldViolation(path, "is not a token this server issued")],
                                     reason=Reason.INVALID_PAGE_TOKEN) from None
    if tag != _scope_tag(scope) or not isinstance(after, int) or isinstance(after, bool) or stamp.tzinfo is None:
        raise InvalidArgument.fields(
            [FieldViolation(path, "does not belong to this request; other fields must not change between pages")],
            reason=Reason.INVALID_PAGE_TOKEN,
        )
    return stamp, after


def _scope_tag(scope: str) -> str:
    return hashlib.sha256(scope.encode()).hexdigest()[:16]

