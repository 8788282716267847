"""TLS bootstrap and client certificate rotation on a real pkletd and the test API server:
a node with only a bootstrap kubeconfig (a bootstrap token) gets its certificate through
the CSR API, registers as ``system:node:<name>`` and becomes Ready; with 60 s certificates
and rotateCertificates it renews before the first expires and stays Ready past its end.
A wrong token and a denied request each get a clear log and status line and a retry,
while static pods run. With serverTLSBootstrap the kubelet API refuses handshakes until
its serving CSR is approved, then ``kubectl logs`` through the API server, verifying the
kubelet's certificate against the cluster CA, works."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.node import Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

TOKEN = "abcdef.0123456789abcdef"


def bootstrap_node(pkletd: Pkletd, server: ApiServer, token: str, **fields: Any) -> Path:
    """pkletd with only a bootstrap kubeconfig; the kubeconfig it will write."""
    authentication = {"x509": {"clientCAFile": str(server.ca_path)}}
    pkletd.write_config(authentication=authentication, **fields)
    kubeconfig = pkletd.base / "kubelet.conf"
    bootstrap = server.bootstrap_kubeconfig(pkletd.base / "bootstrap-kubelet.conf", token)
    pkletd.extra_args += [
        "--node-ip",
        "127.0.0.1",
        "--kubeconfig",
        str(kubeconfig),
        "--bootstrap-kubeconfig",
        str(bootstrap),
    ]
    return kubeconfig


def node_ready(kube: Kube, name: str) -> Callable[[], bool]:
    def ready() -> bool:
        try:
            node = kube.core.read_node(name)
        except kubernetes.client.ApiException:
            return False
        conditions = {c.type: c.status for c in node.status.conditions or []}
        return conditions.get("Ready") == "True"

    return ready


def test_a_node_bootstraps_rotates_and_stays_ready(
    pkletd: Pkletd, make_apiserver: Callable[..., ApiServer]
) -> None:
    server = make_apiserver(csr_certificate_lifetime_s=60.0)
    server.add_bootstrap_token(TOKEN)
    kubeconfig = bootstrap_node(pkletd, server, TOKEN, rotateCertificates=True)
    pkletd.start()
    kube = Kube(server)
    try:
        wait_for("node Ready", node_ready(kube, pkletd.node), timeout=60)
        assert kubeconfig.exists()
        current = pkletd.root_dir / "pki" / "kubelet-client-current.pem"
        first = current.resolve()
        assert server.requests(
            user="system:bootstrap:abcdef", resource="certificatesigningrequests"
        )
        assert server.requests(user=f"system:node:{pkletd.node}", resource="nodes")
        wait_for("rotated certificate", lambda: current.resolve() != first, timeout=70)
        assert server.requests(
            user=f"system:node:{pkletd.node}", resource="certificatesigningrequests", verb="POST"
        )
        first_end = time.time() + 10  # well past the first certificate's 60 s
        wait_for("past the first certificate", lambda: time.time() > first_end, timeout=30)
        since = time.time()
        wait_for(
            "a lease renewed with the new certificate",
            lambda: server.requests(
                user=f"system:node:{pkletd.node}", resource="leases", since=since
            ),
            timeout=30,
        )
        assert node_ready(kube, pkletd.node)()
        assert not [w for w in pkletd.workers().values() if w["state"] != "running"]
    finally:
        kube.close()


def test_a_wrong_token_is_reported_and_retried_while_static_pods_run(
    pkletd: Pkletd, make_apiserver: Callable[..., ApiServer]
) -> None:
    server = make_apiserver()
    bootstrap_node(pkletd, server, TOKEN)  # no such token on the server
    pkletd.put("web", pod_manifest("web"))
    pkletd.start(wait=False)
    pkletd.wait_running("web", timeout=60)

    def refused_twice() -> bool:
        return pkletd.log("cert-manager").count("401 Unauthorized") >= 2

    wait_for("two refused attempts", refused_twice, timeout=30)
    status = pkletd.cli("status").stdout
    assert "client certificate: none yet, error: the API server refused the bootstrap" in status
    assert pkletd.workers()["node-lease"]["state"] == "stopped"
    server.add_bootstrap_token(TOKEN)  # the operator fixes the token: the next retry joins
    kube = Kube(server)
    try:
        wait_for("node Ready", node_ready(kube, pkletd.node), timeout=60)
    finally:
        kube.close()


def test_a_denied_request_is_reported_and_retried(
    pkletd: Pkletd, make_apiserver: Callable[..., ApiServer]
) -> None:
    server = make_apiserver(csr_auto_approve=False)
    server.add_bootstrap_token(TOKEN)
    bootstrap_node(pkletd, server, TOKEN)
    pkletd.put("web", pod_manifest("web"))
    pkletd.start(wait=False)
    pkletd.wait_running("web", timeout=60)
    kube = Kube(server)
    try:
        api = kubernetes.client.CertificatesV1Api(kube.api)
        pending = wait_for(
            "a pending CSR", lambda: api.list_certificate_signing_request().items, timeout=30
        )
        server.decide_csr(pending[0].metadata.name, False, "NotThisNode", "denied by the test")
        wait_for(
            "denial logged", lambda: "denied: reason=NotThisNode" in pkletd.log("cert-manager")
        )
        wait_for(
            "denial in status", lambda: "denied: reason=NotThisNode" in pkletd.cli("status").stdout
        )
        assert pkletd.pod("web")["phase"] == "Running"
    finally:
        kube.close()


def test_the_kubelet_api_serves_a_cluster_signed_certificate_once_approved(
    pkletd: Pkletd, make_apiserver: Callable[..., ApiServer]
) -> None:
    server = make_apiserver()
    server.add_bootstrap_token(TOKEN)
    server.trust_kubelet_ca(server.ca_path)  # logs and exec verify the kubelet's certificate
    bootstrap_node(pkletd, server, TOKEN, serverTLSBootstrap=True)
    pkletd.put("web", pod_manifest("web", "echo hello from web; sleep 3600"))
    pkletd.start()
    kube = Kube(server)
    try:
        wait_for("node Ready", node_ready(kube, pkletd.node), timeout=60)
        mirror = f"web-{pkletd.node}"
        wait_for("mirror pod", lambda: mirror in pod_names(kube))
        refused = kube.kubectl("logs", mirror, check=False)
        assert refused.returncode != 0  # no serving certificate yet: the handshake fails
        api = kubernetes.client.CertificatesV1Api(kube.api)

        def serving_csr() -> str | None:
            for item in api.list_certificate_signing_request().items:
                if item.spec.signer_name == "kubernetes.io/kubelet-serving":
                    return str(item.metadata.name)
            return None

        name = wait_for("a serving CSR", serving_csr, timeout=30)
        server.decide_csr(name, True, "AdminApproved")

        def logs() -> str | None:
            result = kube.kubectl("logs", mirror, check=False)
            return result.stdout if result.returncode == 0 else None

        assert "hello from web" in wait_for("logs through the API server", logs, timeout=30)
        assert "no serving certificate available for the kubelet" in pkletd.log("http")
    finally:
        kube.close()


def pod_names(kube: Kube) -> list[str]:
    """The pods the API has in default (a read of one not made yet would be a 404)."""
    return [p.metadata.name for p in kube.core.list_namespaced_pod("default").items]
