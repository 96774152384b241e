"""Least-authority tool tokens (see docs/ARCHITECTURE.md, "Tool context").

A session's config declares, per tool name, the capabilities that tool's
calls get; ``identity`` is always included. Each function call of a stored
model event gets one token: its claims (app, user, session, the event and
the call, the tool, its capabilities, a deadline and a token id) signed
with HMAC-SHA256 under a key of a configured key set (``KeySet``), so any
replica verifies it, and a key removed from the set (rotated out) makes its
tokens worthless. The claims are the whole authority: the token id names
the call's row in the store (``ports.ToolCalls``), whose state (open,
collected, dropped) is the revocation every replica sees.

Format: ``tt1.<base64url payload>.<base64url mac>``; the MAC is checked
before the payload is parsed.
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import hashlib
import hmac
import json
import secrets
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from agentctx_common.errors import FieldViolation, PermissionDenied, Unauthenticated
from agentctx_common.reasons import Reason
from context_service.domain.config import ToolDeclaration
from context_service.domain.model import Part, SessionKey
from context_service.domain.session_records import StateDelta

IDENTITY = "identity"
# The declaration set, in a fixed order (a token carries them as a bit mask).
# ``state_write`` is agentctx's own: a staged state delta, collected with the
# function response, where erlang_adk's tools return their state changes.
CAPABILITIES: tuple[str, ...] = (
    IDENTITY, "state_read", "state_write", "artifact_put", "artifact_get", "artifact_list",
    "artifact_list_versions", "artifact_delete", "artifact_attach", "memory_search", "memory_add",
    "memory_delete",
)
_BIT = {name: 1 << i for i, name in enumerate(CAPABILITIES)}
TOKEN_METADATA_KEY = "agentctx-tool-token"
_VERSION = "tt1"
_MAX_TOKEN_CHARS = 2048
MAX_TOOLS = 256


def declaration_violations(tools: Sequence[ToolDeclaration], field: str = "config.tools") -> list[FieldViolation]:
    """A violation for each unknown capability, duplicate or
    empty tool name."""
    violations: list[FieldViolation] = []
    if len(tools) > MAX_TOOLS:
        violations.append(FieldViolation(field, f"at most {MAX_TOOLS} tool declarations"))
    seen: set[str] = set()
    for i, tool in enumerate(tools):
        if not tool.name or len(tool.name) > 128:
            violations.append(FieldViolation(f"{field}[{i}].name", "a tool name of 1-128 characters is required"))
        elif tool.name in seen:
            violations.append(FieldViolation(f"{field}[{i}].name", "the tool is declared twice"))
        seen.add(tool.name)
        for j, capability in enumerate(tool.capabilities):
            if capability not in _BIT:
                violations.append(FieldViolation(f"{field}[{i}].capabilities[{j}]",
                                   f"unknown capability; one of {', '.join(CAPABILITIES)}"))
    return violations


def mask_of(capabilities: Iterable[str]) -> int:
    """The bit mask of known capabilities, ``identity`` always set."""
    mask = _BIT[IDENTITY]
    for name in capabilities:
        mask |= _BIT.get(name, 0)
    return mask


def names_of(mask: int) -> tuple[str, ...]:
    return tuple(name for name in CAPABILITIES if mask & _BIT[name])


def declared_mask(tools: Sequence[ToolDeclaration], tool: str) -> int:
    """What a call of ``tool`` may touch: its declaration, or identity only."""
    for declaration in tools:
        if declaration.name == tool:
            return mask_of(declaration.capabilities)
    return _BIT[IDENTITY]


@dataclass(frozen=True)
class ToolClaims:
    key_id: str
    token_id: str
    app: str
    user: str
    session: str
    event_id: str
    call_id: str
    tool: str
    capabilities: int  # a mask_of
    expires_at: float  # epoch seconds

    @property
    def session_key(self) -> SessionKey:
        return SessionKey(self.app, self.user, self.session)

    @property
    def capability_names(self) -> tuple[str, ...]:
        return names_of(self.capabilities)

    def require(self, capability: str) -> None:
        """PERMISSION_DENIED TOOL_CAPABILITY_MISSING unless declared."""
        if not self.capabilities & _BIT[capability]:
            raise PermissionDenied(
                f"the tool's declaration does not grant {capability}", reason=Reason.TOOL_CAPABILITY_MISSING,
                metadata={"capability": capability, "tool": self.tool},
            )

    def check_live(self, now: float) -> None:
        """PERMISSION_DENIED TOOL_TOKEN_EXPIRED past the deadline."""
        if now >= self.expires_at:
            raise PermissionDenied("the tool token has expired", reason=Reason.TOOL_TOKEN_EXPIRED)


@dataclass
class Staged:
    """What a call staged: a state delta and attachments (Part JSON)."""

    delta: StateDelta = field(default_factory=StateDelta)
    attachments: list[dict[str, Any]] = field(default_factory=list)


@dataclass(frozen=True)
class OpenCall:
    """A minted token's row: its claims and deadline."""

    claims: ToolClaims
    expire_time: dt.datetime


def merge_delta(base: StateDelta | None, more: StateDelta) -> StateDelta:
    """``more``'s keys over ``base``'s, scope by scope."""
    if base is None:
        return more
    return StateDelta({**base.session, **more.session}, {**base.user, **more.user}, {**base.app, **more.app})


def response_ids(parts: Sequence[Part]) -> list[str]:
    """The function-call ids the parts answer."""
    return [p.function_response.id for p in parts if p.function_response is not None and p.function_response.id]


@dataclass(frozen=True)
class SigningKey:
    key_id: str
    secret: bytes


class KeySet:
    """The keys tokens verify with; new ones are signed with the active one.
    Without configured keys: one random key per process (tokens then verify
    on this replica only, and die with it)."""

    def __init__(self, keys: Sequence[SigningKey] = (), active: str | None = None) -> None:
        if not keys:
            keys = [SigningKey("p" + secrets.token_hex(4), secrets.token_bytes(32))]
            active = keys[0].key_id
        self._keys = {k.key_id: k for k in keys}
        if active not in self._keys:
            raise ValueError("the active tool token key is not in the key set")
        self.active = self._keys[active]

    def get(self, key_id: str) -> SigningKey | None:
        return self._keys.get(key_id)


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


def _invalid() -> Unauthenticated:
    return Unauthenticated("the tool token is not valid", reason=Reason.TOOL_TOKEN_INVALID)


class ToolTokenCodec:
    def __init__(self, keys: KeySet) -> None:
        self._keys = keys

    @staticmethod
    def new_token_id() -> str:
        return secrets.token_hex(12)

    def sign(self, claims: ToolClaims) -> str:
        key = self._keys.active
        payload = json.dumps(
            {"k": key.key_id, "j": claims.token_id, "a": claims.app, "u": claims.user, "s": claims.session,
             "e": claims.event_id, "c": claims.call_id, "t": claims.tool, "p": claims.capabilities,
             "x": round(claims.expires_at, 3)},
            separators=(",", ":"), sort_keys=True,
        ).encode()
        body = f"{_VERSION}.{_b64(payload)}"
        return f"{body}.{_b64(_mac(key.secret, body))}"

    def verify(self, token: str) -> ToolClaims:
        """The claims of a genuine token; UNAUTHENTICATED TOOL_TOKEN_INVALID
        for anything else (malformed, truncated, forged, unknown key)."""
        if not token or len(token) > _MAX_TOKEN_CHARS or token.count(".") != 2:
            raise _invalid()
        version, payload_b64, mac_b64 = token.split(".")
        if version != _VERSION:
            raise _invalid()
        try:
            payload_bytes = _unb64(payload_b64)
            mac = _unb64(mac_b64)
            if _b64(payload_bytes) != payload_b64 or _b64(mac) != mac_b64:
                raise ValueError("not canonical base64url")  # one spelling per token
            key_id = json.loads(payload_bytes)["k"]
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise _invalid() from None
        key = self._keys.get(key_id) if isinstance(key_id, str) else None
        if key is None or not hmac.compare_digest(mac, _mac(key.secret, f"{version}.{payload_b64}")):
            raise _invalid()
        payload = json.loads(payload_bytes)
        try:
            return ToolClaims(
                key_id=key_id, token_id=str(payload["j"]), app=str(payload["a"]), user=str(payload["u"]),
                session=str(payload["s"]), event_id=str(payload["e"]), call_id=str(payload["c"]),
                tool=str(payload["t"]), capabilities=int(payload["p"]), expires_at=float(payload["x"]),
            )
        except (ValueError, KeyError, TypeError):
            raise _invalid() from None


def _mac(secret: bytes, body: str) -> bytes:
    return hmac.new(secret, body.encode(), hashlib.sha256).digest()
