"""RuntimeClasses on a real pkletd joined to the real control plane (kube-scheduler binds
the pods, the RuntimeClass admission plugin sets their overhead), with real containerd (whose
test config has a second handler, ``runc-test``): a pod of a class runs with its handler
(the CRI's PodSandboxStatus says so) in a pod cgroup sized with the class's overhead; a
class whose handler containerd lacks, and a class that does not exist (deleted after the pod
was admitted), fail the sandbox as the kubelet does (``FailedCreatePodSandBox``), tried
again until the class is there. Standalone, such a pod is refused with its reason."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.containerd import TEST_HANDLER, PrivateContainerd, list_pod_sandboxes
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, pod_manifest, wait_for

pytestmark = pytest.mark.slow

RUN = "trap 'exit 0' TERM; while true; do sleep 1; done"
CGROUP = Path("/sys/fs/cgroup")
MI = 2**20


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane, clean_runtime: PrivateContainerd) -> Pkletd:
    """Joined; kube-scheduler binds the classes' pods to it."""
    clean_runtime.require_handler(TEST_HANDLER)
    return join(pkletd, control_plane)


def runtime_class(kube: Kube, name: str, handler: str, **extra: Any) -> None:
    body = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": name}}
    kube.kubectl("apply", "-f", "-", input=json.dumps({**body, "handler": handler, **extra}))


def classed_pod(name: str, class_name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "app", "image": BUSYBOX, "imagePullPolicy": "Never"}
    limits = {"resources": {"limits": {"cpu": "200m", "memory": "64Mi"}}}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "runtimeClassName": class_name,
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "containers": [{**container, "command": ["sh", "-c", RUN], **limits}],
            **spec,
        },
    }


def api_pod(kube: Kube, name: str) -> dict[str, Any]:
    found: dict[str, Any] = json.loads(kube.kubectl("get", "pod", name, "-o", "json").stdout)
    return found


def running(kube: Kube, name: str) -> dict[str, Any] | None:
    pod = api_pod(kube, name)
    states = [s["state"] for s in pod["status"].get("containerStatuses") or []]
    return pod if states and all("running" in s for s in states) else None


def sandbox_failed(kube: Kube, name: str, message: str) -> None:
    """The kubelet's event is there, and the pod waits, ContainerCreating."""

    def check() -> bool:
        events = json.loads(kube.kubectl("get", "events", "-o", "json").stdout)["items"]
        return any(
            e["involvedObject"]["name"] == name
            and (e["type"], e["reason"], e["message"])
            == ("Warning", "FailedCreatePodSandBox", message)
            for e in events
        )

    wait_for(f"FailedCreatePodSandBox on {name}", check, timeout=30)
    pod = api_pod(kube, name)
    assert pod["status"]["phase"] == "Pending"
    (status,) = pod["status"]["containerStatuses"]
    assert status["state"]["waiting"] == {"reason": "ContainerCreating", "message": message}


def test_a_class_runs_its_pod_with_its_handler_and_overhead(
    node: Pkletd, kube: Kube, clean_runtime: PrivateContainerd
) -> None:
    overhead = {"podFixed": {"cpu": "100m", "memory": "32Mi"}}
    runtime_class(kube, "test", TEST_HANDLER, overhead=overhead)
    kube.kubectl("create", "-f", "-", input=json.dumps(classed_pod("classy", "test")))
    pod = wait_for("classy running", lambda: running(kube, "classy"))
    assert pod["spec"]["overhead"] == {"cpu": "100m", "memory": "32Mi"}  # admission's
    uid = pod["metadata"]["uid"]
    (sandbox,) = [s for s in list_pod_sandboxes(clean_runtime.address) if s.metadata.uid == uid]
    assert sandbox.runtime_handler == TEST_HANDLER
    assert pod["status"]["qosClass"] == "Guaranteed"
    if not (CGROUP / "cgroup.controllers").exists():  # cgroup v1: the pod cgroup's files
        memory = CGROUP / "memory" / "kubepods" / f"pod{uid}" / "memory.limit_in_bytes"
        quota = CGROUP / "cpu" / "kubepods" / f"pod{uid}" / "cpu.cfs_quota_us"
        assert int(memory.read_text()) == (64 + 32) * MI
        assert int(quota.read_text()) == 30000  # 300m of a 100 ms period
    kube.kubectl("delete", "pod", "classy", "--wait=false")


def test_a_handler_containerd_lacks_fails_as_the_kubelet_does(node: Pkletd, kube: Kube) -> None:
    runtime_class(kube, "vm", "kata")
    kube.kubectl("create", "-f", "-", input=json.dumps(classed_pod("vm-pod", "vm")))
    sandbox_failed(
        kube,
        "vm-pod",
        "Failed to create pod sandbox: rpc error: code = Unknown desc = failed to get sandbox "
        'runtime: no runtime for "kata" is configured',
    )
    described = kube.kubectl("describe", "pod", "vm-pod").stdout
    assert "FailedCreatePodSandBox" in described
    kube.kubectl("delete", "pod", "vm-pod", "--wait=false")


def test_an_unknown_class_fails_until_it_is_created(node: Pkletd, kube: Kube) -> None:
    runtime_class(kube, "doomed", "runc")
    gated = classed_pod("late", "doomed", schedulingGates=[{"name": "example.com/hold"}])
    kube.kubectl("create", "-f", "-", input=json.dumps(gated))  # admitted: the class exists
    kube.kubectl("delete", "runtimeclass", "doomed")
    lift = [{"op": "remove", "path": "/spec/schedulingGates"}]
    kube.kubectl("patch", "pod", "late", "--type=json", "-p", json.dumps(lift))
    sandbox_failed(
        kube, "late", 'Failed to create pod sandbox: runtimeclass.node.k8s.io "doomed" not found'
    )
    runtime_class(kube, "doomed", "runc")  # the watch brings it: the pod starts
    wait_for("late running", lambda: running(kube, "late"), timeout=30)
    kube.kubectl("delete", "pod", "late", "--wait=false")


def test_a_standalone_node_refuses_a_pod_with_a_class(pkletd: Pkletd) -> None:
    manifest = pod_manifest("classy")
    manifest["spec"]["runtimeClassName"] = "test"
    pkletd.start()
    pkletd.put("classy", manifest)
    pkletd.wait_phase("classy", "Failed")
    (event,) = [e for e in pkletd.events() if e["reason"] == "RuntimeClassUnavailable"]
    assert event["message"] == (
        'runtimeClassName "test" cannot be resolved: the node runs standalone, '
        "with no API server to read RuntimeClasses from"
    )
    assert not [
        s for s in list_pod_sandboxes(pkletd.endpoint) if s.metadata.name.startswith("classy")
    ]
