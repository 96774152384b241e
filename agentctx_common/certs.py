"""Development certificates: a CA and the leaf certificates the embedded
default needs, made with ``cryptography``.

Identities are SPIFFE-style URI SANs (``spiffe://agentctx.local/...``); server
certificates also carry ``localhost`` and ``127.0.0.1`` so clients can verify
them on loopback. These are for development and tests, not production.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import pathlib
from dataclasses import dataclass

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from agentctx_common.files import PRIVATE_FILE, PUBLIC_FILE, make_dir, replace_file, tighten_file

TRUST_DOMAIN = "agentctx.local"
CONTEXT_SERVICE_ID = f"spiffe://{TRUST_DOMAIN}/context-service"
CACHE_SERVICE_ID = f"spiffe://{TRUST_DOMAIN}/cache-service"
SAMPLE_AGENT_ID = f"spiffe://{TRUST_DOMAIN}/agent/sample"


@dataclass(frozen=True)
class Leaf:
    """One certificate to issue: file stem, SPIFFE id and its uses."""

    stem: str
    spiffe_id: str
    server: bool
    client: bool


# What `agentctx certs init` writes, besides ca.pem / ca.key.
DEV_LEAVES = (
    Leaf("context-server", CONTEXT_SERVICE_ID, server=True, client=False),
    Leaf("cache-server", CACHE_SERVICE_ID, server=True, client=False),
    Leaf("context-client", CONTEXT_SERVICE_ID, server=False, client=True),
    Leaf("agent-client", SAMPLE_AGENT_ID, server=False, client=True),
)


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _name(common_name: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, "agentctx dev"),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _pem_key(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def make_ca(common_name: str = "agentctx dev CA", days: int = 825) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(common_name))
        .issuer_name(_name(common_name))
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True, content_commitment=False, key_encipherment=False,
                data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                encipher_only=False, decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert, key


def issue(
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    leaf: Leaf,
    days: int = 397,
) -> tuple[x509.Certificate, ec.EllipticCurvePrivateKey]:
    key = _key()
    now = dt.datetime.now(dt.UTC)
    sans: list[x509.GeneralName] = [x509.UniformResourceIdentifier(leaf.spiffe_id)]
    if leaf.server:
        sans += [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    usages = ([ExtendedKeyUsageOID.SERVER_AUTH] if leaf.server else []) + (
        [ExtendedKeyUsageOID.CLIENT_AUTH] if leaf.client else []
    )
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name(leaf.stem))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + dt.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName(sans), critical=False)
        .add_extension(x509.ExtendedKeyUsage(usages), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return cert, key


def _write(path: pathlib.Path, data: bytes, private: bool = False) -> None:
    # A key is 0600 from its first byte, a certificate 0644 (never writable
    # by others), whatever the umask; a replaced file gets a new inode.
    replace_file(path, data, PRIVATE_FILE if private else PUBLIC_FILE)


def init_dev_certs(directory: pathlib.Path, *, force: bool = False, leaves: tuple[Leaf, ...] = DEV_LEAVES) -> list[pathlib.Path]:
    """Writes ca.pem/ca.key and ``{stem}.pem``/``{stem}.key`` for each leaf.

    Existing files are kept unless ``force``; returns the files written.
    """
    # 0755 when made here (the certificates are public, the keys 0600);
    # an existing directory is the user's.
    make_dir(directory, 0o755, tighten=False)
    ca_pem, ca_key_path = directory / "ca.pem", directory / "ca.key"
    if ca_pem.exists() and ca_key_path.exists() and not force:
        ca_cert = x509.load_pem_x509_certificate(ca_pem.read_bytes())
        ca_key = serialization.load_pem_private_key(ca_key_path.read_bytes(), password=None)
        assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
        written: list[pathlib.Path] = []
    else:
        ca_cert, ca_key = make_ca()
        _write(ca_pem, ca_cert.public_bytes(serialization.Encoding.PEM))
        _write(ca_key_path, _pem_key(ca_key), private=True)
        written = [ca_pem, ca_key_path]
        force = True  # leaves of an old CA would no longer verify
    for leaf in leaves:
        cert_path, key_path = directory / f"{leaf.stem}.pem", directory / f"{leaf.stem}.key"
        if cert_path.exists() and key_path.exists() and not force:
            continue
        cert, key = issue(ca_cert, ca_key, leaf)
        _write(cert_path, cert.public_bytes(serialization.Encoding.PEM))
        _write(key_path, _pem_key(key), private=True)
        written += [cert_path, key_path]
    for stem in ("ca", *(leaf.stem for leaf in leaves)):  # kept ones written by an older version
        tighten_file(directory / f"{stem}.pem", PUBLIC_FILE)
        tighten_file(directory / f"{stem}.key", PRIVATE_FILE)
    return written
