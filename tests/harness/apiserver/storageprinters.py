"""The ``kubectl get`` columns of the storage kinds, as kube-apiserver's printers compute them
(``printPersistentVolume``, ``printPersistentVolumeClaim``, ``printStorageClass``,
``printCSIDriver``, ``printCSINode``, ``printVolumeAttachment``)::

    kubectl get pv      NAME CAPACITY ACCESS MODES RECLAIM POLICY STATUS CLAIM STORAGECLASS
                        VOLUMEATTRIBUTESCLASS REASON AGE [VOLUMEMODE]
    kubectl get pvc     NAME STATUS VOLUME CAPACITY ACCESS MODES STORAGECLASS
                        VOLUMEATTRIBUTESCLASS AGE [VOLUMEMODE]
    kubectl get sc      NAME PROVISIONER RECLAIMPOLICY VOLUMEBINDINGMODE ALLOWVOLUMEEXPANSION AGE
    kubectl get csidriver  NAME ATTACHREQUIRED PODINFOONMOUNT STORAGECAPACITY TOKENREQUESTS
                        REQUIRESREPUBLISH MODES AGE
    kubectl get csinode NAME DRIVERS AGE
    kubectl get volumeattachment  NAME ATTACHER PV NODE ATTACHED AGE

Access modes print short (RWO, ROX, RWX, RWOP); a deleted volume or claim is Terminating; the
default StorageClass's name is followed by ``(default)``.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness.apiserver import quantities
from tests.harness.apiserver.kinds.volumes import DEFAULT_CLASS_ANNOTATION
from tests.harness.apiserver.printers import age

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority
SHORT_MODES = (
    ("ReadWriteOnce", "RWO"),
    ("ReadOnlyMany", "ROX"),
    ("ReadWriteMany", "RWX"),
    ("ReadWriteOncePod", "RWOP"),
)


def access_modes(modes: list[str] | None) -> str:
    """``GetAccessModesAsString``: the modes present, short, in a fixed order."""
    present = set(modes or [])
    return ",".join(short for mode, short in SHORT_MODES if mode in present)


def _size(amounts: Obj | None) -> str:
    value = (amounts or {}).get("storage")
    return quantities.canonical(str(value)) if value is not None else ""


def _phase(obj: Obj) -> str:
    if obj["metadata"].get("deletionTimestamp"):
        return "Terminating"
    return str((obj.get("status") or {}).get("phase", ""))


def _created(obj: Obj) -> str:
    return age(obj["metadata"].get("creationTimestamp"))


def pv_cells(pv: Obj) -> list[Any]:
    spec = pv.get("spec") or {}
    ref = spec.get("claimRef")
    claim = f"{ref.get('namespace', '')}/{ref.get('name', '')}" if ref else ""
    return [
        pv["metadata"]["name"],
        _size(spec.get("capacity")),
        access_modes(spec.get("accessModes")),
        spec.get("persistentVolumeReclaimPolicy", ""),
        _phase(pv),
        claim,
        spec.get("storageClassName", ""),
        spec.get("volumeAttributesClassName") or "<unset>",
        (pv.get("status") or {}).get("reason", ""),
        _created(pv),
        spec.get("volumeMode") or "<unset>",
    ]


def pvc_cells(pvc: Obj) -> list[Any]:
    spec, status = pvc.get("spec") or {}, pvc.get("status") or {}
    capacity = modes = ""
    if spec.get("volumeName"):
        modes = access_modes(status.get("accessModes"))
        capacity = _size(status.get("capacity"))
    return [
        pvc["metadata"]["name"],
        _phase(pvc),
        spec.get("volumeName", ""),
        capacity,
        modes,
        spec.get("storageClassName") or "",
        spec.get("volumeAttributesClassName") or "<unset>",
        _created(pvc),
        spec.get("volumeMode") or "<unset>",
    ]


def storage_class_cells(sc: Obj) -> list[Any]:
    name = sc["metadata"]["name"]
    if (sc["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true":
        name += " (default)"
    return [
        name,
        sc.get("provisioner", ""),
        sc.get("reclaimPolicy") or "Delete",
        sc.get("volumeBindingMode") or "Immediate",
        bool(sc.get("allowVolumeExpansion")),
        _created(sc),
    ]


def csi_driver_cells(driver: Obj) -> list[Any]:
    spec = driver.get("spec") or {}
    audiences = [t.get("audience", "") for t in spec.get("tokenRequests") or []]
    return [
        driver["metadata"]["name"],
        spec.get("attachRequired") is not False,
        bool(spec.get("podInfoOnMount")),
        bool(spec.get("storageCapacity")),
        ",".join(audiences) if audiences else "<unset>",
        bool(spec.get("requiresRepublish")),
        ",".join(spec.get("volumeLifecycleModes") or []) or "<none>",
        _created(driver),
    ]


def csi_node_cells(node: Obj) -> list[Any]:
    drivers = (node.get("spec") or {}).get("drivers") or []
    return [node["metadata"]["name"], len(drivers), _created(node)]


def volume_attachment_cells(attachment: Obj) -> list[Any]:
    spec = attachment.get("spec") or {}
    return [
        attachment["metadata"]["name"],
        spec.get("attacher", ""),
        (spec.get("source") or {}).get("persistentVolumeName") or "",
        spec.get("nodeName", ""),
        bool((attachment.get("status") or {}).get("attached")),
        _created(attachment),
    ]


STORAGE_PRINTERS: dict[str, tuple[list[Column], Callable[[Obj], list[Any]]]] = {
    "persistentvolumes": (
        [
            ("Name", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("Reclaim Policy", "string", 0),
            ("Status", "string", 0),
            ("Claim", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Reason", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
        pv_cells,
    ),
    "persistentvolumeclaims": (
        [
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Volume", "string", 0),
            ("Capacity", "string", 0),
            ("Access Modes", "string", 0),
            ("StorageClass", "string", 0),
            ("VolumeAttributesClass", "string", 0),
            ("Age", "string", 0),
            ("VolumeMode", "string", 1),
        ],
        pvc_cells,
    ),
    "storageclasses": (
        [
            ("Name", "string", 0),
            ("Provisioner", "string", 0),
            ("ReclaimPolicy", "string", 0),
            ("VolumeBindingMode", "string", 0),
            ("AllowVolumeExpansion", "string", 0),
            ("Age", "string", 0),
        ],
        storage_class_cells,
    ),
    "csidrivers": (
        [
            ("Name", "string", 0),
            ("AttachRequired", "boolean", 0),
            ("PodInfoOnMount", "boolean", 0),
            ("StorageCapacity", "boolean", 0),
            ("TokenRequests", "string", 0),
            ("RequiresRepublish", "boolean", 0),
            ("Modes", "string", 0),
            ("Age", "string", 0),
        ],
        csi_driver_cells,
    ),
    "csinodes": (
        [("Name", "string", 0), ("Drivers", "integer", 0), ("Age", "string", 0)],
        csi_node_cells,
    ),
    "volumeattachments": (
        [
            ("Name", "string", 0),
            ("Attacher", "string", 0),
            ("PV", "string", 0),
            ("Node", "string", 0),
            ("Attached", "boolean", 0),
            ("Age", "string", 0),
        ],
        volume_attachment_cells,
    ),
}
