"""Pods from the real control plane on the real containerd: bound pods run, and every way
the watch can break (a restarted kube-apiserver, a history etcd compacted away, a
restarted watcher; a dropped stream on the test API server) loses and duplicates
nothing."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow


def bound_pod(name: str, node: str = "testnode", grace: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,  # tokens: issue 10
            "hostNetwork": True,
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                }
            ],
        },
    }


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def names(agent: Pkletd) -> list[str]:
    return sorted(agent.pods())


def test_bound_pods_run_and_other_nodes_pods_do_not(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    api = kube.core
    join(pkletd, control_plane)
    api.create_namespaced_pod("default", bound_pod("mine"))
    api.create_namespaced_pod("default", bound_pod("theirs", node="othernode"))
    pkletd.wait_api_pod("mine")
    assert names(pkletd) == ["mine"]


def test_a_deleted_pod_is_stopped_within_its_grace(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    api = kube.core
    join(pkletd, control_plane)
    api.create_namespaced_pod("default", bound_pod("doomed", grace=30))
    pkletd.wait_api_pod("doomed")
    api.delete_namespaced_pod("doomed", "default", grace_period_seconds=3)
    wait_for("the deleted pod stopped", lambda: "doomed" not in pkletd.pods(), timeout=20)
    assert "pod stage pod=default/doomed" in pkletd.log() and "deleted in the API" in pkletd.log()


@pytest.fixture
def uncached(
    make_control_plane: Callable[..., ControlPlane],
) -> Iterator[tuple[ControlPlane, Kube]]:
    """A control plane of the test's own whose kube-apiserver serves watches from etcd."""
    plane = make_control_plane(watch_cache=False)
    admin = Kube(plane, retries=False)  # rides out the restarts itself
    yield plane, admin
    admin.close()


def pod_lists(plane: ControlPlane, node: str) -> int:
    """How many times the node listed its pods (a watch it could not resume lists again)."""
    return len(plane.audit_events("pods", user=f"system:node:{node}", verb="list"))


def create_when_serving(kube: Kube, name: str) -> None:
    """Create a pod once the restarted API server answers (its clients reconnect)."""

    def created() -> bool:
        try:
            kube.core.create_namespaced_pod("default", bound_pod(name))
        except Exception as exc:  # refused while it starts; taken once it answers
            if "AlreadyExists" in str(exc):
                return True
            raise ConnectionError(str(exc)) from None
        return True

    wait_for(f"{name} created", created, timeout=60)


def test_broken_watches_lose_and_duplicate_nothing(
    uncached: tuple[ControlPlane, Kube], pkletd: Pkletd
) -> None:
    plane, admin = uncached
    join(pkletd, plane)
    admin.core.create_namespaced_pod("default", bound_pod("first"))
    pkletd.wait_api_pod("first")

    def restart() -> None:  # the watch resumes from its revision, still in etcd
        plane.restart_apiserver()

    def compact_then_restart() -> None:  # the revision it resumes from is compacted away
        admin.core.create_namespaced_config_map("default", {"metadata": {"name": "later"}})
        plane.compact()
        plane.restart_apiserver()

    def kill_watcher() -> None:
        os.kill(pkletd.workers()["api-watcher"]["pid"], signal.SIGKILL)

    lists = []
    for step, breakage in enumerate((restart, compact_then_restart, kill_watcher)):
        before = pod_lists(plane, pkletd.node)
        breakage()
        create_when_serving(admin, f"after-{step}")
        pkletd.wait_api_pod(f"after-{step}", timeout=60)
        lists.append(pod_lists(plane, pkletd.node) - before)
    assert lists[0] == 0, "a watch resumed from a revision still in etcd lists nothing"
    assert lists[1] >= 1 and lists[2] >= 1, lists  # 410 Gone, a new watcher: list again
    admin.core.delete_namespaced_pod("first", "default", grace_period_seconds=1)
    wait_for("first stopped", lambda: "first" not in pkletd.pods(), timeout=20)
    assert names(pkletd) == [f"after-{i}" for i in range(3)]
    restarts = {p["name"]: p["containers"][0]["restart_count"] for p in pkletd.status()["pods"]}
    assert set(restarts.values()) == {0}  # nothing started twice


def test_a_restarted_api_server_with_its_watch_cache_loses_nothing(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    """kube-apiserver as kubeadm runs it, its watch cache on: after the restart the
    watch resumes, or lists again if the new cache no longer holds its revision."""
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", bound_pod("before"))
    pkletd.wait_api_pod("before")
    control_plane.restart_apiserver()
    admin = Kube(control_plane, retries=False)
    try:
        create_when_serving(admin, "after")
        pkletd.wait_api_pod("after", timeout=60)
    finally:
        admin.close()
    assert names(pkletd) == ["after", "before"]
    restarts = {p["name"]: p["containers"][0]["restart_count"] for p in pkletd.status()["pods"]}
    assert set(restarts.values()) == {0}


def test_a_dropped_watch_resumes_losing_nothing(
    pkletd: Pkletd, make_apiserver: Callable[..., ApiServer]
) -> None:
    """On the test API server: kube-apiserver ends a watch only at its timeoutSeconds
    (pkletd asks for 5 to 10 minutes) or when it stops, so only the test server can drop
    every open watch at once, at any moment, and go on serving."""
    apiserver = make_apiserver()
    own = Kube(apiserver)
    try:
        pkletd.join_cluster(apiserver).start()
        own.core.create_namespaced_pod("default", bound_pod("first"))
        pkletd.wait_api_pod("first")
        apiserver.drop_watches()
        own.core.create_namespaced_pod("default", bound_pod("after"))
        pkletd.wait_api_pod("after")
        assert names(pkletd) == ["after", "first"]
    finally:
        own.close()
