"""Local storage limits on real containerd, pkletd joined to the real control plane (a static
pod is critical and never evicted, so the pods come from the API), the eviction
monitoring period at 1 s and no threshold that the host's own disks could meet:

- a pod writing past its emptyDir ``sizeLimit`` is evicted (Failed, ``Evicted``, the
  kubelet's message and event, no ``DisruptionTarget``) while its neighbour, within its
  own limit, keeps running;
- a container writing past its ephemeral-storage limit into its writable layer, or into
  its log, is evicted with the container message;
- a pod whose containers' limits its emptyDir (with no ``sizeLimit``) outgrows is
  evicted with the pod message;
- the Node reports its ephemeral-storage capacity.
"""

from __future__ import annotations

from typing import Any

import pytest
from pkletd.ipc.apimodel import quantity

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

HOLD = "trap 'exit 0' TERM; while true; do sleep 1; done"
# The writable layer's usage comes from containerd's snapshot syncer, every 10 s.
LAYER_TIMEOUT = 90.0


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def joined(pkletd: Pkletd, control_plane: ControlPlane) -> None:
    pkletd.extra_args += ["--eviction-monitoring-period", "1s"]
    # replaces the default thresholds whole: the host's disks cannot evict anyone here
    join(pkletd, control_plane, evictionHard={"memory.available": "1Mi"})


def container(name: str, command: str, limit: str | None = None) -> dict[str, Any]:
    found: dict[str, Any] = {
        "name": name,
        "image": BUSYBOX,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    if limit is not None:
        found["resources"] = {"limits": {"ephemeral-storage": limit}}
    return found


def api_pod(name: str, *containers: dict[str, Any], scratch: str | None = "") -> Any:
    """A pod; with ``scratch`` (a sizeLimit, or None for none) an emptyDir at /data."""
    spec: dict[str, Any] = {
        "nodeName": "testnode",
        "automountServiceAccountToken": False,
        "hostNetwork": True,
        "terminationGracePeriodSeconds": 30,
        "containers": list(containers),
    }
    if scratch != "":
        spec["volumes"] = [
            {"name": "scratch", "emptyDir": {"sizeLimit": scratch} if scratch else {}}
        ]
        for c in spec["containers"]:
            c["volumeMounts"] = [{"name": "scratch", "mountPath": "/data"}]
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": spec,
    }


def evicted(kube: Kube, name: str, timeout: float = 60.0) -> Any:
    def check() -> Any:
        status = kube.core.read_namespaced_pod(name, "default").status
        return status if status.phase == "Failed" and status.reason == "Evicted" else None

    return wait_for(f"{name} evicted", check, timeout=timeout)


def assert_evicted_as_the_kubelet(kube: Kube, name: str, status: Any, message: str) -> None:
    assert status.message == message
    assert not [c for c in status.conditions or [] if c.type == "DisruptionTarget"]

    def evicted_events() -> list[Any]:  # the status manager posts events a moment later
        events = kube.core.list_namespaced_event("default").items
        return [e for e in events if e.reason == "Evicted" and e.involved_object.name == name]

    wait_for(f"{name}'s Evicted event", evicted_events, timeout=30)
    found = evicted_events()
    assert found[0].type == "Warning" and found[0].message == message

    def stopped() -> bool:
        statuses = kube.core.read_namespaced_pod(name, "default").status.container_statuses
        return all(c.state.terminated is not None for c in statuses or [])

    wait_for(f"{name}'s containers stopped", stopped, timeout=30)


def test_a_pod_past_its_emptydir_size_limit_is_evicted_its_neighbour_stays(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    joined(pkletd, control_plane)
    capacity = kube.core.read_node("testnode").status.capacity
    assert quantity.parse(capacity["ephemeral-storage"]) > 0
    # the neighbour writes 1 MiB into its 4 MiB emptyDir: measured, within its limit
    fill = "head -c {}m /dev/zero > /data/fill; " + HOLD
    neighbour = api_pod("neighbour", container("c", fill.format(1)), scratch="4Mi")
    kube.core.create_namespaced_pod("default", neighbour)
    pkletd.wait_api_pod("neighbour")
    writer = api_pod("writer", container("c", fill.format(4)), scratch="1Mi")
    kube.core.create_namespaced_pod("default", writer)
    status = evicted(kube, "writer")
    message = 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". '
    assert_evicted_as_the_kubelet(kube, "writer", status, message)
    neighbour_now = pkletd.pods()["neighbour"]
    assert neighbour_now["phase"] == "Running"
    assert [c["restart_count"] for c in neighbour_now["containers"]] == [0]
    assert kube.core.read_namespaced_pod("neighbour", "default").status.phase == "Running"


@pytest.mark.parametrize(
    ("where", "write", "timeout"),
    [
        ("layer", "head -c 8m /dev/zero > /fill", LAYER_TIMEOUT),
        ("log", "head -c 8m /dev/zero | tr '\\0' x | fold -w 1000", 60.0),
    ],
    ids=["layer", "log"],
)
def test_a_container_past_its_ephemeral_storage_limit_is_evicted(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube, where: str, write: str, timeout: float
) -> None:
    joined(pkletd, control_plane)
    # the pod's limit (the sum, 102Mi) holds: the container's own is what is exceeded
    hog = container("hog", f"{write}; {HOLD}", limit="2Mi")
    idle = container("idle", HOLD, limit="100Mi")
    kube.core.create_namespaced_pod("default", api_pod(f"{where}-hog", hog, idle))
    status = evicted(kube, f"{where}-hog", timeout=timeout)
    message = 'Container hog exceeded its local ephemeral storage limit "2Mi". '
    assert_evicted_as_the_kubelet(kube, f"{where}-hog", status, message)


def test_a_pod_past_its_containers_total_limit_is_evicted(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    joined(pkletd, control_plane)
    writer = container("c", "head -c 6m /dev/zero > /data/fill; " + HOLD, limit="2Mi")
    kube.core.create_namespaced_pod("default", api_pod("greedy", writer, scratch=None))
    status = evicted(kube, "greedy")
    message = "Pod ephemeral local storage usage exceeds the total limit of containers 2Mi. "
    assert_evicted_as_the_kubelet(kube, "greedy", status, message)
