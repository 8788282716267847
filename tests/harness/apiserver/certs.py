"""The test cluster's PKI: a CA, the serving cert, client certs, kubeconfigs, the SA key.

Everything is written under one directory (``Pki(base_dir)``)::

    ca.crt ca.key                  the cluster CA (also what kube-root-ca.crt publishes)
    apiserver.crt apiserver.key    serving cert for 127.0.0.1 and localhost
    kubelet-client.crt/.key        what the apiserver shows a kubelet when it proxies
    sa.key                         RSA key that signs service-account tokens
    users/<name>.crt/.key          client certs (CN = user, O = groups)

A kubeconfig for a user, by client cert or by bearer token, is accepted by both
``kubernetes.config.load_kube_config`` and ``kubectl --kubeconfig``::

    pki.client_cert("system:node:n1", ["system:nodes"])
    pki.write_kubeconfig(path, server_url, user="system:node:n1", groups=["system:nodes"])
    pki.write_kubeconfig(path, server_url, user="bot", token="s3cret")
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import re
from collections.abc import Sequence
from pathlib import Path

import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CLUSTER_NAME = "pkletd-test"
VALIDITY = dt.timedelta(days=365)
KUBELET_CLIENT_USER = "kube-apiserver-kubelet-client"


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _pem_key(key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _name(common_name: str, organizations: Sequence[str] = ()) -> x509.Name:
    parts = [x509.NameAttribute(NameOID.ORGANIZATION_NAME, o) for o in organizations]
    parts.append(x509.NameAttribute(NameOID.COMMON_NAME, common_name))
    return x509.Name(parts)


def _safe(user: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.-]", "_", user)


class Pki:
    """Creates (or reuses) the CA and the apiserver's own certs in ``base_dir``."""

    def __init__(self, base_dir: Path) -> None:
        self.base_dir = Path(base_dir)
        self.base_dir.mkdir(parents=True, exist_ok=True)
        (self.base_dir / "users").mkdir(exist_ok=True)
        if not self.ca_cert_path.exists():
            self._make_ca()
        self._ca_key = serialization.load_pem_private_key(
            (self.base_dir / "ca.key").read_bytes(), None
        )
        self._ca_cert = x509.load_pem_x509_certificate(self.ca_cert_path.read_bytes())
        if not self.serving_cert[0].exists():
            self._issue("apiserver", "kube-apiserver", (), server=True)
        if not self.kubelet_client_cert[0].exists():
            self._issue("kubelet-client", KUBELET_CLIENT_USER, ("kubeadm:cluster-admins",))
        if not self.sa_key_path.exists():
            key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
            self.sa_key_path.write_bytes(_pem_key(key))

    @property
    def ca_cert_path(self) -> Path:
        return self.base_dir / "ca.crt"

    @property
    def ca_pem(self) -> str:
        return self.ca_cert_path.read_text()

    @property
    def serving_cert(self) -> tuple[Path, Path]:
        return self.base_dir / "apiserver.crt", self.base_dir / "apiserver.key"

    @property
    def kubelet_client_cert(self) -> tuple[Path, Path]:
        return self.base_dir / "kubelet-client.crt", self.base_dir / "kubelet-client.key"

    @property
    def sa_key_path(self) -> Path:
        return self.base_dir / "sa.key"

    def _make_ca(self) -> None:
        key = _key()
        now = dt.datetime.now(dt.UTC)
        name = _name("kubernetes")
        cert = (
            x509.CertificateBuilder()
            .subject_name(name)
            .issuer_name(name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=True,
                    key_encipherment=True,
                    key_cert_sign=True,
                    content_commitment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    crl_sign=False,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), False)
            .sign(key, hashes.SHA256())
        )
        (self.base_dir / "ca.key").write_bytes(_pem_key(key))
        self.ca_cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    def _issue(
        self,
        stem: str,
        common_name: str,
        organizations: Sequence[str],
        server: bool = False,
        directory: Path | None = None,
    ) -> tuple[Path, Path]:
        key = _key()
        now = dt.datetime.now(dt.UTC)
        usage = ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH
        builder = (
            x509.CertificateBuilder()
            .subject_name(_name(common_name, organizations))
            .issuer_name(self._ca_cert.subject)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - dt.timedelta(minutes=5))
            .not_valid_after(now + VALIDITY)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if server:
            builder = builder.add_extension(
                x509.SubjectAlternativeName(
                    [
                        x509.DNSName("localhost"),
                        x509.DNSName("kubernetes"),
                        x509.DNSName("kubernetes.default.svc"),
                        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
                        x509.IPAddress(ipaddress.ip_address("10.96.0.1")),
                    ]
                ),
                critical=False,
            )
        assert isinstance(self._ca_key, ec.EllipticCurvePrivateKey)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        where = directory or self.base_dir
        cert_path, key_path = where / f"{stem}.crt", where / f"{stem}.key"
        key_path.write_bytes(_pem_key(key))
        cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
        return cert_path, key_path

    def sign_serving_request(
        self, request: x509.CertificateSigningRequest, lifetime: dt.timedelta
    ) -> bytes:
        """The CA's serving certificate for a CSR's subject, key and SANs."""
        sans = request.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        return self._sign_request(request, lifetime, ExtendedKeyUsageOID.SERVER_AUTH, sans)

    def sign_client_request(
        self, request: x509.CertificateSigningRequest, lifetime: dt.timedelta
    ) -> bytes:
        """The CA's client certificate for a CSR's subject and key, valid for ``lifetime``."""
        return self._sign_request(request, lifetime, ExtendedKeyUsageOID.CLIENT_AUTH, None)

    def _sign_request(
        self,
        request: x509.CertificateSigningRequest,
        lifetime: dt.timedelta,
        usage: x509.ObjectIdentifier,
        sans: x509.SubjectAlternativeName | None,
    ) -> bytes:
        now = dt.datetime.now(dt.UTC)
        assert isinstance(self._ca_key, ec.EllipticCurvePrivateKey)
        builder = (
            x509.CertificateBuilder()
            .subject_name(request.subject)
            .issuer_name(self._ca_cert.subject)
            .public_key(request.public_key())  # type: ignore[arg-type]
            .serial_number(x509.random_serial_number())
            .not_valid_before(now)
            .not_valid_after(now + lifetime)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
        )
        if sans is not None:
            builder = builder.add_extension(sans, critical=False)
        cert = builder.sign(self._ca_key, hashes.SHA256())
        return cert.public_bytes(serialization.Encoding.PEM)

    def client_cert(self, user: str, groups: Sequence[str] = ()) -> tuple[Path, Path]:
        """A client cert for ``user`` in ``groups`` (CN and O), signed by the CA."""
        stem = _safe(user) + ("@" + _safe(",".join(groups)) if groups else "")
        return self._issue(stem, user, groups, directory=self.base_dir / "users")

    def serving_cert_for(self, stem: str, directory: Path) -> tuple[Path, Path]:
        """A serving cert for 127.0.0.1/localhost signed by this CA (e.g. a fake kubelet's)."""
        return self._issue(stem, stem, (), server=True, directory=directory)

    def write_kubeconfig(
        self,
        path: Path,
        server_url: str,
        user: str,
        groups: Sequence[str] = (),
        token: str | None = None,
        namespace: str | None = None,
    ) -> Path:
        credentials: dict[str, str]
        if token is not None:
            credentials = {"token": token}
        else:
            cert_path, key_path = self.client_cert(user, groups)
            credentials = {
                "client-certificate-data": _b64(cert_path.read_bytes()),
                "client-key-data": _b64(key_path.read_bytes()),
            }
        context: dict[str, str] = {"cluster": CLUSTER_NAME, "user": user}
        if namespace:
            context["namespace"] = namespace
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [
                {
                    "name": CLUSTER_NAME,
                    "cluster": {
                        "server": server_url,
                        "certificate-authority-data": _b64(self.ca_cert_path.read_bytes()),
                    },
                }
            ],
            "users": [{"name": user, "user": credentials}],
            "contexts": [{"name": f"{user}@{CLUSTER_NAME}", "context": context}],
            "current-context": f"{user}@{CLUSTER_NAME}",
            "preferences": {},
        }
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(yaml.safe_dump(config, sort_keys=False))
        path.chmod(0o600)
        return path


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()
