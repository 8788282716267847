"""The kubelet's self-signed serving certificate, when no ``tlsCertFile`` is configured.

As client-go's ``certutil.GenerateSelfSignedCertKey(hostname)`` makes it: a CA named
``<host>-ca@<unix time>`` and a serving certificate named ``<host>@<unix time>`` for the
host (a DNS name, or an IP address), both RSA 2048, valid from an hour ago for a year;
``kubelet.crt`` holds the certificate then the CA, ``kubelet.key`` the key (PKCS#1, mode
0600). Files that exist and can be read are used as they are, as the kubelet does.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import os
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

log = logging.getLogger(__name__)

VALIDITY = dt.timedelta(days=365)
SKEW = dt.timedelta(hours=1)  # valid an hour early, against clock skew


@dataclass(frozen=True, slots=True)
class CertPair:
    cert_file: Path
    key_file: Path


def ensure(cert_dir: Path, host: str) -> CertPair:
    """``<cert_dir>/kubelet.crt`` and ``kubelet.key``, made for ``host`` if missing."""
    pair = CertPair(cert_dir / "kubelet.crt", cert_dir / "kubelet.key")
    if _readable(pair):
        return pair
    cert_pem, key_pem = generate(host)
    cert_dir.mkdir(parents=True, exist_ok=True, mode=0o755)
    _write(pair.key_file, key_pem, 0o600)
    _write(pair.cert_file, cert_pem, 0o644)
    log.info("wrote self-signed certificate cert=%s host=%s", pair.cert_file, host)
    return pair


def _readable(pair: CertPair) -> bool:
    try:
        x509.load_pem_x509_certificate(pair.cert_file.read_bytes())
        # parsed, not checked: OpenSSL matches it to the certificate as it loads the pair;
        # checking an RSA key costs ~40 ms of CPU, at every start of the http worker
        serialization.load_pem_private_key(
            pair.key_file.read_bytes(), None, unsafe_skip_rsa_key_validation=True
        )
    except (OSError, ValueError, TypeError):
        return False
    return True


def _write(path: Path, data: bytes, mode: int) -> None:
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, mode)
    with os.fdopen(fd, "wb") as out:
        out.write(data)
    os.replace(tmp, path)


def generate(host: str, now: dt.datetime | None = None) -> tuple[bytes, bytes]:
    """PEM of the serving certificate followed by its CA, and PEM of the key."""
    start = (now or dt.datetime.now(dt.UTC)) - SKEW
    stamp = int((start + SKEW).timestamp())
    ca_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}-ca@{stamp}")])
    ca = (
        _builder(ca_name, ca_name, ca_key.public_key(), 1, start)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=True), critical=True)
        .sign(ca_key, hashes.SHA256())
    )
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@{stamp}")])
    cert = (
        _builder(name, ca_name, key.public_key(), 2, start)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(cert_sign=False), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(x509.SubjectAlternativeName([_alt_name(host)]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    key_pem = key.private_bytes(
        pem, serialization.PrivateFormat.TraditionalOpenSSL, serialization.NoEncryption()
    )
    return cert.public_bytes(pem) + ca.public_bytes(pem), key_pem


def _builder(
    subject: x509.Name,
    issuer: x509.Name,
    public_key: rsa.RSAPublicKey,
    serial: int,
    start: dt.datetime,
) -> x509.CertificateBuilder:
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(issuer)
        .public_key(public_key)
        .serial_number(serial)
        .not_valid_before(start)
        .not_valid_after(start + VALIDITY)
    )


def _usage(cert_sign: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=True,
        key_encipherment=True,
        key_cert_sign=cert_sign,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        crl_sign=False,
        encipher_only=False,
        decipher_only=False,
    )


def _alt_name(host: str) -> x509.GeneralName:
    try:
        return x509.IPAddress(ipaddress.ip_address(host))
    except ValueError:
        return x509.DNSName(host)
