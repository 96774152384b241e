"""Connection and retry settings, and the channel they open."""

from __future__ import annotations

import ipaddress
import os
import pathlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import grpc

PathLike = str | os.PathLike[str]
DEFAULT_MAX_MESSAGE_BYTES = 32 * 1024 * 1024  # the services' default


@dataclass(frozen=True)
class TlsConfig:
    """TLS for the channel: trust ``ca`` (PEM; None uses the system roots),
    and with ``cert`` and ``key`` present a client certificate (mutual TLS,
    which the context service uses as the caller's identity).

    ``server_name`` overrides the name checked on the server certificate
    (for example "localhost" for the dev certificates of ``agentctx up``
    when connecting by IP address).
    """

    ca: PathLike | None = None
    cert: PathLike | None = None
    key: PathLike | None = None
    server_name: str | None = None

    def __post_init__(self) -> None:
        if (self.cert is None) != (self.key is None):
            raise ValueError("TlsConfig needs both cert and key for mutual TLS, or neither")

    def read(self) -> tuple[bytes | None, bytes | None, bytes | None]:
        """(root certificates, private key, certificate chain) as PEM bytes."""
        return _pem(self.ca, "CA"), _pem(self.key, "key"), _pem(self.cert, "certificate")


def _pem(path: PathLike | None, what: str) -> bytes | None:
    if path is None:
        return None
    data = pathlib.Path(path).read_bytes()
    if b"-----BEGIN" not in data:
        raise ValueError(f"TLS {what} file {os.fspath(path)} is not PEM")
    return data


@dataclass(frozen=True)
class RetryPolicy:
    """When the client sends a call again by itself.

    Only calls that are safe to repeat are retried: Generate and
    StreamGenerate (the latter only before its first chunk) with the same
    event ids, reply id and invocation id; AppendEvent with the same event
    id; and the reads (GetSession, ListSessions, ListEvents, BuildContext).
    A call is retried on UNAVAILABLE, and on RESOURCE_EXHAUSTED when the
    server attached RetryInfo (a rate limit that will pass, not a budget).

    The wait before attempt n+1 is the server's RetryInfo delay when given,
    otherwise ``initial_backoff * multiplier**(n-1)`` capped at
    ``max_backoff``, scaled by a random factor in [1 - jitter, 1]. No attempt
    starts that the call's overall timeout could not cover: the error is
    raised instead. ``RetryPolicy(max_attempts=1)`` turns retries off.
    """

    max_attempts: int = 5
    initial_backoff: float = 0.2
    max_backoff: float = 5.0
    multiplier: float = 2.0
    jitter: float = 0.5

    def __post_init__(self) -> None:
        if self.max_attempts < 1:
            raise ValueError("max_attempts must be at least 1")
        if self.initial_backoff < 0 or self.max_backoff < 0 or self.multiplier < 1:
            raise ValueError("backoffs must be non-negative and multiplier at least 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")


def open_channel(target: str, *, tls: TlsConfig | None = None, insecure_loopback: bool = False,
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES,
                 options: Sequence[tuple[str, Any]] = ()) -> grpc.aio.Channel:
    """The channel ``connect`` (and ``ToolContext.connect``) uses: TLS, or
    plaintext to a loopback address with ``insecure_loopback``."""
    channel_options: list[tuple[str, Any]] = [
        ("grpc.max_receive_message_length", max_message_bytes),
        ("grpc.max_send_message_length", max_message_bytes),
    ]
    if tls is not None:
        root, key, chain = tls.read()
        creds = grpc.ssl_channel_credentials(root_certificates=root, private_key=key, certificate_chain=chain)
        if tls.server_name:
            channel_options.append(("grpc.ssl_target_name_override", tls.server_name))
        return grpc.aio.secure_channel(target, creds, options=[*channel_options, *options])
    if insecure_loopback:
        if not _is_loopback(target):
            raise ValueError(f"insecure_loopback needs a loopback target (127.0.0.1, localhost, [::1]), not {target}")
        return grpc.aio.insecure_channel(target, options=[*channel_options, *options])
    raise ValueError("connect needs tls=TlsConfig(...), or insecure_loopback=True for a local plaintext server")


def _is_loopback(target: str) -> bool:
    for scheme in ("dns:///", "ipv4:", "ipv6:"):
        target = target.removeprefix(scheme)
    if target.startswith("["):
        host = target[1:].split("]", 1)[0]
    else:
        host = target.rsplit(":", 1)[0] if target.count(":") == 1 else target
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False
