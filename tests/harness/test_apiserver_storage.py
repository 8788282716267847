"""Persistent storage kinds on the test API server as kube-apiserver serves them, through the
official client and real kubectl: PersistentVolumes and claims (defaults, phases, validation,
a claim's immutable spec), StorageClass, CSIDriver (its spec defaults), CSINode and
VolumeAttachment (immutable spec, status subresource), discovery and ``kubectl get``
columns."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import watch

from tests.harness.apiserver.client import Kube, eventually, expect_failure


def csi_pv(name: str, handle: str = "vol-1", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {
            "capacity": {"storage": "1Gi"},
            "accessModes": ["ReadWriteOnce"],
            "csi": {"driver": "hostpath.csi.test", "volumeHandle": handle},
            **spec,
        },
    }
    return body


def claim(name: str, size: str = "1Gi", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
            **spec,
        },
    }


def attachment(name: str, node: str = "n1", pv: str = "pv-1") -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {
            "attacher": "hostpath.csi.test",
            "nodeName": node,
            "source": {"persistentVolumeName": pv},
        },
    }


def invalid(body: dict[str, Any]) -> list[str]:
    assert (body["code"], body["reason"]) == (422, "Invalid"), body
    return [f"{c['field']}: {c['message']}" for c in body["details"]["causes"]]


def test_a_volume_is_defaulted_and_becomes_available(kube: Kube) -> None:
    created = kube.core.create_persistent_volume(csi_pv("pv-1"))
    assert created.spec.persistent_volume_reclaim_policy == "Retain"
    assert created.spec.volume_mode == "Filesystem"
    assert created.status.phase == "Pending" and created.metadata.namespace is None
    available = eventually(
        lambda: kube.core.read_persistent_volume("pv-1").status.phase == "Available",
        what="the volume to become Available",
    )
    assert available
    assert kube.core.read_persistent_volume("pv-1").status.last_phase_transition_time
    body = expect_failure(kube.core.create_persistent_volume, csi_pv("pv-1"))
    assert (body["code"], body["reason"]) == (409, "AlreadyExists")
    assert body["message"] == 'persistentvolumes "pv-1" already exists'
    body = expect_failure(kube.core.read_persistent_volume, "missing")
    assert body["message"] == 'persistentvolumes "missing" not found'


def test_volume_validation(kube: Kube) -> None:
    no_source: dict[str, Any] = {
        "metadata": {"name": "bad"},
        "spec": {"capacity": {"storage": "1Gi"}, "accessModes": ["ReadWriteOnce"]},
    }
    body = expect_failure(kube.core.create_persistent_volume, no_source)
    assert body["message"] == (
        'PersistentVolume "bad" is invalid: spec: Required value: must specify a volume type'
    )
    two = csi_pv("bad", hostPath={"path": "/data"}, accessModes=[])
    two["spec"].pop("capacity")
    two["spec"]["csi"] = {"driver": "", "volumeHandle": ""}
    assert invalid(expect_failure(kube.core.create_persistent_volume, two)) == [
        "spec.accessModes: Required value",
        "spec.capacity: Required value",
        "spec.csi: Forbidden: may not specify more than 1 volume type",
        "spec.csi.driver: Required value",
        "spec.csi.volumeHandle: Required value",
    ]
    kube.core.create_persistent_volume(csi_pv("pv-1"))
    other_source = {"spec": {"csi": {"volumeHandle": "vol-2"}}}
    body = expect_failure(kube.core.patch_persistent_volume, "pv-1", other_source)
    assert body["message"].startswith(
        'PersistentVolume "pv-1" is invalid: spec.persistentvolumesource: Forbidden: '
        "spec.persistentvolumesource is immutable after creation"
    )


def test_a_claim_is_pending_and_its_spec_is_immutable(kube: Kube) -> None:
    created = kube.core.create_namespaced_persistent_volume_claim("default", claim("data"))
    assert created.status.phase == "Pending" and created.spec.volume_mode == "Filesystem"
    assert created.spec.resources.requests == {"storage": "1Gi"}
    body = expect_failure(
        kube.core.patch_namespaced_persistent_volume_claim,
        "data",
        "default",
        {"spec": {"resources": {"requests": {"storage": "2Gi"}}}},
    )
    assert body["message"].startswith(
        'PersistentVolumeClaim "data" is invalid: spec: Forbidden: spec is immutable after '
        "creation except resources.requests and volumeAttributesClassName for bound claims"
    )
    bad = claim("bad", size="0")
    bad["spec"]["accessModes"] = ["ReadWriteOncePod", "ReadOnlyMany"]
    assert invalid(
        expect_failure(kube.core.create_namespaced_persistent_volume_claim, "default", bad)
    ) == [
        "spec.accessModes: Forbidden: may not use ReadWriteOncePod with other access modes",
        'spec.resources[storage]: Invalid value: "0": must be greater than zero',
    ]
    none = claim("none")
    none["spec"] = {"resources": {}}
    assert invalid(
        expect_failure(kube.core.create_namespaced_persistent_volume_claim, "default", none)
    ) == [
        "spec.accessModes: Required value: at least 1 access mode is required",
        "spec.resources[storage]: Required value",
    ]


def test_a_bound_claim_grows_but_never_shrinks(kube: Kube) -> None:
    kube.core.create_persistent_volume(csi_pv("pv-1", capacity={"storage": "2Gi"}))
    kube.core.create_namespaced_persistent_volume_claim("default", claim("data"))
    kube.bind("default/data", "pv-1")
    bound = kube.core.read_namespaced_persistent_volume_claim("data", "default")
    assert bound.spec.volume_name == "pv-1" and bound.status.phase == "Bound"
    assert bound.status.capacity == {"storage": "2Gi"}
    assert bound.status.access_modes == ["ReadWriteOnce"]
    assert bound.metadata.annotations["pv.kubernetes.io/bind-completed"] == "yes"
    pv = kube.core.read_persistent_volume("pv-1")
    assert pv.status.phase == "Bound" and pv.spec.claim_ref.uid == bound.metadata.uid
    grow = {"spec": {"resources": {"requests": {"storage": "2Gi"}}}}
    kube.core.patch_namespaced_persistent_volume_claim("data", "default", grow)
    shrink = {"spec": {"resources": {"requests": {"storage": "512Mi"}}}}
    body = expect_failure(
        kube.core.patch_namespaced_persistent_volume_claim, "data", "default", shrink
    )
    assert invalid(body) == [
        "spec.resources.requests.storage: Forbidden: field can not be less than previous value"
    ]
    rename = {"spec": {"volumeName": "pv-2"}}
    body = expect_failure(
        kube.core.patch_namespaced_persistent_volume_claim, "data", "default", rename
    )
    assert body["code"] == 422


def test_deleting_a_bound_claim_releases_its_volume(kube: Kube) -> None:
    kube.core.create_persistent_volume(csi_pv("pv-1"))
    kube.core.create_namespaced_persistent_volume_claim("default", claim("data"))
    kube.bind("default/data", "pv-1")
    kube.core.delete_namespaced_persistent_volume_claim("data", "default")
    assert kube.core.read_persistent_volume("pv-1").status.phase == "Released"


def test_the_default_storage_class_is_given_to_a_claim(kube: Kube) -> None:
    default = {
        "metadata": {
            "name": "standard",
            "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
        },
        "provisioner": "hostpath.csi.test",
    }
    created = kube.storage.create_storage_class(default)
    assert created.reclaim_policy == "Delete" and created.volume_binding_mode == "Immediate"
    made = kube.core.create_namespaced_persistent_volume_claim("default", claim("data"))
    assert made.spec.storage_class_name == "standard"
    explicit = kube.core.create_namespaced_persistent_volume_claim(
        "default", claim("static", storageClassName="")
    )
    assert explicit.spec.storage_class_name == ""
    body = expect_failure(kube.storage.patch_storage_class, "standard", {"provisioner": "other"})
    assert invalid(body) == ["provisioner: Forbidden: updates to provisioner are forbidden."]
    status, body, _ = kube.raw(
        "POST", "/apis/storage.k8s.io/v1/storageclasses", {"metadata": {"name": "x"}}
    )
    assert status == 422, body
    assert invalid(body) == ["provisioner: Required value"]


def test_a_csi_driver_gets_the_spec_defaults(kube: Kube) -> None:
    driver = kube.storage.create_csi_driver({"metadata": {"name": "hostpath.csi.test"}, "spec": {}})
    spec = driver.spec
    assert (spec.attach_required, spec.pod_info_on_mount, spec.requires_republish) == (
        True,
        False,
        False,
    )
    assert spec.fs_group_policy == "ReadWriteOnceWithFSType"
    assert spec.volume_lifecycle_modes == ["Persistent"]
    assert spec.storage_capacity is False and spec.se_linux_mount is False
    body = expect_failure(
        kube.storage.patch_csi_driver, "hostpath.csi.test", {"spec": {"attachRequired": False}}
    )
    assert invalid(body) == ["spec.attachedRequired: Invalid value: false: field is immutable"]
    kube.storage.patch_csi_driver("hostpath.csi.test", {"spec": {"podInfoOnMount": True}})
    bad = {"metadata": {"name": "b.csi"}, "spec": {"volumeLifecycleModes": ["Forever"]}}
    assert invalid(expect_failure(kube.storage.create_csi_driver, bad)) == [
        'spec.volumeLifecycleModes: Unsupported value: "Forever": supported values: '
        '"Persistent", "Ephemeral"'
    ]


def test_csinode_drivers_are_validated_and_immutable(kube: Kube) -> None:
    driver = {
        "name": "hostpath.csi.test",
        "nodeID": "n1",
        "topologyKeys": ["topology.hostpath.csi/node"],
        "allocatable": {"count": 10},
    }
    created = kube.storage.create_csi_node(
        {"metadata": {"name": "n1"}, "spec": {"drivers": [driver]}}
    )
    assert created.spec.drivers[0].allocatable.count == 10
    changed = {**driver, "nodeID": "other"}
    body = expect_failure(
        kube.storage.replace_csi_node,
        "n1",
        {
            "metadata": {"name": "n1", "resourceVersion": created.metadata.resource_version},
            "spec": {"drivers": [changed]},
        },
    )
    assert invalid(body)[0].startswith("spec.drivers: Invalid value: ")
    assert invalid(body)[0].endswith(": field is immutable")
    bad = {**driver, "nodeID": "", "allocatable": {"count": -1}}
    body = expect_failure(
        kube.storage.create_csi_node, {"metadata": {"name": "n2"}, "spec": {"drivers": [bad]}}
    )
    assert invalid(body) == [
        "spec.drivers[0].nodeID: Required value",
        "spec.drivers[0].allocatable.count: Invalid value: -1: must be greater than or equal to 0",
    ]


def test_a_volume_attachment_spec_is_immutable_and_status_separate(kube: Kube) -> None:
    created = kube.storage.create_volume_attachment(attachment("va-1"))
    assert created.status is None or not created.status.attached
    body = expect_failure(
        kube.storage.patch_volume_attachment, "va-1", {"spec": {"nodeName": "n2"}}
    )
    assert invalid(body)[0].startswith("spec: Invalid value: ")
    kube.storage.patch_volume_attachment("va-1", {"status": {"attached": True}})
    assert not (kube.storage.read_volume_attachment("va-1").status or {})
    kube.set_attached("va-1")
    assert kube.storage.read_volume_attachment("va-1").status.attached is True
    no_source = attachment("va-2")
    no_source["spec"]["source"] = {}
    assert invalid(expect_failure(kube.storage.create_volume_attachment, no_source)) == [
        "spec.source: Required value: must specify exactly one of inlineVolumeSpec and "
        "persistentVolumeName"
    ]


def test_storage_objects_are_listed_with_selectors_and_watched(kube: Kube) -> None:
    kube.core.create_persistent_volume(
        {**csi_pv("a"), "metadata": {"name": "a", "labels": {"t": "x"}}}
    )
    kube.core.create_persistent_volume(csi_pv("b", handle="vol-2"))
    listed = kube.core.list_persistent_volume(label_selector="t=x")
    assert [pv.metadata.name for pv in listed.items] == ["a"]
    stream = watch.Watch().stream(
        kube.storage.list_volume_attachment,
        resource_version=kube.storage.list_volume_attachment().metadata.resource_version,
        timeout_seconds=5,
    )
    kube.storage.create_volume_attachment(attachment("va-1"))
    event = next(stream)
    assert (event["type"], event["object"].metadata.name) == ("ADDED", "va-1")


def test_kubectl_gets_storage_with_the_known_columns(kube: Kube) -> None:
    kube.storage.create_storage_class(
        {
            "metadata": {
                "name": "standard",
                "annotations": {"storageclass.kubernetes.io/is-default-class": "true"},
            },
            "provisioner": "hostpath.csi.test",
        }
    )
    kube.core.create_persistent_volume(csi_pv("pv-1", storageClassName="standard"))
    kube.core.create_namespaced_persistent_volume_claim("default", claim("data"))
    kube.bind("default/data", "pv-1")
    kube.storage.create_csi_driver({"metadata": {"name": "hostpath.csi.test"}, "spec": {}})
    kube.storage.create_csi_node(
        {"metadata": {"name": "n1"}, "spec": {"drivers": [{"name": "d.csi", "nodeID": "n1"}]}}
    )
    kube.storage.create_volume_attachment(attachment("va-1"))
    rows = {
        what: [line.split() for line in kube.kubectl("get", what).stdout.splitlines()]
        for what in ("pv", "pvc", "sc", "csidriver", "csinode", "volumeattachment")
    }
    assert rows["pv"][0] == [
        "NAME", "CAPACITY", "ACCESS", "MODES", "RECLAIM", "POLICY", "STATUS", "CLAIM",
        "STORAGECLASS", "VOLUMEATTRIBUTESCLASS", "REASON", "AGE",
    ]  # fmt: skip
    assert rows["pv"][1][:8] == [
        "pv-1", "1Gi", "RWO", "Retain", "Bound", "default/data", "standard", "<unset>",
    ]  # fmt: skip
    assert rows["pvc"][0] == [
        "NAME", "STATUS", "VOLUME", "CAPACITY", "ACCESS", "MODES", "STORAGECLASS",
        "VOLUMEATTRIBUTESCLASS", "AGE",
    ]  # fmt: skip
    assert rows["pvc"][1][:7] == ["data", "Bound", "pv-1", "1Gi", "RWO", "standard", "<unset>"]
    assert rows["sc"][0][:5] == [
        "NAME", "PROVISIONER", "RECLAIMPOLICY", "VOLUMEBINDINGMODE", "ALLOWVOLUMEEXPANSION",
    ]  # fmt: skip
    assert rows["sc"][1][:6] == [
        "standard", "(default)", "hostpath.csi.test", "Delete", "Immediate", "false",
    ]  # fmt: skip
    assert rows["csidriver"][0] == [
        "NAME", "ATTACHREQUIRED", "PODINFOONMOUNT", "STORAGECAPACITY", "TOKENREQUESTS",
        "REQUIRESREPUBLISH", "MODES", "AGE",
    ]  # fmt: skip
    assert rows["csidriver"][1][:7] == [
        "hostpath.csi.test", "true", "false", "false", "<unset>", "false", "Persistent",
    ]  # fmt: skip
    assert rows["csinode"][0] == ["NAME", "DRIVERS", "AGE"] and rows["csinode"][1][:2] == [
        "n1",
        "1",
    ]
    assert rows["volumeattachment"][0] == ["NAME", "ATTACHER", "PV", "NODE", "ATTACHED", "AGE"]
    assert rows["volumeattachment"][1][:5] == ["va-1", "hostpath.csi.test", "pv-1", "n1", "false"]
    wide = kube.kubectl("get", "pvc", "-o", "wide").stdout.splitlines()[1].split()
    assert wide[-1] == "Filesystem"


def test_kubectl_applies_and_deletes_storage_manifests(kube: Kube) -> None:
    documents = [
        {"apiVersion": "v1", "kind": "PersistentVolume", **csi_pv("pv-1")},
        {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **claim("data")},
        {
            "apiVersion": "storage.k8s.io/v1",
            "kind": "CSIDriver",
            "metadata": {"name": "hostpath.csi.test"},
            "spec": {"attachRequired": False},
        },
    ]
    for document in documents:
        kube.kubectl("apply", "-f", "-", input=json.dumps(document))
    shown = json.loads(kube.kubectl("get", "csidriver", "hostpath.csi.test", "-o", "json").stdout)
    assert shown["spec"]["attachRequired"] is False
    assert shown["spec"]["fsGroupPolicy"] == "ReadWriteOnceWithFSType"
    resources = kube.kubectl("api-resources", "--api-group=storage.k8s.io").stdout
    assert "volumeattachments" in resources and "csinodes" in resources
    kube.kubectl("delete", "pvc", "data")
    kube.kubectl("delete", "pv", "pv-1")
    assert kube.core.list_persistent_volume().items == []
