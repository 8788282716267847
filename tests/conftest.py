"""Shared pytest fixtures.

Runtime fixtures
    ``containerd``     session-wide private containerd (``tests/harness``) at
                       ``/tmp/pkletd-ctr-test-<checkout hash>`` (or
                       ``$PKLETD_TEST_CONTAINERD_DIR``);
                       a running one there is reused.
                       Stopped at session end unless ``PKLETD_KEEP_CONTAINERD=1``
                       (then ``tests/harness/containerd.py down --dir ...`` stops it).
    ``clean_runtime``  the same daemon; every pod sandbox is removed after the test.

API server
    ``apiserver``      a started test API server (``tests/harness/apiserver``, bookmarks
                       every second) in the test's tmp dir; stopped afterwards, and the
                       test fails if a request thread survives.
    ``make_apiserver`` a factory for servers with other settings, stopped the same way.
    ``kube``           ``Kube`` for ``apiserver``: official client APIs and real kubectl.

The real control plane (``tests/harness/controlplane``)
    ``control_plane``  etcd, kube-apiserver, kube-controller-manager and kube-scheduler as
                       kubeadm sets them up, built from Kubernetes' Go modules (built first
                       if missing), started once per session under ``/tmp/k8s-*``; kept
                       when a test failed (or with ``PKLETD_KEEP_TMP=1``), else removed.
    ``make_control_plane``  a factory, ``make_control_plane(**options)``, for another
                       control plane with ``Options`` (``signing_duration_s``,
                       ``verify_kubelet_serving``), started at once (a minute on a busy
                       machine); stopped after the test, its logs kept the same way.
    ``cluster_kube``   ``Kube`` as the cluster's admin (its kubectl is the release's own);
                       afterwards what the test made is deleted (``cleanup.py``), and a
                       failed test prints the last lines of each component's log.

Every test
    ``no_leaks``       (autouse) fails a test that leaves a child process, an open socket
                       or (when it uses containerd) a pod sandbox behind (``tests/leaks.py``).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests import leaks
from tests.harness.apiserver import ApiServer, ApiServerConfig
from tests.harness.apiserver.client import Kube
from tests.harness.containerd import PrivateContainerd, ensure_installed, remove_all_pods
from tests.harness.controlplane import ControlPlane, Options, cleanup
from tests.harness.controlplane.processes import tail
from tests.harness.node import Pkletd, dump_logs

# PKLETD_TEST_CONTAINERD_DIR gives concurrent test sessions on one machine their own daemon.
# Each checkout's own daemon by default, so that two checkouts' sessions never remove
# each other's pods.
_CHECKOUT = hashlib.sha1(str(Path(__file__).resolve().parent).encode()).hexdigest()[:8]
CONTAINERD_TEST_DIR = Path(
    os.environ.get("PKLETD_TEST_CONTAINERD_DIR", f"/tmp/pkletd-ctr-test-{_CHECKOUT}")
)


# --------------------------------------------------------------------------- leaks


@pytest.fixture(autouse=True)
def no_leaks(request: pytest.FixtureRequest) -> Iterator[None]:
    """Set up before the test's other function fixtures, torn down after them."""
    uses_runtime = "containerd" in request.fixturenames
    address = PrivateContainerd(CONTAINERD_TEST_DIR).address if uses_runtime else None
    before = leaks.Holdings.now(address)
    yield
    left = leaks.left_since(before, address)
    if left:
        pytest.fail("the test left behind: " + "; ".join(left), pytrace=False)


# --------------------------------------------------------------------------- runtime


@pytest.fixture(scope="session")
def containerd() -> Iterator[PrivateContainerd]:
    ensure_installed()
    daemon = PrivateContainerd(CONTAINERD_TEST_DIR)
    daemon.start()
    remove_all_pods(daemon.address)  # a reused daemon may hold pods of an aborted run
    try:
        yield daemon
    finally:
        if os.environ.get("PKLETD_KEEP_CONTAINERD") != "1":
            daemon.stop()


@pytest.fixture
def clean_runtime(containerd: PrivateContainerd) -> Iterator[PrivateContainerd]:
    yield containerd
    remove_all_pods(containerd.address)


# --------------------------------------------------------------------------- API server


def _request_threads() -> list[threading.Thread]:
    return [
        t
        for t in threading.enumerate()
        if "process_request_thread" in t.name
        or t.name.startswith("apiserver-")
        or t.name == "scheduler"
    ]


@pytest.fixture
def make_apiserver(tmp_path: Path) -> Iterator[Callable[..., ApiServer]]:
    servers: list[ApiServer] = []

    def make(**overrides: Any) -> ApiServer:
        config = ApiServerConfig(bookmark_interval=1.0)
        server = ApiServer(tmp_path / f"apiserver-{len(servers)}", config, **overrides)
        servers.append(server)
        server.start()
        return server

    yield make
    for server in servers:
        server.stop()
    leaked = _request_threads()
    assert not leaked, f"threads left after stop(): {[t.name for t in leaked]}"


@pytest.fixture
def apiserver(make_apiserver: Callable[..., ApiServer]) -> ApiServer:
    return make_apiserver()


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[Kube]:
    client = Kube(apiserver)
    yield client
    client.close()


# --------------------------------------------------------------------------- control plane


def _new_control_plane(options: Options) -> ControlPlane:
    return ControlPlane(Path(tempfile.mkdtemp(prefix="k8s-", dir="/tmp")), options)


def _stop_control_plane(plane: ControlPlane, failed: bool) -> None:
    """Stop it; keep its dir (logs) when a test failed or ``PKLETD_KEEP_TMP=1``."""
    plane.stop()
    if failed or os.environ.get("PKLETD_KEEP_TMP") == "1":
        print(f"\ncontrol plane logs kept in {plane.base_dir / 'logs'}")
    else:
        shutil.rmtree(plane.base_dir, ignore_errors=True)


@pytest.fixture(scope="session")
def control_plane(request: pytest.FixtureRequest) -> Iterator[ControlPlane]:
    plane = _new_control_plane(Options()).start()
    failures = request.session.testsfailed
    try:
        yield plane
    finally:
        _stop_control_plane(plane, request.session.testsfailed > failures)


@pytest.fixture
def make_control_plane(request: pytest.FixtureRequest) -> Iterator[Callable[..., ControlPlane]]:
    planes: list[ControlPlane] = []

    def make(**options: Any) -> ControlPlane:
        plane = _new_control_plane(Options(**options))
        planes.append(plane)
        return plane.start()

    yield make
    report = getattr(request.node, "rep_call", None)
    for plane in planes:
        _stop_control_plane(plane, report is None or report.failed)


@pytest.fixture
def cluster_kube(control_plane: ControlPlane, request: pytest.FixtureRequest) -> Iterator[Kube]:
    control_plane.check_running()
    kube = Kube(control_plane)
    before = cleanup.snapshot(kube.api)
    try:
        yield kube
    finally:
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            for name in control_plane.components:
                print(f"--- {name}, last lines of {control_plane.log_path(name)}")
                print(tail(control_plane.log_path(name)))
        cleanup.clean(kube.api, before)
        kube.close()


# --------------------------------------------------------------------------- pkletd


@pytest.fixture
def pkletd(clean_runtime: PrivateContainerd, request: pytest.FixtureRequest) -> Iterator[Pkletd]:
    """A pkletd (not yet started) on the test containerd; stopped and checked after. In a
    test on the real control plane it is stopped before ``cluster_kube`` cleans up (a
    running node would register its Node again)."""
    if "cluster_kube" in request.fixturenames:
        request.getfixturevalue("cluster_kube")
    agent = Pkletd(clean_runtime.address, **getattr(request, "param", {}))
    try:
        yield agent
    finally:
        failed = getattr(request.node, "rep_call", None)
        if failed is not None and failed.failed:
            dump_logs(agent)
        agent.close()


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> Iterator[None]:
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report
