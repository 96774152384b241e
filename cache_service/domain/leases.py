"""Opaque lease tokens: HMAC-SHA256 signed with a per-process secret.

A lease carries the entry id, its generation, the scope fingerprint, a lease
id, an expiry and the state the caller saw (CREATED/HIT/GROWN). It never
carries a provider resource name. The signature makes it unforgeable; the
scope fingerprint binds it to its scope; the generation makes a lease on an
invalidated, evicted, expired or re-created entry worthless. A lease from an
earlier process (another boot id) is UNKNOWN rather than MALFORMED: the
secret died with that process.

Format: ``v1.<base64url payload>.<base64url mac>``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
from dataclasses import dataclass

_VERSION = "v1"
_MAX_LEASE_CHARS = 1024


class LeaseRejected(Exception):
    """A lease that cannot be used. ``invalid_reason`` is MALFORMED, UNKNOWN,
    EXPIRED or INVALIDATED (the values of ResolveLeaseResponse)."""

    def __init__(self, invalid_reason: str) -> None:
        super().__init__(f"lease is not valid: {invalid_reason}")
        self.invalid_reason = invalid_reason


@dataclass(frozen=True)
class LeaseClaims:
    boot: str
    entry_id: str
    generation: int
    scope_fingerprint: str
    lease_id: str
    expires_at: float  # wall clock seconds
    state: str  # CREATED, HIT or GROWN


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class LeaseSigner:
    def __init__(self, secret: bytes | None = None, boot: str | None = None) -> None:
        self._secret = secret or secrets.token_bytes(32)
        self.boot = boot or secrets.token_hex(4)

    def new_lease_id(self) -> str:
        return secrets.token_hex(8)

    def sign(self, claims: LeaseClaims) -> str:
        payload = json.dumps(
            {"b": claims.boot, "e": claims.entry_id, "g": claims.generation, "s": claims.scope_fingerprint,
             "l": claims.lease_id, "x": round(claims.expires_at, 3), "t": claims.state},
            separators=(",", ":"), sort_keys=True,
        ).encode()
        body = f"{_VERSION}.{_b64(payload)}"
        return f"{body}.{_b64(self._mac(body))}"

    def verify(self, token: str) -> LeaseClaims:
        """The claims of a genuine lease of this process; raises LeaseRejected."""
        if not token or len(token) > _MAX_LEASE_CHARS or token.count(".") != 2:
            raise LeaseRejected("MALFORMED")
        version, payload_b64, mac_b64 = token.split(".")
        if version != _VERSION:
            raise LeaseRejected("MALFORMED")
        try:
            payload = json.loads(_unb64(payload_b64))
            mac = _unb64(mac_b64)
            claims = LeaseClaims(
                boot=str(payload["b"]), entry_id=str(payload["e"]), generation=int(payload["g"]),
                scope_fingerprint=str(payload["s"]), lease_id=str(payload["l"]),
                expires_at=float(payload["x"]), state=str(payload["t"]),
            )
        except (ValueError, KeyError, TypeError, binascii.Error):
            raise LeaseRejected("MALFORMED") from None
        if not hmac.compare_digest(mac, self._mac(f"{version}.{payload_b64}")):
            # A lease signed by an earlier process cannot be checked any more.
            raise LeaseRejected("UNKNOWN" if claims.boot != self.boot else "MALFORMED")
        return claims

    def _mac(self, body: str) -> bytes:
        return hmac.new(self._secret, body.encode(), hashlib.sha256).digest()
