"""``storage.k8s.io/v1`` (all cluster-scoped): StorageClass, CSIDriver, CSINode and
VolumeAttachment (with a ``status`` subresource), as ``pkg/registry/storage`` and
``pkg/apis/storage/validation``.

* StorageClass: ``provisioner`` required (a qualified name), ``reclaimPolicy`` Delete and
  ``volumeBindingMode`` Immediate by default; parameters, provisioner, reclaim policy and
  binding mode never change.
* CSIDriver: the spec defaults ``attachRequired: true``, ``podInfoOnMount: false``,
  ``requiresRepublish: false``, ``storageCapacity: false``, ``seLinuxMount: false``,
  ``fsGroupPolicy: ReadWriteOnceWithFSType``, ``volumeLifecycleModes: [Persistent]``;
  ``attachRequired`` (reported as ``spec.attachedRequired``, as the real server spells it)
  and the modes never change.
* CSINode: named after its node; each driver has a CSI driver name, a ``nodeID`` (at most
  192 characters), qualified ``topologyKeys`` and an ``allocatable.count`` >= 0; an existing
  driver entry never changes (it is removed and added again).
* VolumeAttachment: ``attacher``, ``nodeName`` and exactly one ``source`` required; the spec
  never changes; the status is written through ``status`` only.
"""

from __future__ import annotations

from tests.harness.apiserver.kinds.base import Obj, StatusStrategy, Strategy, semantically_equal
from tests.harness.apiserver.validation import (
    FieldError,
    dns1123_subdomain,
    immutable,
    qualified_name,
    validate_meta_update,
)

GROUP = "storage.k8s.io"
RECLAIM_POLICIES = ("Delete", "Retain")
BINDING_MODES = ("Immediate", "WaitForFirstConsumer")
FS_GROUP_POLICIES = ("File", "None", "ReadWriteOnceWithFSType")
LIFECYCLE_MODES = ("Persistent", "Ephemeral")
CSI_DRIVER_DEFAULTS = {
    "attachRequired": True,
    "podInfoOnMount": False,
    "requiresRepublish": False,
    "storageCapacity": False,
    "seLinuxMount": False,
    "fsGroupPolicy": "ReadWriteOnceWithFSType",
}
NODE_ID_MAX = 192


def csi_driver_name(name: str, path: str) -> list[FieldError]:
    """``ValidateCSIDriverName`` (core): a driver name as PVs, CSINodes and attachers use it."""
    if not name:
        return [FieldError.required(path)]
    errs = [FieldError.too_long(path, 63)] if len(name) > 63 else []
    return errs + [FieldError.invalid(path, name, p) for p in dns1123_subdomain(name.lower())]


# --------------------------------------------------------------------------- StorageClass


class StorageClassStrategy(Strategy):
    kind = "StorageClass"
    group = GROUP
    return_deleted_object = True
    model = "V1StorageClass"
    namespaced = False

    def default(self, obj: Obj) -> None:
        obj.setdefault("reclaimPolicy", "Delete")
        obj.setdefault("volumeBindingMode", "Immediate")

    def validate(self, obj: Obj) -> list[FieldError]:
        errs = super().validate(obj)
        provisioner = obj.get("provisioner") or ""
        if not provisioner:
            errs.append(FieldError.required("provisioner"))
        else:
            errs += [
                FieldError.invalid("provisioner", provisioner.lower(), p)
                for p in qualified_name(provisioner.lower())
            ]
        policy = obj.get("reclaimPolicy")
        if policy and policy not in RECLAIM_POLICIES:
            errs.append(FieldError.not_supported("reclaimPolicy", policy, RECLAIM_POLICIES))
        mode = obj.get("volumeBindingMode")
        if mode not in BINDING_MODES:
            errs.append(FieldError.not_supported("volumeBindingMode", mode, BINDING_MODES))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old)
        for key in ("parameters", "provisioner", "reclaimPolicy"):
            if (new.get(key) or None) != (old.get(key) or None):
                errs.append(FieldError.forbidden(key, f"updates to {key} are forbidden."))
        if new.get("volumeBindingMode") != old.get("volumeBindingMode"):
            errs.append(immutable("volumeBindingMode", new.get("volumeBindingMode")))
        return errs


# --------------------------------------------------------------------------- CSIDriver


class CsiDriverStrategy(Strategy):
    kind = "CSIDriver"
    group = GROUP
    return_deleted_object = True
    model = "V1CSIDriver"
    namespaced = False

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        for key, value in CSI_DRIVER_DEFAULTS.items():
            if spec.get(key) is None:
                spec[key] = value
        if not spec.get("volumeLifecycleModes"):
            spec["volumeLifecycleModes"] = ["Persistent"]

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_driver_spec(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + _validate_driver_spec(new.get("spec") or {})
        spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        if spec.get("attachRequired") != old_spec.get("attachRequired"):
            errs.append(immutable("spec.attachedRequired", spec.get("attachRequired")))
        if spec.get("volumeLifecycleModes") != old_spec.get("volumeLifecycleModes"):
            errs.append(immutable("spec.volumeLifecycleModes", spec.get("volumeLifecycleModes")))
        return errs


def _validate_driver_spec(spec: Obj) -> list[FieldError]:
    errs = []
    policy = spec.get("fsGroupPolicy")
    if policy is not None and policy not in FS_GROUP_POLICIES:
        errs.append(FieldError.not_supported("spec.fsGroupPolicy", policy, FS_GROUP_POLICIES))
    audiences: set[str] = set()
    for i, request in enumerate(spec.get("tokenRequests") or []):
        audience = request.get("audience", "")
        if audience in audiences:
            errs.append(FieldError.duplicate(f"spec.tokenRequests[{i}].audience", audience))
        audiences.add(audience)
        seconds = request.get("expirationSeconds")
        if seconds is not None and seconds < 600:
            errs.append(
                FieldError.invalid(
                    f"spec.tokenRequests[{i}].expirationSeconds",
                    seconds,
                    "may not specify a duration less than 10 minutes",
                )
            )
    for mode in spec.get("volumeLifecycleModes") or []:
        if mode not in LIFECYCLE_MODES:
            errs.append(
                FieldError.not_supported("spec.volumeLifecycleModes", mode, LIFECYCLE_MODES)
            )
    return errs


def attach_required(driver: Obj | None) -> bool:
    """Whether volumes of this driver are attached: yes unless its CSIDriver says no."""
    if driver is None:
        return True
    return (driver.get("spec") or {}).get("attachRequired") is not False


# --------------------------------------------------------------------------- CSINode


class CsiNodeStrategy(Strategy):
    kind = "CSINode"
    group = GROUP
    return_deleted_object = True
    model = "V1CSINode"
    namespaced = False

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_node_drivers(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + _validate_node_drivers(new)
        old_drivers = {d.get("name"): d for d in _drivers(old)}
        for driver in _drivers(new):
            before = old_drivers.get(driver.get("name"))
            if before is not None and not semantically_equal(driver, before):
                errs.append(immutable("spec.drivers", driver))
        return errs


def _drivers(obj: Obj) -> list[Obj]:
    return list((obj.get("spec") or {}).get("drivers") or [])


def _validate_node_drivers(obj: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    seen: set[str] = set()
    for i, driver in enumerate(_drivers(obj)):
        path = f"spec.drivers[{i}]"
        name = driver.get("name", "")
        errs += csi_driver_name(name, f"{path}.name")
        node_id = driver.get("nodeID", "")
        if not node_id:
            errs.append(FieldError.required(f"{path}.nodeID"))
        elif len(node_id) > NODE_ID_MAX:
            errs.append(
                FieldError.invalid(
                    f"{path}.nodeID", node_id, f"must be {NODE_ID_MAX} characters or less"
                )
            )
        count = (driver.get("allocatable") or {}).get("count")
        if count is not None and count < 0:
            errs.append(
                FieldError.invalid(
                    f"{path}.allocatable.count", count, "must be greater than or equal to 0"
                )
            )
        if name in seen:
            errs.append(FieldError.duplicate(f"{path}.name", name))
        seen.add(name)
        keys: set[str] = set()
        for key in driver.get("topologyKeys") or []:
            if key in keys:
                errs.append(FieldError.duplicate(path, key))
            keys.add(key)
            errs += [FieldError.invalid(path, key, p) for p in qualified_name(key)]
    return errs


# --------------------------------------------------------------------------- VolumeAttachment


class VolumeAttachmentStrategy(Strategy):
    kind = "VolumeAttachment"
    group = GROUP
    return_deleted_object = True
    model = "V1VolumeAttachment"
    namespaced = False
    has_status = True

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_attachment_spec(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + _validate_attachment_spec(new.get("spec") or {})
        if not semantically_equal(new.get("spec"), old.get("spec")):
            errs.append(immutable("spec", new.get("spec")))
        return errs


class VolumeAttachmentStatusStrategy(StatusStrategy):
    pass


def _validate_attachment_spec(spec: Obj) -> list[FieldError]:
    errs = csi_driver_name(spec.get("attacher", ""), "spec.attacher")
    node = spec.get("nodeName", "")
    errs += [FieldError.invalid("spec.nodeName", node, p) for p in dns1123_subdomain(node)]
    source = spec.get("source") or {}
    inline, pv = source.get("inlineVolumeSpec"), source.get("persistentVolumeName")
    both = "must specify exactly one of inlineVolumeSpec and persistentVolumeName"
    if inline is None and pv is None:
        errs.append(FieldError.required("spec.source", both))
    elif inline is not None and pv is not None:
        errs.append(FieldError.forbidden("spec.source", both))
    elif pv is not None and not pv:
        errs.append(
            FieldError.required(
                "spec.source.persistentVolumeName", "must specify non empty persistentVolumeName"
            )
        )
    return errs
