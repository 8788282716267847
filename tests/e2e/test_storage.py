"""Persistent storage end to end: a real pkletd joined to the real control plane
(kube-apiserver with the Node authorizer and NodeRestriction; kube-controller-manager's
persistentvolume-binder, attachdetach, ephemeral-volume and pvc-protection controllers),
pods on containerd, and the test host-path CSI driver run as its own process and
registered through ``plugins_registry``, as a driver pod with node-driver-registrar would
be. The driver has no controller service, so no external-provisioner: volumes are made
statically and the PV controller binds them; the test plays the external-attacher.

A claim waits unbound with the kubelet's event, is bound by the PV controller, attached,
staged once and published; what one pod writes the next pod on the claim reads; a SIGKILLed pkletd
finds the volume mounted and mounts nothing twice; a deleted pod's volume is unpublished
and unstaged before the pod leaves the API. A generic ephemeral volume comes and goes
with its pod; an inline CSI volume carries the pod's identity; a driver that is away when
its pod goes holds the pod until it is back. A claim deleted while its pod runs stays
(pvc-protection) and the pod keeps its volume across a restart. A claim of a
WaitForFirstConsumer class is bound by kube-scheduler as it places its pod on the node."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.harness.apiserver.client import Kube, found_or_none
from tests.harness.controlplane import ControlPlane
from tests.harness.csidriver import CsiDriverProcess, DriverConfig
from tests.harness.node import BUSYBOX, NODE, Pkletd, exec_in, join, wait_for

pytestmark = pytest.mark.slow

DRIVER = "hostpath.csi.pkletd.test"
UNIQUE = f"kubernetes.io/csi/{DRIVER}^vol-1"
LOOP = "trap 'exit 0' TERM; while true; do sleep 1; done"


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane) -> Iterator[Pkletd]:
    yield join(pkletd, control_plane)


@pytest.fixture
def driver(node: Pkletd, tmp_path: Path) -> Iterator[CsiDriverProcess]:
    yield from registered_driver(node, tmp_path)


def registered_driver(node: Pkletd, tmp_path: Path) -> Iterator[CsiDriverProcess]:
    """The test driver, started and registered on ``node``; stopped after."""
    config = DriverConfig.for_kubelet(
        node.root_dir, DRIVER, "hostpath-1", tmp_path / "data", tmp_path / "calls.jsonl"
    )
    process = CsiDriverProcess(config)
    process.start()
    wait_for("the driver registered", lambda: node_has_driver(node), timeout=30)
    yield process
    process.stop()


def node_has_driver(node: Pkletd) -> bool:
    return [d["name"] for d in node.status().get("csi_drivers", [])] == [DRIVER]


def csi_driver(kube: Kube, **spec: Any) -> None:
    kube.storage.create_csi_driver({"metadata": {"name": DRIVER}, "spec": spec})


def volume(kube: Kube, name: str = "pv-1", handle: str = "vol-1", **more: Any) -> None:
    spec = {
        "capacity": {"storage": "1Gi"},
        "accessModes": ["ReadWriteOnce"],
        "persistentVolumeReclaimPolicy": "Retain",
        "csi": {"driver": DRIVER, "volumeHandle": handle, "fsType": "ext4"},
        **more,
    }
    kube.core.create_persistent_volume({"metadata": {"name": name}, "spec": spec})


def claim(kube: Kube, name: str = "data", **more: Any) -> None:
    spec = {
        "accessModes": ["ReadWriteOnce"],
        "resources": {"requests": {"storage": "1Gi"}},
        **more,
    }
    kube.core.create_namespaced_persistent_volume_claim(
        "default", {"metadata": {"name": name}, "spec": spec}
    )


def pod(name: str, volume: dict[str, Any], command: str = LOOP) -> dict[str, Any]:
    return {
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": NODE,
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 1,
            "volumes": [volume],
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", command],
                    "volumeMounts": [{"name": volume["name"], "mountPath": "/data"}],
                }
            ],
        },
    }


CLAIMED = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}


def container(node: Pkletd, name: str) -> str:
    (found,) = node.pods()[name]["containers"]
    return str(found["container_id"])


def gone_from_api(kube: Kube, name: str) -> bool:
    try:
        kube.core.read_namespaced_pod(name, "default")
    except ApiException as exc:
        return exc.status == 404
    return False


def delete(kube: Kube, name: str) -> None:
    kube.core.delete_namespaced_pod(name, "default")
    wait_for(f"{name} gone from the API", lambda: gone_from_api(kube, name), timeout=60)


def events(kube: Kube, pod_name: str, reason: str) -> list[str]:
    found = kube.core.list_namespaced_event("default").items
    return [e.message for e in found if e.involved_object.name == pod_name and e.reason == reason]


def mount_count(path: Path) -> int:
    lines = Path("/proc/self/mountinfo").read_text().splitlines()
    return sum(1 for line in lines if line.split()[4] == str(path))


def api_claim(kube: Kube, name: str) -> Any:
    """The claim in the API, None while there is none (the ephemeral volume controller
    makes a pod's claim after the pod)."""
    return found_or_none(kube.core.read_namespaced_persistent_volume_claim, name, "default")


def claim_bound(kube: Kube, name: str) -> bool:
    """The PV controller has bound the claim (its resync: up to 15 s after the volume)."""
    found = kube.core.read_namespaced_persistent_volume_claim(name, "default")
    return bool(found.status.phase == "Bound")


def no_attachment(kube: Kube) -> bool:
    return not kube.storage.list_volume_attachment().items


def attach(kube: Kube) -> None:
    """Mark the VolumeAttachment the attach/detach controller made attached, as the
    driver's external-attacher does."""
    made = wait_for(
        "the VolumeAttachment",
        lambda: [
            a.metadata.name
            for a in kube.storage.list_volume_attachment().items
            if not (a.status and a.status.attached)
        ],
    )
    kube.set_attached(made[0])


def methods(driver: CsiDriverProcess) -> list[str]:
    """The volume calls (not the queries: NodeGetVolumeStats comes from the stats)."""
    found = (c["method"] for c in driver.calls())
    return [m for m in found if m.startswith("Node") and not m.startswith("NodeGet")]


def volumes_in_use(kube: Kube) -> list[str]:
    return list(kube.core.read_node(NODE).status.volumes_in_use or [])


def test_a_claim_keeps_its_data_across_pods_and_a_killed_pkletd(
    node: Pkletd, kube: Kube, driver: CsiDriverProcess
) -> None:
    csi_driver(kube)  # attachRequired by default: the attach/detach controller attaches
    claim(kube)
    kube.core.create_namespaced_pod(
        "default", pod("writer", CLAIMED, f"echo hello >/data/greeting; {LOOP}")
    )
    wait_for(
        "the unbound claim's event",
        lambda: any("PVC is not bound" in m for m in events(kube, "writer", "FailedMount")),
    )
    waiting = lambda: kube.core.read_namespaced_pod("writer", "default").status  # noqa: E731
    status = wait_for("the pod's status", lambda: waiting().container_statuses)
    assert waiting().phase == "Pending"
    assert status[0].state.waiting.reason == "ContainerCreating"

    volume(kube)  # the PV controller binds the claim to it
    wait_for("the claim bound", lambda: claim_bound(kube, "data"), timeout=60)
    attach(kube)
    node.wait_api_pod("writer", timeout=60)
    target = (
        node.root_dir
        / "pods"
        / node.pods()["writer"]["uid"]
        / "volumes/kubernetes.io~csi/data/mount"
    )
    assert methods(driver).count("NodeStageVolume") == 1
    assert methods(driver).count("NodePublishVolume") == 1
    wait_for("the volume in use on the node", lambda: volumes_in_use(kube) == [UNIQUE])
    wait_for(
        "the greeting",
        lambda: exec_in(node, container(node, "writer"), "cat", "/data/greeting") == "hello\n",
    )

    node.kill()  # SIGKILL: the pods stay, the volume stays mounted
    node.start()
    node.wait_api_pod("writer")
    assert methods(driver).count("NodePublishVolume") == 1 and mount_count(target) == 1

    delete(kube, "writer")
    assert methods(driver)[-2:] == ["NodeUnpublishVolume", "NodeUnstageVolume"]
    assert not any(
        str(node.root_dir) in line for line in Path("/proc/self/mountinfo").read_text().splitlines()
    )
    wait_for("no volume in use", lambda: volumes_in_use(kube) == [])
    wait_for("the writer's attachment detached", lambda: no_attachment(kube), timeout=60)

    kube.core.create_namespaced_pod("default", pod("reader", CLAIMED))
    attach(kube)  # the attach/detach controller attaches it again for the reader
    node.wait_api_pod("reader", timeout=60)
    assert exec_in(node, container(node, "reader"), "cat", "/data/greeting") == "hello\n"
    delete(kube, "reader")


def test_ephemeral_and_inline_volumes_come_and_go_with_their_pods(
    node: Pkletd, kube: Kube, driver: CsiDriverProcess
) -> None:
    modes = ["Persistent", "Ephemeral"]
    csi_driver(kube, attachRequired=False, podInfoOnMount=True, volumeLifecycleModes=modes)

    template = {
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }
    scratch = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": template}}
    kube.core.create_namespaced_pod(
        "default", pod("builder", scratch, f"echo built >/data/out; {LOOP}")
    )
    made = wait_for("the ephemeral claim", lambda: api_claim(kube, "builder-scratch"))
    assert made.metadata.owner_references[0].name == "builder"
    volume(kube, "pv-2", "vol-2")
    wait_for("the claim bound", lambda: claim_bound(kube, "builder-scratch"), timeout=60)
    node.wait_api_pod("builder", timeout=60)
    assert (driver.config.data_dir / "vol-2" / "out").read_text() == "built\n"

    inline = {"name": "cache", "csi": {"driver": DRIVER, "volumeAttributes": {"size": "1Mi"}}}
    kube.core.create_namespaced_pod("default", pod("cached", inline))
    node.wait_api_pod("cached", timeout=60)
    published = driver.wait_for_call(
        "NodePublishVolume", lambda c: c["volume_id"].startswith("csi-")
    )
    context = published["volume_context"]
    assert context["csi.storage.k8s.io/ephemeral"] == "true"
    assert context["csi.storage.k8s.io/pod.name"] == "cached"
    assert context["size"] == "1Mi"

    # the driver is away when the pod goes: the pod waits for it, then goes
    driver.kill()
    kube.core.delete_namespaced_pod("cached", "default")
    wait_for("the unpublish refused", lambda: "UnmountVolume.TearDown failed" in node.log())
    assert not gone_from_api(kube, "cached")
    driver.start()
    wait_for("cached gone from the API", lambda: gone_from_api(kube, "cached"), timeout=60)
    assert methods(driver)[-1] == "NodeUnpublishVolume"

    delete(kube, "builder")
    wait_for(
        "the ephemeral claim collected",
        lambda: not kube.core.list_namespaced_persistent_volume_claim("default").items,
    )
    assert methods(driver)[-2:] == ["NodeUnpublishVolume", "NodeUnstageVolume"]
    os.kill(node.workers()["plugin-watcher"]["pid"], signal.SIGKILL)  # nothing changes
    wait_for("plugin-watcher back", node.all_running, timeout=30)
    assert node_has_driver(node)


def claim_deleting(kube: Kube, name: str) -> bool:
    found = api_claim(kube, name)
    return found is not None and found.metadata.deletion_timestamp is not None


def test_a_deleted_claim_stays_while_its_pod_runs_and_through_a_restart(
    node: Pkletd, kube: Kube, driver: CsiDriverProcess
) -> None:
    """kube-controller-manager's pvc-protection controller keeps a claim a pod uses, being
    deleted, until no pod uses it (the test API server deleted it at once): the running
    pod keeps its volume, even once a restarted pkletd reads the claim anew; a new pod on
    it waits with the kubelet's event; once both pods are gone the claim goes."""
    csi_driver(kube, attachRequired=False)
    volume(kube)
    claim(kube)
    wait_for("the claim bound", lambda: claim_bound(kube, "data"), timeout=60)
    kube.core.create_namespaced_pod("default", pod("keeper", CLAIMED))
    node.wait_api_pod("keeper", timeout=60)
    running = container(node, "keeper")

    kube.core.delete_namespaced_persistent_volume_claim("data", "default")
    wait_for("the claim being deleted", lambda: claim_deleting(kube, "data"))
    node.kill()  # SIGKILL: the restarted pkletd reads the claim again, being deleted
    node.start()
    node.wait_api_pod("keeper")
    assert container(node, "keeper") == running
    assert methods(driver).count("NodePublishVolume") == 1
    assert exec_in(node, running, "touch", "/data/still-here") == ""

    kube.core.create_namespaced_pod("default", pod("late", CLAIMED))
    wait_for(
        "the late pod's event",
        lambda: any("is being deleted" in m for m in events(kube, "late", "FailedMount")),
    )
    assert node.pods()["late"]["phase"] == "Pending"
    delete(kube, "late")
    delete(kube, "keeper")
    assert methods(driver)[-2:] == ["NodeUnpublishVolume", "NodeUnstageVolume"]
    wait_for("the claim gone", lambda: api_claim(kube, "data") is None, timeout=60)


def on_this_node() -> dict[str, Any]:
    """A volume's nodeAffinity to the node (``kubernetes.io/hostname``)."""
    term = {"key": "kubernetes.io/hostname", "operator": "In", "values": [NODE]}
    return {"required": {"nodeSelectorTerms": [{"matchExpressions": [term]}]}}


def node_ready(kube: Kube) -> bool:
    conditions = kube.core.read_node(NODE).status.conditions or []
    return any(c.type == "Ready" and c.status == "True" for c in conditions)


def test_a_claim_waiting_for_its_first_consumer_is_bound_by_the_scheduler(
    node: Pkletd, kube: Kube, driver: CsiDriverProcess
) -> None:
    """A StorageClass with ``volumeBindingMode: WaitForFirstConsumer``: the PV controller
    leaves the claim to kube-scheduler, which binds it to a volume the node it picks for
    the pod can reach (the volume's nodeAffinity), then the pod to the node."""
    csi_driver(kube, attachRequired=False)
    binding = {"volumeBindingMode": "WaitForFirstConsumer"}
    kube.storage.create_storage_class(
        {"metadata": {"name": "local"}, "provisioner": "kubernetes.io/no-provisioner", **binding}
    )
    volume(kube, storageClassName="local", nodeAffinity=on_this_node())
    claim(kube, storageClassName="local")
    wait_for("the node Ready", lambda: node_ready(kube), timeout=60)
    assert not claim_bound(kube, "data")  # it waits for a pod

    scheduled = pod("consumer", CLAIMED, f"echo placed >/data/where; {LOOP}")
    del scheduled["spec"]["nodeName"]
    kube.core.create_namespaced_pod("default", scheduled)
    node.wait_api_pod("consumer", timeout=60)
    assert claim_bound(kube, "data")
    assert kube.core.read_namespaced_pod("consumer", "default").spec.node_name == NODE
    assert (driver.config.data_dir / "vol-1" / "where").read_text() == "placed\n"
    delete(kube, "consumer")
