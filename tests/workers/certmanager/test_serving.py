"""The serving certificate (serverTLSBootstrap) from the real control plane: asked as the
node once it has client credentials, with its hostname and addresses as SANs; it waits
for an administrator's approval (kube-controller-manager approves no serving CSR), then
``kubelet-server-current.pem`` holds a server-auth certificate from the cluster CA
(``kubectl certificate approve``, and kube-controller-manager's kubelet-serving signer)."""

from __future__ import annotations

import datetime as dt
import random
import threading
from pathlib import Path

from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID
from pkletd.ipc.apiclient.kubeapi import connect
from pkletd.workers.certmanager.serving import (
    SERVER_PREFIX,
    ServingCertificate,
    subject_alt_names,
)
from pkletd.workers.certmanager.store import Store

from tests.harness.apiserver.client import Kube, eventually
from tests.harness.controlplane import ControlPlane
from tests.workers.certmanager.test_certmanager import TOKEN, manager


def test_the_sans_are_sorted_and_an_address_hostname_is_an_ip() -> None:
    sans = subject_alt_names(["n1", "10.0.0.9", "n1"], ["127.0.0.1", "10.0.0.9"])
    assert [str(s.value) for s in sans] == ["n1", "10.0.0.9", "127.0.0.1"]


def test_a_serving_certificate_after_an_administrators_approval(
    control_plane: ControlPlane, cluster_kube: Kube, tmp_path: Path
) -> None:
    control_plane.add_bootstrap_token(TOKEN)
    cm, _ = manager(control_plane, tmp_path)
    cm.step(threading.Event())  # the client certificate first
    keeper = ServingCertificate(
        "n1",
        subject_alt_names(["n1"], ["127.0.0.1"]),
        Store(tmp_path / "pki", SERVER_PREFIX),
        random.Random(1),
        lambda: dt.datetime.now(dt.UTC),
    )
    stop = threading.Event()
    thread = threading.Thread(
        target=keeper.run, args=(tmp_path / "kubelet.conf", lambda p: connect(p, 5, 10), stop)
    )
    thread.start()
    try:
        api = cluster_kube.certificates

        def serving_csr() -> str | None:
            for item in api.list_certificate_signing_request().items:
                if item.spec.signer_name == "kubernetes.io/kubelet-serving":
                    return str(item.metadata.name)
            return None

        name = eventually(serving_csr, timeout=30, what="a serving CSR")
        found = api.read_certificate_signing_request(name)
        assert found.spec.username == "system:node:n1"
        assert not (found.status and found.status.conditions)
        cluster_kube.kubectl("certificate", "approve", name)
        current = tmp_path / "pki" / "kubelet-server-current.pem"
        eventually(current.exists, timeout=30, what="kubelet-server-current.pem")
        cert = x509.load_pem_x509_certificate(current.read_bytes())
        usages = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usages) == [ExtendedKeyUsageOID.SERVER_AUTH]
        sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert sans.get_values_for_type(x509.DNSName) == ["n1"]
    finally:
        stop.set()
        thread.join()
