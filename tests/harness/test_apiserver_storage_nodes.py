"""What a kubelet (``system:node:n1``) may do with storage objects on the test API server, as
the Node authorizer and NodeRestriction allow it: claims its pods use (generic ephemeral ones
included), the volumes bound to them and the secrets their CSI sources give the node, the
VolumeAttachments to it, every CSIDriver, its own CSINode; everything else is a 403 with the
real texts, through the official client and real kubectl."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness.apiserver.client import Kube, eventually, expect_failure
from tests.harness.test_apiserver_storage import attachment, claim, csi_pv

NODE_GROUPS = ["system:nodes"]
NO_RELATIONSHIP = "no relationship found between node 'n1' and this object"


def forbidden(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    body = expect_failure(call, *args, **kwargs)
    assert (body["code"], body["reason"]) == (403, "Forbidden"), body
    return str(body["message"])


def pod_with_volumes(name: str, node: str, *volumes: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "containers": [{"name": "app", "image": "busybox:1.36"}],
            "volumes": list(volumes),
        },
    }


def ephemeral_volume(name: str) -> dict[str, Any]:
    template = {
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Gi"}}}
    }
    return {"name": name, "ephemeral": {"volumeClaimTemplate": template}}


def storage_for_n1(kube: Kube) -> Kube:
    """Pod ``web`` on n1 with claim ``data`` (bound to ``pv-1``, whose CSI source names
    secrets) and an ephemeral volume; other objects nobody on n1 uses."""
    secret_refs = {
        "nodeStageSecretRef": {"name": "stage", "namespace": "default"},
        "nodePublishSecretRef": {"name": "publish", "namespace": "default"},
        "controllerPublishSecretRef": {"name": "controller", "namespace": "default"},
    }
    pv = csi_pv("pv-1")
    pv["spec"]["csi"].update(secret_refs)
    kube.core.create_persistent_volume(pv)
    kube.core.create_persistent_volume(csi_pv("pv-2", handle="vol-2"))
    for name in ("stage", "publish", "controller"):
        kube.core.create_namespaced_secret("default", {"metadata": {"name": name}})
    for name in ("data", "other"):
        kube.core.create_namespaced_persistent_volume_claim("default", claim(name))
    kube.bind("default/data", "pv-1")
    kube.bind("default/other", "pv-2")
    kube.core.create_namespaced_pod(
        "default",
        pod_with_volumes(
            "web",
            "n1",
            {"name": "d", "persistentVolumeClaim": {"claimName": "data"}},
            ephemeral_volume("scratch"),
        ),
    )
    kube.storage.create_volume_attachment(attachment("va-n1", node="n1"))
    kube.storage.create_volume_attachment(attachment("va-n2", node="n2"))
    return kube.as_user("system:node:n1", NODE_GROUPS)


def test_a_node_gets_the_claims_volumes_and_secrets_of_its_pods(kube: Kube) -> None:
    node = storage_for_n1(kube)
    assert node.core.read_namespaced_persistent_volume_claim("data", "default").spec
    eventually(
        lambda: (
            kube.core.list_namespaced_persistent_volume_claim(
                "default", field_selector="metadata.name=web-scratch"
            ).items
        ),
        what="the ephemeral claim",
    )
    assert node.core.read_namespaced_persistent_volume_claim("web-scratch", "default")
    assert node.core.read_persistent_volume("pv-1").spec.csi.volume_handle == "vol-1"
    assert node.core.read_namespaced_secret("stage", "default")
    assert node.core.read_namespaced_secret("publish", "default")
    message = forbidden(node.core.read_namespaced_persistent_volume_claim, "other", "default")
    assert message == (
        'persistentvolumeclaims "other" is forbidden: User "system:node:n1" cannot get '
        'resource "persistentvolumeclaims" in API group "" in the namespace "default": '
        + NO_RELATIONSHIP
    )
    message = forbidden(node.core.read_persistent_volume, "pv-2")
    assert message == (
        'persistentvolumes "pv-2" is forbidden: User "system:node:n1" cannot get resource '
        '"persistentvolumes" in API group "" at the cluster scope: ' + NO_RELATIONSHIP
    )
    assert forbidden(node.core.read_namespaced_secret, "controller", "default").endswith(
        NO_RELATIONSHIP
    )
    assert forbidden(node.core.list_persistent_volume).endswith(
        "can only get individual resources of this type"
    )
    kube.core.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    assert forbidden(node.core.read_persistent_volume, "pv-1").endswith(NO_RELATIONSHIP)


def test_a_node_gets_only_attachments_to_itself_and_reads_every_driver(kube: Kube) -> None:
    node = storage_for_n1(kube)
    assert node.storage.read_volume_attachment("va-n1").spec.node_name == "n1"
    message = forbidden(node.storage.read_volume_attachment, "va-n2")
    assert message == (
        'volumeattachments.storage.k8s.io "va-n2" is forbidden: User "system:node:n1" cannot '
        'get resource "volumeattachments" in API group "storage.k8s.io" at the cluster '
        "scope: " + NO_RELATIONSHIP
    )
    assert forbidden(node.storage.list_volume_attachment).endswith(
        "can only get individual resources of this type"
    )
    kube.storage.create_csi_driver({"metadata": {"name": "hostpath.csi.test"}, "spec": {}})
    assert [d.metadata.name for d in node.storage.list_csi_driver().items] == ["hostpath.csi.test"]
    assert node.storage.read_csi_driver("hostpath.csi.test").spec.attach_required is True
    forbidden(node.storage.delete_csi_driver, "hostpath.csi.test")
    shown = node.kubectl("get", "volumeattachment", "va-n1").stdout
    assert "va-n1" in shown
    denied = node.kubectl("get", "pvc", "other", check=False)
    assert denied.returncode != 0 and NO_RELATIONSHIP in denied.stderr


def test_a_node_writes_only_its_own_csinode(kube: Kube) -> None:
    node = kube.as_user("system:node:n1", NODE_GROUPS)
    driver = {"name": "hostpath.csi.test", "nodeID": "n1"}
    node.storage.create_csi_node({"metadata": {"name": "n1"}, "spec": {"drivers": [driver]}})
    message = forbidden(
        node.storage.create_csi_node, {"metadata": {"name": "n2"}, "spec": {"drivers": []}}
    )
    assert message == (
        'csinodes.storage.k8s.io "n2" is forbidden: can only access CSINode with the same '
        "name as the requesting node"
    )
    node.storage.patch_csi_node("n1", {"spec": {"drivers": []}})
    kube.storage.create_csi_node({"metadata": {"name": "n2"}, "spec": {"drivers": []}})
    message = forbidden(node.storage.delete_csi_node, "n2")
    assert message.endswith("can only access CSINode with the same name as the requesting node")
    assert forbidden(node.storage.list_csi_node).endswith(
        "can only get, create, update, patch, or delete a CSINode"
    )
    node.storage.delete_csi_node("n1")


def test_a_node_updates_only_resize_fields_of_a_claim_status(kube: Kube) -> None:
    node = storage_for_n1(kube)
    resized = {"status": {"capacity": {"storage": "2Gi"}}}
    node.core.patch_namespaced_persistent_volume_claim_status("data", "default", resized)
    message = forbidden(
        node.core.patch_namespaced_persistent_volume_claim_status,
        "data",
        "default",
        {"status": {"phase": "Lost"}},
    )
    assert message == (
        'persistentvolumeclaims "data" is forbidden: node "n1" is not allowed to update fields '
        "other than status.capacity and status.conditions"
    )
    forbidden(node.core.patch_namespaced_persistent_volume_claim, "data", "default", resized)


def test_a_node_reports_volumes_in_use_in_its_status(kube: Kube) -> None:
    node = kube.as_user("system:node:n1", NODE_GROUPS)
    node.core.create_node({"metadata": {"name": "n1"}})
    in_use = ["kubernetes.io/csi/hostpath.csi.test^vol-1"]
    node.core.patch_node_status("n1", {"status": {"volumesInUse": in_use}})
    assert kube.core.read_node("n1").status.volumes_in_use == in_use
