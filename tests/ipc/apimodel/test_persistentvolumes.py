"""What a node reads about persistent storage: the chain from a pod's claim to the
volume, its CSIDriver, its VolumeAttachment and secrets, and the kubelet's names."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest
from pkletd.ipc.apimodel import persistentvolumes as pv
from pkletd.ipc.apimodel.fieldcheck import InvalidField
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind, references
from pkletd.ipc.apimodel.volumespec import parse_volumes

NODE = "node-a"
CLAIM = ObjectKey(ObjectKind.PERSISTENT_VOLUME_CLAIM, "shop", "data")
VOLUME = ObjectKey(ObjectKind.PERSISTENT_VOLUME, "", "pv-1")
DRIVER = ObjectKey(ObjectKind.CSI_DRIVER, "", "hostpath.csi.test")
ATTACHMENT = ObjectKey(
    ObjectKind.VOLUME_ATTACHMENT, "", pv.attachment_name("vol-1", "hostpath.csi.test", NODE)
)


def bound_claim() -> dict[str, Any]:
    return {"metadata": {"uid": "c1"}, "spec": {"volumeName": "pv-1"}, "status": {"phase": "Bound"}}


def csi_volume(**csi: Any) -> dict[str, Any]:
    source = {"driver": "hostpath.csi.test", "volumeHandle": "vol-1", **csi}
    return {"spec": {"csi": source, "claimRef": {"uid": "c1"}, "accessModes": ["ReadWriteOnce"]}}


def test_names_are_the_kubelets() -> None:
    digest = hashlib.sha256(b"vol-1hostpath.csi.testnode-a").hexdigest()
    assert ATTACHMENT.name == f"csi-{digest}"
    assert pv.unique_name("d", "h") == "kubernetes.io/csi/d^h"
    assert pv.inline_handle("uid", "v") == "csi-" + hashlib.sha256(b"uidv").hexdigest()
    assert pv.staging_dir_name("vol-1") == hashlib.sha256(b"vol-1").hexdigest()


def test_a_claim_leads_to_its_volume_driver_secrets_and_attachment() -> None:
    readings: dict[ObjectKey, dict[str, Any]] = {CLAIM: bound_claim()}
    assert pv.closure({CLAIM}, readings.get, NODE) == {CLAIM, VOLUME}
    readings[VOLUME] = csi_volume(nodePublishSecretRef={"name": "creds", "namespace": "vault"})
    secret = ObjectKey(ObjectKind.SECRET, "vault", "creds")
    assert pv.closure({CLAIM}, readings.get, NODE) == {CLAIM, VOLUME, DRIVER, secret}
    readings[DRIVER] = {}  # no CSIDriver: the driver attaches
    assert ATTACHMENT in pv.closure({CLAIM}, readings.get, NODE)
    readings[DRIVER] = {"spec": {"attachRequired": False}}
    assert ATTACHMENT not in pv.closure({CLAIM}, readings.get, NODE)


def test_an_unbound_or_missing_claim_leads_nowhere_and_is_read_again() -> None:
    pending = {"metadata": {"uid": "c1"}, "spec": {}, "status": {"phase": "Pending"}}
    assert pv.closure({CLAIM}, {CLAIM: pending}.get, NODE) == {CLAIM}
    assert not pv.settled(CLAIM, pending) and not pv.settled(CLAIM, {})
    assert pv.settled(CLAIM, bound_claim())
    assert pv.settled(DRIVER, {})  # any answer about a CSIDriver is final
    assert not pv.settled(ATTACHMENT, {"status": {"attached": False}})
    assert pv.settled(ATTACHMENT, {"status": {"attached": True}})


def test_readings_carry_the_api_defaults() -> None:
    driver = pv.csi_driver(None)
    assert driver.attach_required and driver.lifecycle_modes == ("Persistent",)
    assert driver.fs_group_policy == "ReadWriteOnceWithFSType"
    claim = pv.claim({"metadata": {"ownerReferences": [{"uid": "p", "controller": True}]}})
    assert (claim.phase, claim.owner_uid, claim.bound) == ("Pending", "p", False)
    local = pv.volume("pv-2", {"spec": {"local": {"path": "/mnt/disk"}, "volumeMode": "Block"}})
    found = (local.source_kind, local.host_path, local.volume_mode)
    assert found == ("local", "/mnt/disk", "Block")
    assert pv.volume("pv-3", {"spec": {"nfs": {"server": "x"}}}).source_kind == "nfs"
    body = pv.body_of({"metadata": {"uid": "u", "managedFields": [1]}, "spec": {"a": 1}})
    assert body == {"metadata": {"uid": "u"}, "spec": {"a": 1}, "status": {}}


def test_a_pod_references_its_claims_and_inline_drivers() -> None:
    pod = {
        "metadata": {"name": "db", "namespace": "shop", "uid": "u"},
        "spec": {
            "volumes": [
                {"name": "data", "persistentVolumeClaim": {"claimName": "data"}},
                {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
                {"name": "inline", "csi": {"driver": "d", "nodePublishSecretRef": {"name": "s"}}},
            ]
        },
    }
    assert references(pod).objects == {
        CLAIM,
        ObjectKey(ObjectKind.PERSISTENT_VOLUME_CLAIM, "shop", "db-scratch"),
        ObjectKey(ObjectKind.CSI_DRIVER, "", "d"),
        ObjectKey(ObjectKind.SECRET, "shop", "s"),
    }


def test_storage_volumes_are_parsed_and_checked() -> None:
    claim, inline = parse_volumes(
        {
            "volumes": [
                {"name": "a", "persistentVolumeClaim": {"claimName": "c", "readOnly": True}},
                {"name": "b", "csi": {"driver": "d", "volumeAttributes": {"size": "1Gi"}}},
            ]
        }
    )
    assert (claim.claim_name, claim.read_only) == ("c", True)
    assert inline.csi is not None and inline.csi.attributes == (("size", "1Gi"),)
    with pytest.raises(InvalidField, match=r"spec.volumes\[0\].persistentVolumeClaim.claimName"):
        parse_volumes({"volumes": [{"name": "a", "persistentVolumeClaim": {}}]})
    with pytest.raises(InvalidField, match=r"ephemeral.volumeClaimTemplate: required"):
        parse_volumes({"volumes": [{"name": "a", "ephemeral": {}}]})
    with pytest.raises(InvalidField, match=r"csi.driver"):
        parse_volumes({"volumes": [{"name": "a", "csi": {}}]})
