"""PersistentVolumes (cluster-scoped) and PersistentVolumeClaims (namespaced), core/v1, each
with a ``status`` subresource, as ``pkg/registry/core/persistentvolume(claim)`` and
``pkg/apis/core/validation``.

Defaults: a volume's ``persistentVolumeReclaimPolicy`` Retain and ``volumeMode`` Filesystem,
a claim's ``volumeMode`` Filesystem. On create the status is reset: a volume is ``Pending``
(with ``lastPhaseTransitionTime``; the PV controller in ``storagecontrollers.py`` then makes
an unclaimed one ``Available``), a claim ``Pending``. Validation: access modes are required
and known (ReadWriteOncePod alone), a volume has ``capacity.storage`` and exactly one volume
source (a ``csi`` one with ``driver`` and ``volumeHandle``, secret refs with name and
namespace); a claim requests ``resources.requests.storage`` > 0. A volume's source and mode
never change; a claim's spec never changes after create but for ``volumeName`` set once and
``resources.requests`` growing while it is Bound. ``default_storage_class`` is the
DefaultStorageClass admission plugin.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.harness.apiserver import quantities
from tests.harness.apiserver.kinds.base import Obj, StatusStrategy, Strategy, semantically_equal
from tests.harness.apiserver.store import now_rfc3339
from tests.harness.apiserver.validation import (
    FieldError,
    dns1123_subdomain,
    immutable,
    validate_meta_update,
)

ACCESS_MODES = ("ReadOnlyMany", "ReadWriteMany", "ReadWriteOnce", "ReadWriteOncePod")
RECLAIM_POLICIES = ("Delete", "Recycle", "Retain")
VOLUME_MODES = ("Block", "Filesystem")
DEFAULT_CLASS_ANNOTATION = "storageclass.kubernetes.io/is-default-class"
# the volume sources of a PersistentVolumeSpec, in the order validation visits them
PV_SOURCES = (
    "gcePersistentDisk",
    "awsElasticBlockStore",
    "hostPath",
    "glusterfs",
    "nfs",
    "rbd",
    "quobyte",
    "cephfs",
    "iscsi",
    "cinder",
    "fc",
    "flocker",
    "flexVolume",
    "azureFile",
    "vsphereVolume",
    "azureDisk",
    "photonPersistentDisk",
    "portworxVolume",
    "scaleIO",
    "local",
    "storageos",
    "csi",
)
CSI_SECRET_REFS = (
    "controllerPublishSecretRef",
    "nodeStageSecretRef",
    "nodePublishSecretRef",
    "controllerExpandSecretRef",
    "nodeExpandSecretRef",
)


def _spec(obj: Obj) -> dict[str, Any]:
    spec: dict[str, Any] = obj.get("spec") or {}
    return spec


def storage_request(claim: Obj) -> str | None:
    requests = (_spec(claim).get("resources") or {}).get("requests") or {}
    value = requests.get("storage")
    return str(value) if value is not None else None


# --------------------------------------------------------------------------- volumes


class PersistentVolumeStrategy(Strategy):
    kind = "PersistentVolume"
    model = "V1PersistentVolume"
    namespaced = False
    has_status = True
    return_deleted_object = True

    def default(self, obj: Obj) -> None:
        spec = obj.setdefault("spec", {})
        spec.setdefault("persistentVolumeReclaimPolicy", "Retain")
        spec.setdefault("volumeMode", "Filesystem")

    def prepare_create(self, obj: Obj) -> None:
        super().prepare_create(obj)
        obj["status"] = {"phase": "Pending", "lastPhaseTransitionTime": now_rfc3339()}

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_pv_spec(_spec(obj))

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + _validate_pv_spec(_spec(new))
        new_spec, old_spec = _spec(new), _spec(old)
        sources = [k for k in PV_SOURCES if k in new_spec or k in old_spec]
        if any(not semantically_equal(new_spec.get(k), old_spec.get(k)) for k in sources):
            errs.append(
                FieldError.forbidden(
                    "spec.persistentvolumesource",
                    "spec.persistentvolumesource is immutable after creation",
                )
            )
        if new_spec.get("volumeMode") != old_spec.get("volumeMode"):
            errs.append(immutable("spec.volumeMode", new_spec.get("volumeMode")))
        return errs


class PersistentVolumeStatusStrategy(StatusStrategy):
    """``status``: a new phase stamps ``lastPhaseTransitionTime``."""

    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        status = new.setdefault("status", {})
        if status.get("phase") != (old.get("status") or {}).get("phase"):
            status["lastPhaseTransitionTime"] = now_rfc3339()


def _validate_pv_spec(spec: Obj) -> list[FieldError]:
    errs = _validate_access_modes(spec.get("accessModes") or [], "spec.accessModes", "")
    capacity = spec.get("capacity") or {}
    if not capacity:
        errs.append(FieldError.required("spec.capacity"))
    for key, value in capacity.items():
        if key != "storage":
            errs.append(FieldError.not_supported("spec.capacity", key, ["storage"]))
        elif quantities.parse(value) < 0:
            errs.append(
                FieldError.invalid(
                    "spec.capacity[storage]", value, "must be greater than or equal to 0"
                )
            )
    policy = spec.get("persistentVolumeReclaimPolicy")
    if policy and policy not in RECLAIM_POLICIES:
        errs.append(
            FieldError.not_supported("spec.persistentVolumeReclaimPolicy", policy, RECLAIM_POLICIES)
        )
    errs += _validate_class_and_mode(spec)
    sources = [key for key in PV_SOURCES if spec.get(key) is not None]
    if not sources:
        errs.append(FieldError.required("spec", "must specify a volume type"))
    for extra in sources[1:]:
        errs.append(
            FieldError.forbidden(f"spec.{extra}", "may not specify more than 1 volume type")
        )
    if spec.get("csi") is not None:
        errs += _validate_csi_source(spec["csi"])
    if spec.get("hostPath") is not None and not spec["hostPath"].get("path"):
        errs.append(FieldError.required("spec.hostPath.path"))
    return errs


def _validate_csi_source(csi: Obj) -> list[FieldError]:
    errs = []
    if not csi.get("driver"):
        errs.append(FieldError.required("spec.csi.driver"))
    if not csi.get("volumeHandle"):
        errs.append(FieldError.required("spec.csi.volumeHandle"))
    for key in CSI_SECRET_REFS:
        ref = csi.get(key)
        if ref is None:
            continue
        for part in ("name", "namespace"):
            if not ref.get(part):
                errs.append(FieldError.required(f"spec.csi.{key}.{part}"))
    return errs


def _validate_access_modes(modes: list[str], path: str, detail: str) -> list[FieldError]:
    if not modes:
        return [FieldError.required(path, detail)]
    errs = [FieldError.not_supported(path, m, ACCESS_MODES) for m in modes if m not in ACCESS_MODES]
    if "ReadWriteOncePod" in modes and len(modes) > 1:
        errs.append(
            FieldError.forbidden(path, "may not use ReadWriteOncePod with other access modes")
        )
    return errs


def _validate_class_and_mode(spec: Obj) -> list[FieldError]:
    errs = []
    mode = spec.get("volumeMode")
    if mode is not None and mode not in VOLUME_MODES:
        errs.append(FieldError.not_supported("spec.volumeMode", mode, VOLUME_MODES))
    class_name = spec.get("storageClassName") or ""
    errs += [
        FieldError.invalid("spec.storageClassName", class_name, p)
        for p in (dns1123_subdomain(class_name) if class_name else [])
    ]
    return errs


# --------------------------------------------------------------------------- claims


class PersistentVolumeClaimStrategy(Strategy):
    kind = "PersistentVolumeClaim"
    model = "V1PersistentVolumeClaim"
    has_status = True
    return_deleted_object = True

    def default(self, obj: Obj) -> None:
        obj.setdefault("spec", {}).setdefault("volumeMode", "Filesystem")

    def prepare_create(self, obj: Obj) -> None:
        super().prepare_create(obj)
        obj["status"] = {"phase": "Pending"}

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_pvc_spec(_spec(obj))

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + _validate_pvc_spec(_spec(new))
        return errs + _validate_pvc_spec_update(new, old)


class PersistentVolumeClaimStatusStrategy(StatusStrategy):
    pass


def _validate_pvc_spec(spec: Obj) -> list[FieldError]:
    errs = _validate_access_modes(
        spec.get("accessModes") or [], "spec.accessModes", "at least 1 access mode is required"
    )
    requests = (spec.get("resources") or {}).get("requests") or {}
    storage = requests.get("storage")
    if storage is None:
        errs.append(FieldError.required("spec.resources[storage]"))
    elif quantities.parse(storage) <= 0:
        errs.append(
            FieldError.invalid("spec.resources[storage]", storage, "must be greater than zero")
        )
    return errs + _validate_class_and_mode(spec)


def _validate_pvc_spec_update(new: Obj, old: Obj) -> list[FieldError]:
    new_spec, old_spec = copy.deepcopy(_spec(new)), copy.deepcopy(_spec(old))
    if not old_spec.get("volumeName"):
        old_spec["volumeName"] = new_spec.get("volumeName")  # set once, by the binder
    new_size, old_size = storage_request(new), storage_request(old)
    bound = (new.get("status") or {}).get("phase") == "Bound"
    if bound and new_size is not None and old_size is not None:
        new_spec["resources"]["requests"]["storage"] = old_size
    new_spec.pop("volumeAttributesClassName", None)
    old_spec.pop("volumeAttributesClassName", None)
    errs = []
    if not semantically_equal(new_spec, old_spec):
        errs.append(
            FieldError.forbidden(
                "spec",
                "spec is immutable after creation except resources.requests and "
                "volumeAttributesClassName for bound claims",
            )
        )
    if new_size and old_size and quantities.parse(new_size) < quantities.parse(old_size):
        errs.append(
            FieldError.forbidden(
                "spec.resources.requests.storage", "field can not be less than previous value"
            )
        )
    return errs


# --------------------------------------------------------------------------- admission


def default_storage_class(claim: Obj, classes: list[Obj]) -> None:
    """DefaultStorageClass: a claim that names no class gets the default one (the newest of
    those annotated ``storageclass.kubernetes.io/is-default-class: "true"``)."""
    spec = claim.setdefault("spec", {})
    if spec.get("storageClassName") is not None:
        return
    defaults = [
        c
        for c in classes
        if (c["metadata"].get("annotations") or {}).get(DEFAULT_CLASS_ANNOTATION) == "true"
    ]
    if defaults:
        newest = max(defaults, key=lambda c: c["metadata"].get("creationTimestamp", ""))
        spec["storageClassName"] = newest["metadata"]["name"]
