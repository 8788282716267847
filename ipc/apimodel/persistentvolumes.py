"""What a node reads about persistent storage, as the kubelet's volume manager reads it:
a pod's claim (PersistentVolumeClaim), the PersistentVolume bound to it, the CSI
driver's CSIDriver object and the VolumeAttachment the attach/detach controller makes,
and the names the kubelet derives from them.

The pod-objects worker reads each object whole; ``body`` is what travels to the parent
(``metadata`` uid, owners and deletion, ``spec``, ``status``). Both sides follow the same
chain (``derived``): a claim leads to its volume, a CSI volume to its driver's CSIDriver,
its VolumeAttachment and the Secrets its ``node*SecretRef`` name.

Names (``pkg/volume/csi``): a volume's unique name is
``kubernetes.io/csi/<driver>^<volumeHandle>``; its VolumeAttachment
``csi-<hex sha256(volumeHandle + driver + node)>``; an inline volume's handle
``csi-<hex sha256(pod uid + volume name)>``; its staging directory
``<hex sha256(volumeHandle)>``.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind

CSI_PLUGIN = "kubernetes.io/csi"
ACCESS_MODES = {  # the API's access mode -> the CSI access mode the kubelet asks for
    "ReadWriteOnce": "SINGLE_NODE_WRITER",
    "ReadOnlyMany": "MULTI_NODE_READER_ONLY",
    "ReadWriteMany": "MULTI_NODE_MULTI_WRITER",
    "ReadWriteOncePod": "SINGLE_NODE_SINGLE_WRITER",
}
PERSISTENT, EPHEMERAL = "Persistent", "Ephemeral"
Body = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class SecretRef:
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class CsiSource:
    """A CSI volume, from a PersistentVolume's ``csi`` or a pod's inline ``csi``."""

    driver: str
    handle: str
    read_only: bool = False
    fs_type: str = ""
    attributes: tuple[tuple[str, str], ...] = ()  # volumeAttributes, sorted
    stage_secret: SecretRef | None = None
    publish_secret: SecretRef | None = None


@dataclass(frozen=True, slots=True)
class Claim:
    uid: str
    phase: str
    volume_name: str
    volume_mode: str
    deleting: bool
    owner_uid: str  # the controller in its ownerReferences ("" if none)

    @property
    def bound(self) -> bool:
        return self.phase == "Bound" and bool(self.volume_name)


@dataclass(frozen=True, slots=True)
class Volume:
    """A PersistentVolume: its source (``csi``, or a host path for ``hostPath``/``local``,
    or only the source's name when pkletd does not serve it)."""

    name: str
    claim_uid: str
    source_kind: str
    csi: CsiSource | None
    host_path: str
    access_modes: tuple[str, ...]
    mount_options: tuple[str, ...]
    volume_mode: str


@dataclass(frozen=True, slots=True)
class CsiDriverSpec:
    """A CSIDriver's spec with the API's defaults (also what a missing object means,
    except that no object requires attach and allows only Persistent volumes)."""

    attach_required: bool = True
    pod_info_on_mount: bool = False
    fs_group_policy: str = "ReadWriteOnceWithFSType"
    lifecycle_modes: tuple[str, ...] = (PERSISTENT,)


@dataclass(frozen=True, slots=True)
class Attachment:
    attached: bool
    metadata: Mapping[str, str]
    error: str
    deleting: bool


def unique_name(driver: str, handle: str) -> str:
    return f"{CSI_PLUGIN}/{driver}^{handle}"


def attachment_name(handle: str, driver: str, node: str) -> str:
    return "csi-" + hashlib.sha256(f"{handle}{driver}{node}".encode()).hexdigest()


def inline_handle(pod_uid: str, volume_name: str) -> str:
    return "csi-" + hashlib.sha256(f"{pod_uid}{volume_name}".encode()).hexdigest()


def staging_dir_name(handle: str) -> str:
    return hashlib.sha256(handle.encode()).hexdigest()


# --- readings ----------------------------------------------------------------------------


def claim(body: Body) -> Claim:
    meta, spec, status = _parts(body)
    owners = [o for o in meta.get("ownerReferences") or () if isinstance(o, dict)]
    controller = next((o for o in owners if o.get("controller")), {})
    return Claim(
        uid=str(meta.get("uid") or ""),
        phase=str(status.get("phase") or "Pending"),
        volume_name=str(spec.get("volumeName") or ""),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
        deleting=bool(meta.get("deletionTimestamp")),
        owner_uid=str(controller.get("uid") or ""),
    )


def volume(name: str, body: Body) -> Volume:
    _, spec, _ = _parts(body)
    kinds = [k for k in _SOURCES if isinstance(spec.get(k), dict)]
    kind = kinds[0] if kinds else ""
    csi = csi_source(spec["csi"], "") if kind == "csi" else None
    host = str(spec[kind].get("path") or "") if kind in ("hostPath", "local") else ""
    return Volume(
        name=name,
        claim_uid=str((spec.get("claimRef") or {}).get("uid") or ""),
        source_kind=kind,
        csi=csi,
        host_path=host,
        access_modes=tuple(str(m) for m in spec.get("accessModes") or ()),
        mount_options=tuple(str(o) for o in spec.get("mountOptions") or ()),
        volume_mode=str(spec.get("volumeMode") or "Filesystem"),
    )


def csi_source(source: Body, namespace: str) -> CsiSource:
    """A PV's ``csi`` (its secret refs carry a namespace) or a pod's inline ``csi``
    (its ``nodePublishSecretRef`` is in the pod's ``namespace``)."""
    return CsiSource(
        driver=str(source.get("driver") or ""),
        handle=str(source.get("volumeHandle") or ""),
        read_only=bool(source.get("readOnly")),
        fs_type=str(source.get("fsType") or ""),
        attributes=tuple(
            sorted((str(k), str(v)) for k, v in (source.get("volumeAttributes") or {}).items())
        ),
        stage_secret=_secret_ref(source.get("nodeStageSecretRef"), namespace),
        publish_secret=_secret_ref(source.get("nodePublishSecretRef"), namespace),
    )


def csi_driver(body: Body | None) -> CsiDriverSpec:
    if body is None:
        return CsiDriverSpec()
    _, spec, _ = _parts(body)
    defaults = CsiDriverSpec()
    attach = spec.get("attachRequired")
    modes = spec.get("volumeLifecycleModes")
    return CsiDriverSpec(
        attach_required=defaults.attach_required if attach is None else bool(attach),
        pod_info_on_mount=bool(spec.get("podInfoOnMount")),
        fs_group_policy=str(spec.get("fsGroupPolicy") or defaults.fs_group_policy),
        lifecycle_modes=tuple(str(m) for m in modes) if modes else defaults.lifecycle_modes,
    )


def attachment(body: Body) -> Attachment:
    meta, _, status = _parts(body)
    error = status.get("attachError") or {}
    return Attachment(
        attached=bool(status.get("attached")),
        metadata={str(k): str(v) for k, v in (status.get("attachmentMetadata") or {}).items()},
        error=str(error.get("message") or "") if isinstance(error, dict) else "",
        deleting=bool(meta.get("deletionTimestamp")),
    )


Read = Callable[[ObjectKey], "Body | None"]  # its body, {} if missing, None if not read yet


def closure(roots: Iterable[ObjectKey], read: Read, node: str) -> set[ObjectKey]:
    """``roots`` and everything their readings lead to (``_leads_to``), transitively."""
    found = set(roots)
    queue = list(found)
    while queue:
        for more in _leads_to(queue.pop(), read, node):
            if more not in found:
                found.add(more)
                queue.append(more)
    return found


def _leads_to(key: ObjectKey, read: Read, node: str) -> set[ObjectKey]:
    """A bound claim leads to its volume; a CSI volume to its driver's CSIDriver and its
    secrets, and, once the CSIDriver says it attaches (or there is none), to its
    VolumeAttachment."""
    body = read(key) if key.kind.storage else None
    if not body:
        return set()
    if key.kind is ObjectKind.PERSISTENT_VOLUME_CLAIM:
        name = claim(body).volume_name
        return {ObjectKey(ObjectKind.PERSISTENT_VOLUME, "", name)} if name else set()
    csi = volume(key.name, body).csi if key.kind is ObjectKind.PERSISTENT_VOLUME else None
    if csi is None or not csi.driver:
        return set()
    driver = ObjectKey(ObjectKind.CSI_DRIVER, "", csi.driver)
    found = {driver}
    found |= {
        ObjectKey(ObjectKind.SECRET, ref.namespace, ref.name)
        for ref in (csi.stage_secret, csi.publish_secret)
        if ref is not None
    }
    driver_body = read(driver)
    if driver_body is not None and csi_driver(driver_body or None).attach_required:
        name = attachment_name(csi.handle, csi.driver, node)
        found.add(ObjectKey(ObjectKind.VOLUME_ATTACHMENT, "", name))
    return found


def settled(key: ObjectKey, body: Body) -> bool:
    """Whether a reading is final for the node (``{}``: missing): a bound claim and
    volume, an attached volume, any CSIDriver answer. Others are read again soon."""
    if key.kind is ObjectKind.CSI_DRIVER:
        return True
    if not body:
        return False
    if key.kind is ObjectKind.PERSISTENT_VOLUME_CLAIM:
        return claim(body).bound
    if key.kind is ObjectKind.PERSISTENT_VOLUME:
        return bool(volume(key.name, body).claim_uid)
    if key.kind is ObjectKind.VOLUME_ATTACHMENT:
        return attachment(body).attached
    return True


def body_of(obj: Body) -> dict[str, Any]:
    """What of an object travels: the metadata a node uses, ``spec`` and ``status``."""
    meta = obj.get("metadata") or {}
    kept = {k: meta[k] for k in ("uid", "ownerReferences", "deletionTimestamp") if k in meta}
    return {"metadata": kept, "spec": obj.get("spec") or {}, "status": obj.get("status") or {}}


_SOURCES = (
    "csi",
    "hostPath",
    "local",
    "nfs",
    "iscsi",
    "fc",
    "rbd",
    "cephfs",
    "glusterfs",
    "awsElasticBlockStore",
    "gcePersistentDisk",
    "azureDisk",
    "azureFile",
    "cinder",
    "vsphereVolume",
    "portworxVolume",
    "flexVolume",
    "quobyte",
    "scaleIO",
    "storageos",
    "photonPersistentDisk",
    "flocker",
)


def _parts(body: Body) -> tuple[Body, Body, Body]:
    return body.get("metadata") or {}, body.get("spec") or {}, body.get("status") or {}


def _secret_ref(ref: Any, namespace: str) -> SecretRef | None:
    if not isinstance(ref, dict) or not ref.get("name"):
        return None
    return SecretRef(str(ref.get("namespace") or namespace), str(ref["name"]))
