"""Which storage a pod's ``persistentVolumeClaim``, generic ``ephemeral`` or inline ``csi``
volume is, found as the kubelet's desired state populator finds it (``createVolumeSpec``,
``getPVCExtractPV``, ``getPVSpec``) from the objects the pod-objects worker read:

- a claim must exist, not be being deleted, be bound, and (an ephemeral volume's
  ``<pod>-<volume>``) be owned by the pod; its volume must name the claim back;
- the volume is a CSI driver's (``csi``), or a host path (``hostPath``, ``local``);
  a volume of another source or of ``volumeMode: Block`` is refused, naming it;
- an inline ``csi`` volume needs a CSIDriver that allows ``Ephemeral`` volumes; its
  handle is made from the pod's uid and the volume's name;
- a CSI volume whose driver attaches (its CSIDriver says so, or there is none) waits
  for its VolumeAttachment to be attached (while it is missing, or forbidden: the node
  authorizer answers 403 for one not made yet), whose metadata becomes the publish
  context; an ``attachError`` on it fails the mount.

An object not read yet is ``Pending`` (the pod waits, quietly); anything else wrong is a
``ClaimError`` with the kubelet's words, or ``SetupFailure`` for what only fails at mount.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

from pkletd.ipc.apimodel import persistentvolumes as pv
from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.ipc.apimodel.volumespec import Volume
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.supervisor.pods.objects import ApiObjects, ObjectUnavailable
from pkletd.supervisor.pods.setup.projection import Pending

STORAGE_KINDS = ("persistentVolumeClaim", "ephemeral", "csi")


class ClaimError(Exception):
    """A claim (or inline volume) cannot be used; ``str()`` is why, as the kubelet says."""


class AttachFailed(Exception):
    """The volume's VolumeAttachment reports an error (``MountVolume.WaitForAttach``)."""


@dataclass(frozen=True, slots=True)
class HostVolume:
    """A PersistentVolume that is a path of the host (``hostPath``, ``local``)."""

    path: str
    read_only: bool


@dataclass(frozen=True, slots=True)
class CsiVolume:
    spec_name: str  # the pod's volume name
    source: pv.CsiSource
    lifecycle: str  # Persistent or Ephemeral
    pv_name: str  # "" for an inline volume
    access_mode: str  # CSI's
    mount_options: tuple[str, ...]
    read_only: bool
    driver: pv.CsiDriverSpec
    attachment: str = ""  # the VolumeAttachment's name, "" if the driver does not attach
    publish_context: Mapping[str, str] = field(default_factory=dict)

    @property
    def unique_name(self) -> str:
        return pv.unique_name(self.source.driver, self.source.handle)


def resolve(pod: Pod, volume: Volume, objects: ApiObjects) -> HostVolume | CsiVolume:
    if volume.kind == "csi":
        return _inline(pod, volume, objects)
    claim_name = volume.claim_name or f"{pod.name}-{volume.name}"
    where = f"{pod.namespace}/{claim_name}"
    try:
        return _claimed(pod, volume, claim_name, objects)
    except ClaimError as exc:
        raise ClaimError(f"error processing PVC {where}: {exc}") from exc


def _claimed(
    pod: Pod, volume: Volume, claim_name: str, objects: ApiObjects
) -> HostVolume | CsiVolume:
    found = _read(objects, ObjectKind.PERSISTENT_VOLUME_CLAIM, pod.namespace, claim_name, "PVC")
    claim = pv.claim(found.body)
    where = f"{pod.namespace}/{claim_name}"
    if volume.kind == "ephemeral" and claim.owner_uid != pod.uid:
        raise ClaimError(
            f"PVC was not created for pod {pod.namespace}/{pod.name} (pod is not owner)"
        )
    if claim.deleting:
        raise ClaimError(f"can't start pod because PVC {where} is being deleted")
    if not claim.bound:
        raise ClaimError("PVC is not bound")
    found = _read(
        objects, ObjectKind.PERSISTENT_VOLUME, "", claim.volume_name, f"PV {claim.volume_name}"
    )
    bound = pv.volume(claim.volume_name, found.body)
    if bound.claim_uid != claim.uid:
        raise ClaimError(
            f"failed to fetch PV {bound.name} from API server: found PV object {bound.name!r} "
            f"but its ClaimRef.UID ({bound.claim_uid!r}) points to a different PVC ({claim.uid!r})"
        )
    if "Block" in (claim.volume_mode, bound.volume_mode):
        raise ClaimError("pkletd does not serve raw block volumes (volumeMode: Block)")
    read_only = volume.read_only
    if bound.host_path:
        return HostVolume(bound.host_path, read_only)
    if bound.csi is None:
        kind = bound.source_kind or "none"
        raise ClaimError(f"pkletd does not serve persistent volumes of type {kind}")
    mode = pv.ACCESS_MODES.get(bound.access_modes[0] if bound.access_modes else "")
    csi = CsiVolume(
        spec_name=volume.name,
        source=bound.csi,
        lifecycle=pv.PERSISTENT,
        pv_name=bound.name,
        access_mode=mode or "SINGLE_NODE_WRITER",
        mount_options=bound.mount_options,
        read_only=read_only or bound.csi.read_only,
        driver=_driver(objects, bound.csi.driver),
    )
    return _attached(csi, objects)


def _inline(pod: Pod, volume: Volume, objects: ApiObjects) -> CsiVolume:
    assert volume.csi is not None
    driver = _driver(objects, volume.csi.driver)
    if pv.EPHEMERAL not in driver.lifecycle_modes:
        raise ClaimError(
            f'volume mode "Ephemeral" not supported by driver {volume.csi.driver} '
            f"(only supports {list(driver.lifecycle_modes)})"
        )
    source = pv.CsiSource(
        driver=volume.csi.driver,
        handle=pv.inline_handle(pod.uid, volume.name),
        read_only=volume.read_only,
        fs_type=volume.csi.fs_type,
        attributes=volume.csi.attributes,
        publish_secret=_in_namespace(volume.csi.publish_secret, pod.namespace),
    )
    return CsiVolume(
        spec_name=volume.name,
        source=source,
        lifecycle=pv.EPHEMERAL,
        pv_name="",
        access_mode="SINGLE_NODE_WRITER",
        mount_options=(),
        read_only=volume.read_only,
        driver=driver,
    )


def _attached(volume: CsiVolume, objects: ApiObjects) -> CsiVolume:
    """The volume with its attachment, once attached (Pending until then)."""
    if not volume.driver.attach_required:
        return volume
    name = pv.attachment_name(volume.source.handle, volume.source.driver, objects.node)
    try:
        found = objects.get(ObjectKey(ObjectKind.VOLUME_ATTACHMENT, "", name))
    except ObjectUnavailable as exc:
        # Not made yet: missing, or forbidden (the node authorizer lets a node read only
        # the attachments made for it, and cannot tell one that is not there yet).
        raise Pending(f"volume attachment {name}") from exc
    attachment = pv.attachment(found.body)
    if attachment.deleting:
        raise AttachFailed("volume attachment is being deleted")
    if attachment.error:
        raise AttachFailed(attachment.error)
    if not attachment.attached:
        raise Pending(f"volume attachment {name}")
    return dataclasses.replace(volume, attachment=name, publish_context=dict(attachment.metadata))


def _driver(objects: ApiObjects, name: str) -> pv.CsiDriverSpec:
    """The driver's CSIDriver (its defaults when there is none)."""
    try:
        return pv.csi_driver(objects.get(ObjectKey(ObjectKind.CSI_DRIVER, "", name)).body)
    except ObjectUnavailable as exc:
        if exc.missing:
            return pv.csi_driver(None)
        if exc.pending:
            raise Pending(f"CSIDriver {name}") from exc
        raise ClaimError(f"failed to fetch CSIDriver {name}: {exc}") from exc


def _read(
    objects: ApiObjects, kind: ObjectKind, namespace: str, name: str, what: str
) -> ObjectFetched:
    try:
        return objects.get(ObjectKey(kind, namespace, name))
    except ObjectUnavailable as exc:
        if exc.pending:
            raise Pending(f"{kind.noun} {name}") from exc
        plural = f'{kind.noun}s "{name}" not found' if exc.missing else str(exc)
        raise ClaimError(f"failed to fetch {what} from API server: {plural}") from exc


def _in_namespace(ref: pv.SecretRef | None, namespace: str) -> pv.SecretRef | None:
    return None if ref is None else pv.SecretRef(namespace, ref.name)
