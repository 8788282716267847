"""The cert-manager's steps against the test API server: TLS bootstrap with a token writes
the pair, the current link and the kubeconfig as the kubelet does; rotation asks as the
node itself; a refused token and a denied request fail with a clear cause; an expired
certificate falls back to bootstrap."""

from __future__ import annotations

import datetime as dt
import random
import threading
from collections.abc import Callable
from pathlib import Path

import kubernetes.client
import pytest
import yaml
from pkletd.ipc.apiclient import clientcert
from pkletd.ipc.apiclient.kubeapi import connect
from pkletd.ipc.bus.messages import ClientCertificateReported
from pkletd.workers.certmanager import csr, timing
from pkletd.workers.certmanager.manager import CertManager, CertSettings
from pkletd.workers.certmanager.requester import RequestFailed

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube

TOKEN = "abcdef.0123456789abcdef"


def manager(
    server: ApiServer, tmp_path: Path, token: str = TOKEN, rotate: bool = False
) -> tuple[CertManager, list[ClientCertificateReported]]:
    reports: list[ClientCertificateReported] = []
    settings = CertSettings(
        node_name="n1",
        kubeconfig=tmp_path / "kubelet.conf",
        bootstrap_kubeconfig=server.bootstrap_kubeconfig(tmp_path / "bootstrap.conf", token),
        cert_dir=tmp_path / "pki",
        rotate=rotate,
    )
    found = CertManager(settings, lambda path: connect(path, 50, 100), reports.append)
    return found, reports


def test_bootstrap_writes_the_pair_the_link_and_the_kubeconfig(
    apiserver: ApiServer, tmp_path: Path
) -> None:
    apiserver.add_bootstrap_token(TOKEN)
    cm, reports = manager(apiserver, tmp_path)
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
    names = [r.path for r in apiserver.requests(user="system:bootstrap:abcdef")]
    assert any("node-csr-" in n for n in names)
    node = kubernetes.client.CoreV1Api(connect(str(tmp_path / "kubelet.conf"), 5, 10))
    node.list_namespaced_pod("default", field_selector="spec.nodeName=n1")
    assert apiserver.requests(user="system:node:n1")


def test_a_refused_token_is_a_clear_failure(apiserver: ApiServer, tmp_path: Path) -> None:
    cm, _ = manager(apiserver, tmp_path)
    with pytest.raises(RequestFailed, match=r"refused the bootstrap credentials \(401"):
        cm.step(threading.Event())
    assert not (tmp_path / "kubelet.conf").exists()
    assert (tmp_path / "pki" / "kubelet-client.key.tmp").exists()


def test_a_denied_request_is_a_clear_failure(
    make_apiserver: Callable[..., ApiServer], tmp_path: Path
) -> None:
    server = make_apiserver(csr_auto_approve=False)
    server.add_bootstrap_token(TOKEN)
    cm, _ = manager(server, tmp_path)
    stop = threading.Event()

    def deny() -> None:
        kube = Kube(server)
        try:
            api = kubernetes.client.CertificatesV1Api(kube.api)
            while not stop.wait(0.2):
                for item in api.list_certificate_signing_request().items:
                    server.decide_csr(item.metadata.name, False, "Denied", "not this node")
                    return
        finally:
            kube.close()

    denier = threading.Thread(target=deny)
    denier.start()
    try:
        with pytest.raises(RequestFailed, match="node-csr-.* denied: reason=Denied"):
            cm.step(stop)
    finally:
        stop.set()
        denier.join()


def test_rotation_asks_as_the_node_and_swaps_the_link(
    make_apiserver: Callable[..., ApiServer], tmp_path: Path
) -> None:
    server = make_apiserver(csr_certificate_lifetime_s=60.0)
    server.add_bootstrap_token(TOKEN)
    cm, reports = manager(server, tmp_path, rotate=True)
    cm.step(threading.Event())
    first = (tmp_path / "pki" / "kubelet-client-current.pem").resolve()
    wait = cm.step(threading.Event())
    assert 0 < wait <= 60
    later = dt.datetime.now(dt.UTC) + dt.timedelta(seconds=55)
    cm._now = lambda: later  # past any deadline in [42 s, 54 s) of a 60 s certificate
    cm.step(threading.Event())
    second = (tmp_path / "pki" / "kubelet-client-current.pem").resolve()
    assert second != first
    assert any(
        r.resource == "certificatesigningrequests" for r in server.requests(user="system:node:n1")
    )


def test_an_expired_certificate_falls_back_to_bootstrap(
    make_apiserver: Callable[..., ApiServer], tmp_path: Path
) -> None:
    server = make_apiserver(csr_certificate_lifetime_s=60.0)
    server.add_bootstrap_token(TOKEN)
    cm, _ = manager(server, tmp_path, rotate=True)
    cm.step(threading.Event())
    first = (tmp_path / "pki" / "kubelet-client-current.pem").resolve()
    cm._now = lambda: dt.datetime.now(dt.UTC) + dt.timedelta(seconds=120)
    before = len(server.requests(user="system:bootstrap:abcdef"))
    assert cm.step(threading.Event()) == 0.0
    assert len(server.requests(user="system:bootstrap:abcdef")) > before
    assert (tmp_path / "pki" / "kubelet-client-current.pem").resolve() != first


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
