"""Eviction on real containerd and real cgroups, pkletd joined to the real control plane (a
static pod is critical and never evicted, so the pods come from the API):

- memory: ``memory.available`` forced just below what the machine has free, a BestEffort
  pod that buffers gigabytes is evicted (Failed, ``Evicted``, the kubelet's message and
  event) while a Guaranteed pod keeps running; MemoryPressure turns True in ``pkletd
  status`` and on the API's Node, a BestEffort pod is refused meanwhile, a SIGKILLed
  eviction worker does not clear it early, and the condition clears once the
  (shortened) transition period is over;
- the Eviction API: a pod evicted through ``pods/<name>/eviction`` (kube-apiserver adds
  ``DisruptionTarget``, then deletes it gracefully) gets SIGTERM and its grace period,
  and every status the node writes meanwhile keeps the API server's condition;
- disk: the root dir on a loop-mounted 64 MiB ext4; a pod writing into an emptyDir takes
  ``nodefs.available`` under its threshold, DiskPressure turns True, the writer is the
  one evicted, its emptyDir goes and the pressure clears.
"""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import kubernetes.watch
import pytest
from pkletd.ipc.nodestats.cgroupstats import CgroupReader
from pkletd.ipc.nodestats.nodememory import node_memory

from tests.harness.apiserver.client import Kube
from tests.harness.containerd import PrivateContainerd, remove_all_pods
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

MI = 2**20
MARGIN_MI = 1024  # the threshold sits this far below what is free when the test starts
HOG_MB = 2500  # what the hog buffers: well past the margin, whatever else the host does
TRANSITION = "20s"
HOLD = "trap 'exit 0' TERM; while true; do sleep 1; done"


def api_pod(name: str, command: str, resources: dict[str, Any] | None = None, **spec: Any) -> Any:
    container: dict[str, Any] = {
        "name": "c",
        "image": BUSYBOX,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", command],
    }
    if resources is not None:
        container["resources"] = resources
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": "testnode",
            "automountServiceAccountToken": False,
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 30,
            "containers": [container],
            **spec,
        },
    }


def pod_status(kube: Kube, name: str) -> Any:
    return kube.core.read_namespaced_pod(name, "default").status


def node_condition(kube: Kube, kind: str) -> Any:
    node = kube.core.read_node("testnode")
    return next((c for c in node.status.conditions or [] if c.type == kind), None)


def pressure(pkletd: Pkletd) -> list[str]:
    return list(pkletd.status()["pressure"]["conditions"])


def events(kube: Kube, reason: str) -> list[Any]:
    found = kube.core.list_event_for_all_namespaces().items
    return [e for e in found if e.reason == reason]


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def joined(pkletd: Pkletd, control_plane: ControlPlane, **eviction: Any) -> None:
    pkletd.extra_args += ["--eviction-monitoring-period", "1s"]
    pkletd.extra_args += ["--node-status-update-frequency", "1s"]
    join(pkletd, control_plane, evictionPressureTransitionPeriod=TRANSITION, **eviction)


def test_memory_pressure_evicts_the_pod_over_its_request(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    memory = node_memory(CgroupReader().sample("/", 0.0))  # as the eviction worker reads it
    assert memory is not None and memory.available is not None
    threshold = f"{memory.available // MI - MARGIN_MI}Mi"
    joined(pkletd, control_plane, evictionHard={"memory.available": threshold})
    assert pressure(pkletd) == []
    guaranteed = {"limits": {"cpu": "100m", "memory": "64Mi"}}
    kube.core.create_namespaced_pod("default", api_pod("steady", HOLD, guaranteed))
    pkletd.wait_api_pod("steady")
    assert pod_status(kube, "steady").qos_class == "Guaranteed"
    # tail buffers all it reads until its input ends, which the sleep holds off
    hog = f"(head -c {HOG_MB}m /dev/zero; sleep 3600) | tail"
    kube.core.create_namespaced_pod("default", api_pod("hog", hog))

    def evicted() -> Any:
        status = pod_status(kube, "hog")
        return status if status.phase == "Failed" and status.reason == "Evicted" else None

    status = wait_for("the hog evicted", evicted, timeout=120)
    assert status.message.startswith(
        f"The node was low on resource: memory. Threshold quantity: {threshold}, available: "
    )
    assert "Container c was using " in status.message
    assert ", request is 0, has larger consumption of memory. " in status.message
    target = [c for c in status.conditions if c.type == "DisruptionTarget"]
    assert target and target[0].reason == "TerminationByKubelet"
    assert "MemoryPressure" in pressure(pkletd)

    # a BestEffort pod is refused while the pressure lasts; a Burstable one is not
    kube.core.create_namespaced_pod("default", api_pod("late", HOLD))
    refused = wait_for(
        "the late pod refused",
        lambda: (s := pod_status(kube, "late")).phase == "Failed" and s,
        timeout=30,
    )
    assert refused.reason == "Evicted"
    assert refused.message == "Pod was rejected: The node had condition: [MemoryPressure]. "
    # a killed eviction worker gets its state back: the condition does not drop early
    killed = pkletd.workers()["eviction"]["pid"]
    os.kill(killed, signal.SIGKILL)
    wait_for(
        "the eviction worker back",
        lambda: (w := pkletd.workers()["eviction"])["state"] == "running" and w["pid"] != killed,
    )
    assert "MemoryPressure" in pressure(pkletd)
    condition = wait_for(
        "MemoryPressure on the Node",
        lambda: (c := node_condition(kube, "MemoryPressure")) and c.status == "True" and c,
    )
    assert condition.reason == "KubeletHasInsufficientMemory"
    assert condition.message == "kubelet has insufficient memory available"
    assert events(kube, "Evicted")[0].message == status.message
    (met,) = events(kube, "EvictionThresholdMet")[:1]
    assert met.message == "Attempting to reclaim memory"
    assert met.involved_object.kind == "Node"

    # the hog gone, the condition clears once the transition period is over
    wait_for("MemoryPressure cleared", lambda: pressure(pkletd) == [], timeout=90)
    wait_for(
        "MemoryPressure False on the Node",
        lambda: node_condition(kube, "MemoryPressure").status == "False",
        timeout=30,
    )
    steady = pkletd.pods()["steady"]
    assert steady["phase"] == "Running"
    assert [c["restart_count"] for c in steady["containers"]] == [0]
    table = pkletd.cli("status").stdout
    assert "memory.available" in table and f"hard <{threshold}" in table


# --- the Eviction API ----------------------------------------------------------------

GRACEFUL = "trap 'echo stopping; sleep 2; exit 0' TERM; while true; do sleep 1; done"


def condition_of(pod: Any, kind: str) -> Any:
    return next((c for c in pod.status.conditions or [] if c.type == kind), None)


def ready_in_api(kube: Kube, name: str) -> Any:
    """The API pod once its Ready condition is True, else None."""
    pod = kube.core.read_namespaced_pod(name, "default")
    ready = condition_of(pod, "Ready")
    return pod if ready is not None and ready.status == "True" else None


def versions_until_deleted(kube: Kube, name: str, since: str) -> list[Any]:
    """Every version of the pod the API had after ``since``, up to its deletion."""
    seen: list[Any] = []
    watch = kubernetes.watch.Watch()
    for event in watch.stream(
        kube.core.list_namespaced_pod,
        "default",
        field_selector=f"metadata.name={name}",
        resource_version=since,
        timeout_seconds=90,
    ):
        seen.append(event["object"])
        if event["type"] == "DELETED":
            watch.stop()
    return seen


def test_the_eviction_api_stops_the_pod_gracefully_keeping_its_disruption_target(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", api_pod("evictee", GRACEFUL))
    pkletd.wait_api_pod("evictee")
    before = wait_for("evictee Ready in the API", lambda: ready_in_api(kube, "evictee"))
    eviction = kubernetes.client.V1Eviction(
        metadata=kubernetes.client.V1ObjectMeta(name="evictee", namespace="default")
    )
    kube.core.create_namespaced_pod_eviction("evictee", "default", eviction)

    versions = versions_until_deleted(kube, "evictee", before.metadata.resource_version)
    assert versions and versions[-1].metadata.deletion_timestamp is not None
    disrupted = [v for v in versions if condition_of(v, "DisruptionTarget")]
    assert disrupted, "kube-apiserver adds DisruptionTarget before it deletes"
    first = versions.index(disrupted[0])
    for version in versions[first:]:  # every status the node wrote afterwards kept it
        target = condition_of(version, "DisruptionTarget")
        assert target is not None and (target.status, target.reason) == (
            "True",
            "EvictionByEvictionAPI",
        )
    (last,) = versions[-1].status.container_statuses
    assert last.state.terminated is not None and last.state.terminated.exit_code == 0  # TERM
    assert condition_of(versions[-1], "Ready").status == "False"
    assert versions[-1].status.phase == "Succeeded"  # deleted and stopped: terminal
    wait_for("the pod gone from the node", lambda: "evictee" not in pkletd.pods())
    killing = [e for e in events(kube, "Killing") if e.involved_object.name == "evictee"]
    assert killing and killing[0].message == "Stopping container c"


# --- disk -------------------------------------------------------------------------------


@pytest.fixture
def nodefs(pkletd: Pkletd, containerd: PrivateContainerd, tmp_path: Path) -> Iterator[Path]:
    """A 64 MiB ext4 on a loop device, mounted as pkletd's root dir; unmounted (and the
    loop device released) once pkletd and the pods are gone."""
    image = tmp_path / "nodefs.img"
    with image.open("wb") as f:
        f.truncate(64 * MI)
    subprocess.run(["mkfs.ext4", "-q", "-F", str(image)], check=True, timeout=60)
    pkletd.root_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run(["mount", "-o", "loop", str(image), str(pkletd.root_dir)], check=True)
    try:
        yield image
    finally:
        pkletd.stop()
        remove_all_pods(containerd.address)
        subprocess.run(["umount", str(pkletd.root_dir)], check=True, timeout=60)
        attached = subprocess.run(
            ["losetup", "-j", str(image)], capture_output=True, text=True, check=True
        )
        assert attached.stdout == "", f"loop device left: {attached.stdout}"


def test_disk_pressure_evicts_the_writer(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube, nodefs: Path
) -> None:
    joined(pkletd, control_plane, evictionHard={"nodefs.available": "20%"})
    kube.core.create_namespaced_pod("default", api_pod("bystander", HOLD))
    pkletd.wait_api_pod("bystander")
    assert pressure(pkletd) == []
    write = f"head -c 48m /dev/zero > /data/fill; {HOLD}"
    scratch = {"volumes": [{"name": "data", "emptyDir": {}}]}
    writer = api_pod("writer", write, **scratch)
    writer["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    kube.core.create_namespaced_pod("default", writer)

    def evicted() -> Any:
        status = pod_status(kube, "writer")
        return status if status.phase == "Failed" and status.reason == "Evicted" else None

    status = wait_for("the writer evicted", evicted, timeout=120)
    assert status.message.startswith(
        "The node was low on resource: ephemeral-storage. Threshold quantity: "
    )
    assert "DiskPressure" in pressure(pkletd)
    condition = wait_for(
        "DiskPressure on the Node",
        lambda: (c := node_condition(kube, "DiskPressure")) and c.status == "True" and c,
    )
    assert condition.reason == "KubeletHasDiskPressure"
    # under disk pressure every new pod is refused, whatever its QoS
    kube.core.create_namespaced_pod(
        "default", api_pod("late", HOLD, {"limits": {"cpu": "100m", "memory": "64Mi"}})
    )
    refused = wait_for(
        "the late pod refused",
        lambda: (s := pod_status(kube, "late")).phase == "Failed" and s,
        timeout=30,
    )
    assert refused.message == "Pod was rejected: The node had condition: [DiskPressure]. "
    # the writer's emptyDir went with it: the pressure clears
    wait_for("DiskPressure cleared", lambda: pressure(pkletd) == [], timeout=90)
    assert pkletd.pods()["bystander"]["phase"] == "Running"
    signals = {s["signal"]: s for s in pkletd.status()["pressure"]["signals"]}
    nodefs_now = signals["nodefs.available"]
    assert nodefs_now["available"] > nodefs_now["thresholds"][0]["quantity"]
