"""TLS credentials and caller identity.

A caller's identity is the set of URI and DNS subject alternative names of
its verified client certificate (SPIFFE ids are URI SANs).
"""

from __future__ import annotations

import pathlib
from typing import Any

import grpc
from cryptography import x509
from cryptography.exceptions import UnsupportedAlgorithm
from cryptography.hazmat.primitives import serialization

from agentctx_common.errors import ConfigError


def read_pem(path: pathlib.Path | str, what: str) -> bytes:
    """Reads a PEM file or raises ConfigError naming the file."""
    p = pathlib.Path(path)
    try:
        data = p.read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{what} file not found: {p} (run `agentctx certs init --dir DIR`)") from None
    except IsADirectoryError:
        raise ConfigError(f"{what} {p} is a directory, not a PEM file") from None
    except OSError as exc:
        raise ConfigError(f"cannot read {what} file {p}: {exc.strerror}") from None
    if b"-----BEGIN" not in data:
        raise ConfigError(f"{what} file {p} is not PEM")
    return data


def read_certificates(path: pathlib.Path | str, what: str) -> bytes:
    """A PEM file of one or more X.509 certificates, checked; ConfigError
    naming the file otherwise (a key given as a certificate, say)."""
    data = read_pem(path, what)
    try:
        x509.load_pem_x509_certificates(data)
    except ValueError:
        hint = " (it holds a private key: swapped with the key file?)" if b"PRIVATE KEY-----" in data else ""
        raise ConfigError(f"{what} file {path} holds no PEM certificate{hint}") from None
    return data


def read_key_pair(
    cert: pathlib.Path | str, key: pathlib.Path | str, cert_what: str = "TLS certificate", key_what: str = "TLS key"
) -> tuple[bytes, bytes]:
    """(certificate chain, private key) PEM, checked to belong together: the
    key unencrypted and matching the first certificate's public key."""
    chain = read_certificates(cert, cert_what)
    key_data = read_pem(key, key_what)
    try:
        private_key = serialization.load_pem_private_key(key_data, password=None)
    except TypeError:
        raise ConfigError(f"{key_what} file {key} is encrypted; give an unencrypted key") from None
    except (ValueError, UnsupportedAlgorithm):
        hint = " (it holds a certificate: swapped with the certificate file?)" if b"CERTIFICATE-----" in key_data else ""
        raise ConfigError(f"{key_what} file {key} holds no PEM private key{hint}") from None
    leaf = x509.load_pem_x509_certificates(chain)[0]
    spki = serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    if private_key.public_key().public_bytes(*spki) != leaf.public_key().public_bytes(*spki):
        raise ConfigError(f"{key_what} file {key} does not match the certificate in {cert_what} file {cert}")
    return chain, key_data


def server_credentials(
    cert: pathlib.Path | str,
    key: pathlib.Path | str,
    client_ca: pathlib.Path | str | None = None,
    require_client_cert: bool = False,
) -> grpc.ServerCredentials:
    """Server TLS. With ``require_client_cert`` a client certificate is
    requested, verified against ``client_ca`` and required. gRPC Python has no
    "request but do not require" mode: without it no certificate is asked for,
    so a client CA would verify nothing (ServerSettings refuses that)."""
    if require_client_cert and client_ca is None:
        raise ConfigError("requiring client certificates needs a client CA file")
    chain, private_key = read_key_pair(cert, key, "tls_cert", "tls_key")
    return grpc.ssl_server_credentials(
        [(private_key, chain)],
        root_certificates=read_certificates(client_ca, "tls_client_ca") if client_ca else None,
        require_client_auth=require_client_cert,
    )


def channel_credentials(
    ca: pathlib.Path | str,
    cert: pathlib.Path | str | None = None,
    key: pathlib.Path | str | None = None,
    *,
    names: tuple[str, str, str] = ("CA", "TLS certificate", "TLS key"),
) -> grpc.ChannelCredentials:
    """Client TLS trusting ``ca``; with cert and key, mutual TLS. Every file
    is checked now (``names`` label them in the ConfigError): gRPC would only
    fail at the first call's handshake, without saying which file."""
    if (cert is None) != (key is None):
        raise ConfigError(f"{names[1]} and {names[2]} go together: set both or neither")
    roots = read_certificates(ca, names[0])
    chain, private_key = read_key_pair(cert, key, names[1], names[2]) if cert and key else (None, None)
    return grpc.ssl_channel_credentials(root_certificates=roots, private_key=private_key, certificate_chain=chain)


def peer_identities(context: grpc.aio.ServicerContext[Any, Any]) -> frozenset[str]:
    """URI and DNS SANs of the caller's verified certificate; empty without
    one (plaintext, or TLS without a client certificate)."""
    auth = context.auth_context() or {}
    values = auth.get("x509_subject_alternative_name", [])
    return frozenset(v.decode() if isinstance(v, bytes) else str(v) for v in values)
