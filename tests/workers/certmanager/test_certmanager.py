"""The cert-manager's steps against the real control plane: TLS bootstrap with a token
writes the pair, the current link and the kubeconfig as the kubelet does, and the API
server takes the certificate as the node; rotation asks as the node itself; a refused
token and a request denied with ``kubectl certificate deny`` fail with a clear cause; an
expired certificate falls back to bootstrap.

Who asked is what the API server recorded in each CSR (``spec.username``). Rotation and
expiry run on a control plane of their own that signs 60 s certificates; its signer
backdates each by 5 minutes, so the deadlines are taken from the certificate itself."""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from pkletd.ipc.apiclient import clientcert
from pkletd.ipc.apiclient.kubeapi import connect
from pkletd.ipc.bus.messages import ClientCertificateReported
from pkletd.workers.certmanager import csr, timing
from pkletd.workers.certmanager.manager import CertManager, CertSettings
from pkletd.workers.certmanager.requester import RequestFailed
from pkletd.workers.certmanager.store import Pair, Store

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane

TOKEN = "abcdef.0123456789abcdef"
# Tokens of their own: kube-apiserver caches what a token authenticated as for 10 s, so a
# token another test made (and the clean-up deleted) may still be taken for a while.
UNAPPROVED_TOKEN = "denyme.0123456789abcdef"
UNKNOWN_TOKEN = "nobody.0123456789abcdef"
SIGNING_DURATION_S = 60


def manager(
    plane: ControlPlane, tmp_path: Path, token: str = TOKEN, rotate: bool = False
) -> tuple[CertManager, list[ClientCertificateReported]]:
    reports: list[ClientCertificateReported] = []
    settings = CertSettings(
        node_name="n1",
        kubeconfig=tmp_path / "kubelet.conf",
        bootstrap_kubeconfig=plane.bootstrap_kubeconfig(tmp_path / "bootstrap.conf", token),
        cert_dir=tmp_path / "pki",
        rotate=rotate,
    )
    found = CertManager(settings, lambda path: connect(path, 50, 100), reports.append)
    return found, reports


def csr_names(kube: Kube, username: str) -> list[str]:
    """The CSRs ``username`` made, as the API server recorded who asked."""
    items = kube.certificates.list_certificate_signing_request().items
    return [str(i.metadata.name) for i in items if i.spec.username == username]


def who_am_i(kubeconfig: Path) -> Any:
    """The user the API server takes this kubeconfig's credentials for."""
    with connect(str(kubeconfig), 5, 10) as api:
        review = kubernetes.client.AuthenticationV1Api(api).create_self_subject_review({})
        return review.status.user_info


@pytest.fixture
def signing_60s(
    make_control_plane: Callable[..., ControlPlane],
) -> Iterator[tuple[ControlPlane, Kube]]:
    """A control plane of the test's own signing 60 s certificates, and its admin."""
    plane = make_control_plane(signing_duration_s=SIGNING_DURATION_S)
    plane.add_bootstrap_token(TOKEN)
    kube = Kube(plane)
    yield plane, kube
    kube.close()


def test_bootstrap_writes_the_pair_the_link_and_the_kubeconfig(
    control_plane: ControlPlane, cluster_kube: Kube, tmp_path: Path
) -> None:
    control_plane.add_bootstrap_token(TOKEN)
    cm, reports = manager(control_plane, tmp_path)
    assert cm.step(threading.Event()) == 0.0
    current = tmp_path / "pki" / "kubelet-client-current.pem"
    assert current.is_symlink() and current.resolve().name.startswith("kubelet-client-20")
    assert (current.resolve().stat().st_mode & 0o777) == 0o600
    assert b"EC PRIVATE KEY" in current.read_bytes()
    config = yaml.safe_load((tmp_path / "kubelet.conf").read_text())
    assert config["current-context"] == "default-context"
    assert config["users"][0]["user"]["client-certificate"] == str(current)
    assert clientcert.usable(tmp_path / "kubelet.conf")
    cm.step(threading.Event())
    assert reports[-1].path == str(current.resolve()) and not reports[-1].error
    names = csr_names(cluster_kube, "system:bootstrap:abcdef")
    assert any(n.startswith("node-csr-") for n in names)
    user = who_am_i(tmp_path / "kubelet.conf")
    assert user.username == "system:node:n1" and "system:nodes" in user.groups
    with connect(str(tmp_path / "kubelet.conf"), 5, 10) as api:  # the Node authorizer lets it
        node = kubernetes.client.CoreV1Api(api)
        node.list_namespaced_pod("default", field_selector="spec.nodeName=n1")


def test_a_refused_token_is_a_clear_failure(control_plane: ControlPlane, tmp_path: Path) -> None:
    cm, _ = manager(control_plane, tmp_path, UNKNOWN_TOKEN)
    with pytest.raises(RequestFailed, match=r"refused the bootstrap credentials \(401"):
        cm.step(threading.Event())
    assert not (tmp_path / "kubelet.conf").exists()
    assert (tmp_path / "pki" / "kubelet-client.key.tmp").exists()


def test_a_denied_request_is_a_clear_failure(
    control_plane: ControlPlane, cluster_kube: Kube, tmp_path: Path
) -> None:
    control_plane.add_bootstrap_token(UNAPPROVED_TOKEN, auto_approve=False)
    cm, _ = manager(control_plane, tmp_path, UNAPPROVED_TOKEN)
    stop = threading.Event()

    def deny() -> None:
        while not stop.wait(0.2):
            for name in csr_names(cluster_kube, "system:bootstrap:denyme"):
                cluster_kube.kubectl("certificate", "deny", name)
                return

    denier = threading.Thread(target=deny)
    denier.start()
    try:
        # kubectl's reason (the test API server's test gave its own)
        with pytest.raises(RequestFailed, match="node-csr-.* denied: reason=KubectlDeny"):
            cm.step(stop)
    finally:
        stop.set()
        denier.join()


def current_pair(tmp_path: Path) -> Pair:
    pair = Store(tmp_path / "pki").current()
    assert pair is not None
    return pair


def test_rotation_asks_as_the_node_and_swaps_the_link(
    signing_60s: tuple[ControlPlane, Kube], tmp_path: Path
) -> None:
    plane, kube = signing_60s
    cm, reports = manager(plane, tmp_path, rotate=True)
    cm.step(threading.Event())
    first = current_pair(tmp_path)
    span = first.not_after - first.not_before
    before_any_deadline = first.not_before + span * 0.65
    cm._now = lambda: before_any_deadline
    wait = cm.step(threading.Event())
    assert span.total_seconds() * 0.05 <= wait <= min(60.0, span.total_seconds() * 0.25)
    past_any_deadline = first.not_before + span * 0.95  # and before the end
    cm._now = lambda: past_any_deadline
    cm.step(threading.Event())
    assert current_pair(tmp_path).path != first.path
    assert csr_names(kube, "system:node:n1")


def test_an_expired_certificate_falls_back_to_bootstrap(
    signing_60s: tuple[ControlPlane, Kube], tmp_path: Path
) -> None:
    plane, kube = signing_60s
    cm, _ = manager(plane, tmp_path, rotate=True)
    cm.step(threading.Event())
    first = current_pair(tmp_path)
    cm._now = lambda: first.not_after + dt.timedelta(seconds=60)
    before = csr_names(kube, "system:bootstrap:abcdef")
    assert cm.step(threading.Event()) == 0.0
    assert len(csr_names(kube, "system:bootstrap:abcdef")) > len(before)
    assert current_pair(tmp_path).path != first.path


def test_the_deadline_is_between_70_and_90_percent_and_the_backoff_grows() -> None:
    rng = random.Random(7)
    start = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)
    for _ in range(100):
        due = timing.rotation_deadline(start, start + dt.timedelta(seconds=100), rng)
        assert start + dt.timedelta(seconds=70) <= due < start + dt.timedelta(seconds=90)
    waits = [timing.backoff_s(n, rng) for n in range(1, 8)]
    assert 2 <= waits[0] <= 2.2 and 16 <= waits[3] <= 17.6 and waits[5:] == [32.0, 32.0]


def test_the_bootstrap_name_is_stable_for_one_key() -> None:
    key = csr.new_key()
    first, again = csr.request_for("n1", key), csr.request_for("n1", key)
    assert csr.bootstrap_name(first) == csr.bootstrap_name(again)
    assert csr.bootstrap_name(first) != csr.bootstrap_name(csr.request_for("n1", csr.new_key()))
    assert csr.bootstrap_name(first).startswith("node-csr-")


def test_a_garbled_bootstrap_kubeconfig_is_a_clear_failure(tmp_path: Path) -> None:
    garbled = tmp_path / "bootstrap.conf"
    garbled.write_text("clusters: [this is: not a kubeconfig\n")
    settings = CertSettings("n1", tmp_path / "kubelet.conf", garbled, tmp_path / "pki", False)
    cm = CertManager(settings, lambda path: None, lambda report: None)
    with pytest.raises(ValueError, match="cannot read bootstrap kubeconfig"):
        cm.step(threading.Event())
    assert not (tmp_path / "kubelet.conf").exists()
