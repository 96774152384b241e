"""Provider resource names at rest in Redis: AES-256-GCM, the entry id as
associated data (a ciphertext moved to another entry does not decrypt).
The key (``redis_encryption_key``) is held by the cache service only, so
a reader of Redis learns no resource name."""

from __future__ import annotations

import base64
import os

from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from cache_service.domain.model import ResourceName

_NONCE = 12


class NameCipher:
    def __init__(self, key: bytes) -> None:
        if len(key) != 32:
            raise ValueError("the name encryption key must be 32 bytes")
        self._aead = AESGCM(key)

    @classmethod
    def from_base64(cls, text: str) -> NameCipher:
        return cls(base64.b64decode(text, validate=True))

    def seal(self, name: ResourceName, entry_id: str) -> str:
        nonce = os.urandom(_NONCE)
        sealed = self._aead.encrypt(nonce, name.reveal().encode(), entry_id.encode())
        return base64.b64encode(nonce + sealed).decode("ascii")

    def open(self, sealed: str, entry_id: str) -> ResourceName:
        """Raises ValueError on a ciphertext that is not ours (or not this entry's)."""
        try:
            raw = base64.b64decode(sealed, validate=True)
            return ResourceName(self._aead.decrypt(raw[:_NONCE], raw[_NONCE:], entry_id.encode()).decode())
        except (InvalidTag, ValueError) as exc:
            raise ValueError("a stored resource name does not decrypt") from exc
