"""Opaque lease tokens: HMAC-SHA256 signed with a per-process secret.

A lease carries the entry id, its generation, the scope fingerprint, a lease
id, an expiry and the state the caller saw (CREATED/HIT/GROWN). It never
carries a provider resource name. The signature makes it unforgeable; the
scope fingerprint binds it to its scope; the generation makes a lease on an
invalidated, evicted, expired or re-created entry worthless. A lease from an
earlier process (another boot id) is UNKNOWN rather than MALFORMED: the
secret died with that process.

Format: ``v1.<base64url payload>.<base64url mac>``. The payload's ``b``
names the signing key (``LeaseClaims.boot``); keys come from a KeySource
(domain.ports): ``ProcessKey`` is one random key per process, whose id is
the boot id (only when no key set is configured and no Redis); ``KeySet``
is the configured set replicas share (``lease_keys``), holding retired keys
too, so leases verify on every replica and across a rotation.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets

from cache_service.domain.model import LeaseClaims
from cache_service.domain.ports import KeySource, LeaseRejected, SigningKey

_VERSION = "v1"
_MAX_LEASE_CHARS = 1024


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _unb64(text: str) -> bytes:
    return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))


class ProcessKey:
    """One signing key, made at start: leases die with the process."""

    def __init__(self, secret: bytes | None = None, key_id: str | None = None) -> None:
        self._key = SigningKey(key_id or secrets.token_hex(4), secret or secrets.token_bytes(32))

    def current(self) -> SigningKey:
        return self._key

    def get(self, key_id: str) -> SigningKey | None:
        return self._key if key_id == self._key.key_id else None


class KeySet:
    """Configured keys: new leases are signed with the active one; a lease
    signed with any key still in the set verifies."""

    def __init__(self, keys: list[SigningKey], active: str) -> None:
        self._keys = {k.key_id: k for k in keys}
        if active not in self._keys:
            raise ValueError("the active lease key is not in the key set")
        self._active = self._keys[active]

    def current(self) -> SigningKey:
        return self._active

    def get(self, key_id: str) -> SigningKey | None:
        return self._keys.get(key_id)


class LeaseSigner:
    """The LeaseCodec: signs with the source's current key, verifies with the
    key a lease names."""

    def __init__(self, secret: bytes | None = None, boot: str | None = None, *, keys: KeySource | None = None) -> None:
        self._keys: KeySource = keys or ProcessKey(secret, boot)

    @property
    def boot(self) -> str:
        return self._keys.current().key_id

    def new_lease_id(self) -> str:
        return secrets.token_hex(8)

    def sign(self, claims: LeaseClaims) -> str:
        payload = json.dumps(
            {"b": claims.boot, "e": claims.entry_id, "g": claims.generation, "s": claims.scope_fingerprint,
             "l": claims.lease_id, "x": round(claims.expires_at, 3), "t": claims.state},
            separators=(",", ":"), sort_keys=True,
        ).encode()
        body = f"{_VERSION}.{_b64(payload)}"
        return f"{body}.{_b64(_mac(self._keys.current().secret, body))}"

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
        key = self._keys.get(claims.boot)
        if key is None:
            # Signed by a key we no longer hold (an earlier process): it cannot be checked any more.
            raise LeaseRejected("UNKNOWN")
        if not hmac.compare_digest(mac, _mac(key.secret, f"{version}.{payload_b64}")):
            raise LeaseRejected("MALFORMED")
        return claims


def _mac(secret: bytes, body: str) -> bytes:
    return hmac.new(secret, body.encode(), hashlib.sha256).digest()
