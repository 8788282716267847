"""The kubelet's serving certificate from the CSR API (``serverTLSBootstrap``).

Asked as the node itself, once it has client credentials: a new ECDSA P-256 key, CN
``system:node:<node>``, O ``system:nodes``, the node's hostname as a DNS SAN (an IP SAN
if it is an address) and its addresses as IP SANs, signer ``kubernetes.io/kubelet-serving``,
usages digital signature, key encipherment, server auth. kube-controller-manager does not
approve these: a cluster administrator (or an approver of their choice) does. Stored as
``kubelet-server-<timestamp>.pem`` with the ``kubelet-server-current.pem`` link, which the
http worker serves to new connections; renewed at the same jittered 70-90 % of its
lifetime as the client certificate.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import logging
import random
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pkletd.ipc.apiclient import clientcert
from pkletd.workers.certmanager import csr, requester, timing
from pkletd.workers.certmanager.store import Store

log = logging.getLogger(__name__)

SERVING_SIGNER = "kubernetes.io/kubelet-serving"
SERVING_USAGES = ("digital signature", "key encipherment", "server auth")
SERVER_PREFIX = "kubelet-server"
IDLE_CHECK_S = 60.0
WAIT_FOR_CLIENT_S = 1.0


def subject_alt_names(hostnames: Sequence[str], ips: Sequence[str]) -> list[x509.GeneralName]:
    """DNS names and IP addresses, de-duplicated and sorted, as the kubelet's template."""
    addresses: set[str] = {ip for ip in ips if ip}
    names: set[str] = set()
    for host in hostnames:
        try:
            ipaddress.ip_address(host)
            addresses.add(host)
        except ValueError:
            if host:
                names.add(host)
    found: list[x509.GeneralName] = [x509.DNSName(n) for n in sorted(names)]
    ordered = sorted(addresses, key=lambda a: ipaddress.ip_address(a).packed)
    found += [x509.IPAddress(ipaddress.ip_address(a)) for a in ordered]
    return found


def serving_request(node_name: str, key_pem: bytes, sans: list[x509.GeneralName]) -> bytes:
    key = serialization.load_pem_private_key(key_pem, None)
    if not isinstance(key, ec.EllipticCurvePrivateKey):
        raise ValueError("the serving key is not an ECDSA key")
    subject = x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, csr.NODES_GROUP),
            x509.NameAttribute(NameOID.COMMON_NAME, f"system:node:{node_name}"),
        ]
    )
    builder = x509.CertificateSigningRequestBuilder().subject_name(subject)
    builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(key, hashes.SHA256()).public_bytes(serialization.Encoding.PEM)


def serving_body(request_pem: bytes) -> dict[str, Any]:
    return {
        "apiVersion": "certificates.k8s.io/v1",
        "kind": "CertificateSigningRequest",
        "metadata": {"generateName": csr.RENEWAL_PREFIX},
        "spec": {
            "request": base64.b64encode(request_pem).decode(),
            "signerName": SERVING_SIGNER,
            "usages": list(SERVING_USAGES),
        },
    }


class ServingCertificate:
    """Keeps ``kubelet-server-current.pem`` valid: asks when there is none, or past the
    rotation deadline of the one there is."""

    def __init__(
        self,
        node_name: str,
        sans: list[x509.GeneralName],
        store: Store,
        rng: random.Random,
        now: Callable[[], dt.datetime],
    ) -> None:
        self.node_name = node_name
        self.sans = sans
        self.store = store
        self._rng = rng
        self._now = now
        self._deadline: tuple[Any, dt.datetime] | None = None

    def run(self, kubeconfig: Path, connect: Callable[[str], Any], stop: threading.Event) -> None:
        """Steps until ``stop``, on a thread of its own (a request may wait for an
        administrator's approval for long): once the node has client credentials."""
        failures = 0
        while not stop.is_set():
            if not clientcert.usable(kubeconfig, self._now()):
                stop.wait(WAIT_FOR_CLIENT_S)
                continue
            try:
                wait = self.step(lambda: connect(str(kubeconfig)), stop)
                failures = 0
            except Exception as exc:  # noqa: BLE001 -- every failure is logged and retried
                failures += 1
                wait = timing.backoff_s(failures, self._rng)
                log.error("serving certificate not obtained error=%s retry_in_s=%.1f", exc, wait)
            stop.wait(wait)

    def step(self, client: Callable[[], Any], stop: threading.Event) -> float:
        """Do what is due; the seconds until the next look."""
        pair = self.store.current()
        if pair is not None and not pair.expired(self._now()):
            if self._deadline is None or self._deadline[0] != pair.path:
                due = timing.rotation_deadline(pair.not_before, pair.not_after, self._rng)
                self._deadline = (pair.path, due)
            left = (self._deadline[1] - self._now()).total_seconds()
            if left > 0:
                return min(IDLE_CHECK_S, left)
        key = csr.new_key()
        body = serving_body(serving_request(self.node_name, key, self.sans))
        log.info("requesting serving certificate node=%s", self.node_name)
        cert = requester.obtain_body(client(), body, stop, "node")
        path = self.store.write(cert, key, self._now())
        log.info("serving certificate obtained path=%s", path)
        return 0.0
