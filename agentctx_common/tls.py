"""TLS credentials and caller identity.

A caller's identity is the set of URI and DNS subject alternative names of
its verified client certificate (SPIFFE ids are URI SANs).
"""

from __future__ import annotations

import pathlib

import grpc

from agentctx_common.errors import ConfigError


def read_pem(path: pathlib.Path | str, what: str) -> bytes:
    """Reads a PEM file or raises ConfigError naming the file."""
    p = pathlib.Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} file not found: {p} (run `agentctx certs init --dir DIR`)") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {p}: {exc.strerror}") from None
    if b"-----BEGIN" not in data:
        raise ConfigError(f"{what} file {p} is not PEM")
    return data


def server_credentials(
    cert: pathlib.Path | str,
    key: pathlib.Path | str,
    client_ca: pathlib.Path | str | None = None,
    require_client_cert: bool = False,
) -> grpc.ServerCredentials:
    """Server TLS; with ``client_ca`` client certificates are verified against
    it, and with ``require_client_cert`` a handshake without one fails."""
    if require_client_cert and client_ca is None:
        raise ConfigError("requiring client certificates needs a client CA file")
    return grpc.ssl_server_credentials(
        [(read_pem(key, "TLS key"), read_pem(cert, "TLS certificate"))],
        root_certificates=read_pem(client_ca, "client CA") if client_ca else None,
        require_client_auth=require_client_cert,
    )


def channel_credentials(
    ca: pathlib.Path | str,
    cert: pathlib.Path | str | None = None,
    key: pathlib.Path | str | None = None,
) -> grpc.ChannelCredentials:
    """Client TLS trusting ``ca``; with cert and key, mutual TLS."""
    return grpc.ssl_channel_credentials(
        root_certificates=read_pem(ca, "CA"),
        private_key=read_pem(key, "TLS key") if key else None,
        certificate_chain=read_pem(cert, "TLS certificate") if cert else None,
    )


def peer_identities(context: grpc.aio.ServicerContext) -> frozenset[str]:
    """URI and DNS SANs of the caller's verified certificate; empty without
    one (plaintext, or TLS without a client certificate)."""
    auth = context.auth_context() or {}
    values = auth.get("x509_subject_alternative_name", [])
    return frozenset(v.decode() if isinstance(v, bytes) else str(v) for v in values)
