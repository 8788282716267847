"""kube-controller-manager's storage controllers on the test API server: the ephemeral volume
controller (a pod's ``<pod>-<volume>`` claim, owned by the pod, collected with it; a claim of
that name not owned by the pod left alone) and the attach/detach controller (VolumeAttachment
``csi-<sha256>`` for a CSI volume of a pod on a managed node, ``volumesAttached`` once
attached, detached when no pod uses it and the node no longer reports it in use)."""

from __future__ import annotations

import hashlib
from typing import Any

from tests.harness.apiserver.client import Kube, eventually
from tests.harness.test_apiserver_storage import claim, csi_pv
from tests.harness.test_apiserver_storage_nodes import ephemeral_volume, pod_with_volumes

CMAD = "volumes.kubernetes.io/controller-managed-attach-detach"
DRIVER = "hostpath.csi.test"
VOLUME = f"kubernetes.io/csi/{DRIVER}^vol-1"


def va_name(handle: str, node: str) -> str:
    return "csi-" + hashlib.sha256(f"{handle}{DRIVER}{node}".encode()).hexdigest()


def managed_node(kube: Kube, name: str = "n1", managed: bool = True) -> None:
    annotations = {CMAD: "true"} if managed else {}
    kube.core.create_node({"metadata": {"name": name, "annotations": annotations}})


def bound_claim(kube: Kube, name: str = "data", pv: str = "pv-1") -> None:
    kube.core.create_persistent_volume(csi_pv(pv))
    kube.core.create_namespaced_persistent_volume_claim("default", claim(name))
    kube.bind(f"default/{name}", pv)


def uses_claim(name: str, claim_name: str = "data", node: str = "n1") -> dict[str, Any]:
    volume = {"name": "d", "persistentVolumeClaim": {"claimName": claim_name}}
    return pod_with_volumes(name, node, volume)


def attachments(kube: Kube) -> list[str]:
    return [a.metadata.name for a in kube.storage.list_volume_attachment().items]


def attached_volumes(kube: Kube, node: str = "n1") -> list[str]:
    status = kube.core.read_node(node).status
    return [v.name for v in (status.volumes_attached if status else None) or []]


def test_an_ephemeral_volume_gets_a_claim_owned_by_its_pod(kube: Kube) -> None:
    volume = ephemeral_volume("scratch")
    volume["ephemeral"]["volumeClaimTemplate"]["metadata"] = {"labels": {"app": "web"}}
    pod = kube.core.create_namespaced_pod("default", pod_with_volumes("web", "", volume))
    made = kube.core.read_namespaced_persistent_volume_claim("web-scratch", "default")
    assert made.metadata.labels == {"app": "web"} and made.status.phase == "Pending"
    owner = made.metadata.owner_references[0]
    assert (owner.kind, owner.name, owner.uid, owner.controller) == (
        "Pod",
        "web",
        pod.metadata.uid,
        True,
    )
    assert made.spec.resources.requests == {"storage": "1Gi"}
    kube.core.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    eventually(
        lambda: not kube.core.list_namespaced_persistent_volume_claim("default").items,
        what="the claim to be collected with its pod",
    )


def test_a_claim_not_owned_by_the_pod_is_left_alone(kube: Kube) -> None:
    kube.core.create_namespaced_persistent_volume_claim("default", claim("web-scratch"))
    kube.core.create_namespaced_pod(
        "default", pod_with_volumes("web", "", ephemeral_volume("scratch"))
    )
    found = kube.core.read_namespaced_persistent_volume_claim("web-scratch", "default")
    assert not found.metadata.owner_references
    kube.core.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    assert kube.core.read_namespaced_persistent_volume_claim("web-scratch", "default")


def test_a_csi_volume_is_attached_then_detached_when_no_longer_in_use(kube: Kube) -> None:
    managed_node(kube)
    bound_claim(kube)
    kube.core.create_namespaced_pod("default", uses_claim("web"))
    name = va_name("vol-1", "n1")
    made = kube.storage.read_volume_attachment(name)
    assert (made.spec.attacher, made.spec.node_name) == (DRIVER, "n1")
    assert made.spec.source.persistent_volume_name == "pv-1"
    assert attached_volumes(kube) == []
    kube.set_attached(name)
    assert attached_volumes(kube) == [VOLUME]
    assert kube.core.read_node("n1").status.volumes_attached[0].device_path == ""
    node = kube.as_user("system:node:n1", ["system:nodes"])
    node.core.patch_node_status("n1", {"status": {"volumesInUse": [VOLUME]}})
    kube.core.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    assert attachments(kube) == [name] and attached_volumes(kube) == [VOLUME]
    node.core.patch_node_status("n1", {"status": {"volumesInUse": None}})
    assert attachments(kube) == [] and attached_volumes(kube) == []


def test_two_pods_on_one_volume_share_one_attachment(kube: Kube) -> None:
    managed_node(kube)
    bound_claim(kube)
    kube.core.create_namespaced_pod("default", uses_claim("a"))
    kube.core.create_namespaced_pod("default", uses_claim("b"))
    assert attachments(kube) == [va_name("vol-1", "n1")]
    kube.core.delete_namespaced_pod("a", "default", grace_period_seconds=0)
    assert attachments(kube) == [va_name("vol-1", "n1")]
    kube.core.delete_namespaced_pod("b", "default", grace_period_seconds=0)
    assert attachments(kube) == []


def test_the_attachment_waits_for_the_claim_to_be_bound(kube: Kube) -> None:
    managed_node(kube)
    kube.core.create_persistent_volume(csi_pv("pv-1"))
    kube.core.create_namespaced_persistent_volume_claim("default", claim("data"))
    kube.core.create_namespaced_pod("default", uses_claim("web"))
    assert attachments(kube) == []
    kube.bind("default/data", "pv-1")
    assert attachments(kube) == [va_name("vol-1", "n1")]


def test_no_attachment_when_not_required_inline_or_unmanaged(kube: Kube) -> None:
    managed_node(kube)
    managed_node(kube, "n2", managed=False)
    kube.storage.create_csi_driver(
        {"metadata": {"name": "other.csi.test"}, "spec": {"attachRequired": False}}
    )
    other = csi_pv("pv-2", handle="vol-2")
    other["spec"]["csi"]["driver"] = "other.csi.test"
    kube.core.create_persistent_volume(other)
    kube.core.create_namespaced_persistent_volume_claim("default", claim("quick"))
    kube.bind("default/quick", "pv-2")
    kube.core.create_namespaced_pod("default", uses_claim("no-attach", "quick"))
    inline = {"name": "i", "csi": {"driver": DRIVER, "volumeAttributes": {"size": "1Gi"}}}
    kube.core.create_namespaced_pod("default", pod_with_volumes("inline", "n1", inline))
    bound_claim(kube)
    kube.core.create_namespaced_pod("default", uses_claim("unmanaged", node="n2"))
    assert attachments(kube) == []
