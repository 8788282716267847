"""TLS bootstrap and client certificate rotation on a real pkletd and the real control
plane, the node run by kubeadm's command line: with only a bootstrap kubeconfig (a
bootstrap token as ``kubeadm token create`` makes it) it gets its certificate through the
CSR API (kube-controller-manager approves and signs it), registers as
``system:node:<name>`` and becomes Ready; with 90 s certificates and rotateCertificates it
renews before the first expires and stays Ready past its end. A wrong token and a
request denied with ``kubectl certificate deny`` each get a clear log and status line and
a retry, while static pods run. With serverTLSBootstrap the kubelet API refuses
handshakes until its serving CSR is approved (``kubectl certificate approve``: nobody
else approves them), then ``kubectl logs`` through an API server that verifies the
kubelet's certificate against the cluster CA (``--kubelet-certificate-authority``) works.

The signer backdates each certificate by 5 minutes, so a 90 s certificate spans 6.5
minutes and its rotation deadline (70 to 90 % of that span) may be due as soon as it is
issued: a node may rotate more than once, as the kubelet would."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from cryptography import x509

from tests.e2e.test_kubelet_command_line import kubeadm_command_line
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

TOKEN = "abcdef.0123456789abcdef"
# Tokens of their own: kube-apiserver caches what a token authenticated as for 10 s, so
# TOKEN, made by another test and deleted by its clean-up, may still be taken for a while
# (or be taken in its old group).
UNAPPROVED_TOKEN = "denyme.0123456789abcdef"
LATE_TOKEN = "latejn.0123456789abcdef"
SIGNING_DURATION_S = 90
SERVING_SIGNER = "kubernetes.io/kubelet-serving"


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def own_kube() -> Iterator[Callable[[ControlPlane], Kube]]:
    """The admin's ``Kube`` for a control plane of the test's own, closed afterwards."""
    made: list[Kube] = []

    def make(plane: ControlPlane) -> Kube:
        made.append(Kube(plane))
        return made[-1]

    yield make
    for kube in made:
        kube.close()


def bootstrap_node(pkletd: Pkletd, plane: ControlPlane, token: str, **fields: Any) -> Path:
    """pkletd run by kubeadm's command line with only a bootstrap kubeconfig; the
    kubeconfig it will write."""
    authentication = {"x509": {"clientCAFile": str(plane.ca_path)}}
    pkletd.write_config(authentication=authentication, **fields)
    kubeconfig = pkletd.base / "kubelet.conf"
    bootstrap = plane.bootstrap_kubeconfig(pkletd.base / "bootstrap-kubelet.conf", token)
    kubeconfig_args = [f"--bootstrap-kubeconfig={bootstrap}", f"--kubeconfig={kubeconfig}"]
    pkletd.command = kubeadm_command_line(pkletd, kubeconfig_args)
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


def csrs(kube: Kube, username: str, signer: str | None = None) -> list[Any]:
    """The CSRs ``username`` made (the API server records who asked), of ``signer``."""
    return [
        item
        for item in kube.certificates.list_certificate_signing_request().items
        if item.spec.username == username and signer in (None, item.spec.signer_name)
    ]


def not_after(pem: Path) -> dt.datetime:
    return x509.load_pem_x509_certificate(pem.read_bytes()).not_valid_after_utc


def lease_renewed_since(kube: Kube, node: str, since: dt.datetime) -> Callable[[], bool]:
    def renewed() -> bool:
        lease = kube.coordination.read_namespaced_lease(node, "kube-node-lease")
        return bool(lease.spec.renew_time and lease.spec.renew_time > since)

    return renewed


def test_a_node_bootstraps_rotates_and_stays_ready(
    make_control_plane: Callable[..., ControlPlane],
    own_kube: Callable[[ControlPlane], Kube],
    pkletd: Pkletd,
) -> None:
    plane = make_control_plane(signing_duration_s=SIGNING_DURATION_S)
    plane.add_bootstrap_token(TOKEN)
    kubeconfig = bootstrap_node(pkletd, plane, TOKEN, rotateCertificates=True)
    pkletd.start()
    kube = own_kube(plane)
    wait_for("node Ready", node_ready(kube, pkletd.node), timeout=60)
    assert kubeconfig.exists()
    assert csrs(kube, "system:bootstrap:abcdef")
    current = pkletd.root_dir / "pki" / "kubelet-client-current.pem"
    first = current.resolve()
    first_end = not_after(first)
    wait_for("rotated certificate", lambda: current.resolve() != first, timeout=90)
    assert csrs(kube, f"system:node:{pkletd.node}")  # rotation asks as the node
    past_end = first_end + dt.timedelta(seconds=5)
    wait_for("past the first certificate", lambda: dt.datetime.now(dt.UTC) > past_end,
             timeout=SIGNING_DURATION_S + 10)  # fmt: skip
    wait_for(
        "a lease renewed with a later certificate",
        lease_renewed_since(kube, pkletd.node, past_end),
        timeout=30,
    )
    assert node_ready(kube, pkletd.node)()
    assert not [w for w in pkletd.workers().values() if w["state"] != "running"]


def test_a_wrong_token_is_reported_and_retried_while_static_pods_run(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    bootstrap_node(pkletd, control_plane, LATE_TOKEN)  # no such token in the cluster
    pkletd.put("web", pod_manifest("web"))
    pkletd.start(wait=False)
    pkletd.wait_running("web", timeout=60)

    def refused_twice() -> bool:
        return pkletd.log("cert-manager").count("401 Unauthorized") >= 2

    wait_for("two refused attempts", refused_twice, timeout=30)
    status = pkletd.cli("status").stdout
    assert "client certificate: none yet, error: the API server refused the bootstrap" in status
    assert pkletd.workers()["node-lease"]["state"] == "stopped"
    control_plane.add_bootstrap_token(LATE_TOKEN)  # the operator adds it: a retry joins
    wait_for("node Ready", node_ready(kube, pkletd.node), timeout=90)


def test_a_denied_request_is_reported_and_retried(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    control_plane.add_bootstrap_token(UNAPPROVED_TOKEN, auto_approve=False)
    bootstrap_node(pkletd, control_plane, UNAPPROVED_TOKEN)
    pkletd.put("web", pod_manifest("web"))
    pkletd.start(wait=False)
    pkletd.wait_running("web", timeout=60)
    pending = wait_for("a pending CSR", lambda: csrs(kube, "system:bootstrap:denyme"), timeout=30)
    kube.kubectl("certificate", "deny", pending[0].metadata.name)
    # kubectl's reason; the test API server's test gave its own
    denied = "denied: reason=KubectlDeny"
    wait_for("denial logged", lambda: denied in pkletd.log("cert-manager"))
    wait_for("denial in status", lambda: denied in pkletd.cli("status").stdout)
    assert pkletd.pod("web")["phase"] == "Running"


def test_the_kubelet_api_serves_a_cluster_signed_certificate_once_approved(
    make_control_plane: Callable[..., ControlPlane],
    own_kube: Callable[[ControlPlane], Kube],
    pkletd: Pkletd,
) -> None:
    plane = make_control_plane(verify_kubelet_serving=True)
    plane.add_bootstrap_token(TOKEN)
    bootstrap_node(pkletd, plane, TOKEN, serverTLSBootstrap=True)
    pkletd.put("web", pod_manifest("web", "echo hello from web; sleep 3600"))
    pkletd.start()
    kube = own_kube(plane)
    wait_for("node Ready", node_ready(kube, pkletd.node), timeout=60)
    mirror = f"web-{pkletd.node}"
    wait_for("mirror pod", lambda: mirror in pod_names(kube))
    refused = kube.kubectl("logs", mirror, check=False)
    assert refused.returncode != 0  # no serving certificate yet: the handshake fails
    node_user = f"system:node:{pkletd.node}"
    pending = wait_for("a serving CSR", lambda: csrs(kube, node_user, SERVING_SIGNER), timeout=30)
    kube.kubectl("certificate", "approve", pending[0].metadata.name)

    def logs() -> str | None:
        result = kube.kubectl("logs", mirror, check=False)
        return result.stdout if result.returncode == 0 else None

    assert "hello from web" in wait_for("logs through the API server", logs, timeout=30)
    assert "no serving certificate available for the kubelet" in pkletd.log("http")


def pod_names(kube: Kube) -> list[str]:
    """The pods the API has in default (a read of one not made yet would be a 404)."""
    return [p.metadata.name for p in kube.core.list_namespaced_pod("default").items]
