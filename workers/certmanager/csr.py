"""What the node asks the cluster to sign: a key, a PKCS#10 request and the
certificates.k8s.io/v1 CertificateSigningRequest around it, as the kubelet makes them.

A new ECDSA P-256 key each time (``EC PRIVATE KEY``); subject CN ``system:node:<node>``,
O ``system:nodes``, no SANs; signer ``kubernetes.io/kube-apiserver-client-kubelet``;
usages digital signature, key encipherment, client auth. The bootstrap request is named
``node-csr-<digest>`` (base64url of a SHA-512/256 digest of the public key, subject and
usages, so a retry with the same key finds its own request); a renewal uses
``generateName: csr-``.
"""

from __future__ import annotations

import base64
import hashlib
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

CLIENT_SIGNER = "kubernetes.io/kube-apiserver-client-kubelet"
CLIENT_USAGES = ("digital signature", "key encipherment", "client auth")
NODES_GROUP = "system:nodes"
BOOTSTRAP_PREFIX = "node-csr-"
RENEWAL_PREFIX = "csr-"


@dataclass(frozen=True, slots=True)
class Request:
    node_name: str
    key_pem: bytes  # the private key, EC PRIVATE KEY PEM
    csr_pem: bytes  # the CERTIFICATE REQUEST PEM

    @property
    def common_name(self) -> str:
        return f"system:node:{self.node_name}"


def new_key() -> bytes:
    key = ec.generate_private_key(ec.SECP256R1())
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )


def request_for(node_name: str, key_pem: bytes) -> Request:
    key = serialization.load_pem_private_key(key_pem, None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the client key is not an ECDSA key")
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, NODES_GROUP),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node_name}"),
        ]
    )
    csr = x509.CertificateSigningRequestBuilder().subject_name(subject).sign(key, hashes.SHA256())
    return Request(node_name, key_pem, csr.public_bytes(serialization.Encoding.PEM))


def bootstrap_name(request: Request) -> str:
    """``node-csr-<digest>``: the same key and subject always give the same name."""
    key = serialization.load_pem_private_key(request.key_pem, None)
    public = key.public_key().public_bytes(
        serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    digest = hashlib.new("sha512_256")
    for part in (public, request.common_name.encode(), NODES_GROUP.encode(), *_usages()):
        digest.update(len(part).to_bytes(4, "big") + part)
    return BOOTSTRAP_PREFIX + base64.urlsafe_b64encode(digest.digest()).rstrip(b"=").decode()


def _usages() -> list[bytes]:
    return [usage.encode() for usage in sorted(CLIENT_USAGES)]


def body(request: Request, name: str) -> dict[str, Any]:
    """The CertificateSigningRequest to create: ``name`` fixed, or a renewal's generateName."""
    metadata = {"name": name} if name else {"generateName": RENEWAL_PREFIX}
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": metadata,
        "spec": {
            "request": base64.b64encode(request.csr_pem).decode(),
            "signerName": CLIENT_SIGNER,
            "usages": list(CLIENT_USAGES),
        },
    }
