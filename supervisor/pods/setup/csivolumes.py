"""A pod's CSI volumes mounted and unmounted through their drivers' Node service, as the
kubelet's CSI volume plugin does (``pkg/volume/csi``: ``csi_attacher`` MountDevice and
UnmountDevice, ``csi_mounter`` SetUpAt and TearDownAt):

- **stage**, once per volume per node, if the driver has STAGE_UNSTAGE_VOLUME (not an
  inline volume: those are only published):
  ``NodeStageVolume`` at ``<root>/plugins/kubernetes.io/csi/<driver>/<sha256(handle)>/
  globalmount``, with ``vol_data.json`` (volumeHandle, driverName) next to it;
- **publish**, per pod: ``NodePublishVolume`` at ``<pod dir>/volumes/kubernetes.io~csi/
  <volume>/mount``, with ``vol_data.json`` (specVolID, volumeHandle, driverName,
  nodeName, attachmentID, volumeLifecycleMode) next to it; with the access mode, fsType
  and mount options of the PersistentVolume, read-only when the pod or the volume says
  so, the secrets of its ``node*SecretRef``, and the pod's identity in the volume context
  when the CSIDriver asks (``podInfoOnMount``). Then ``fsGroup`` as the CSIDriver's
  ``fsGroupPolicy`` says (or passed to a driver with VOLUME_MOUNT_GROUP);
- **unpublish** when the pod ends, from its ``vol_data.json`` files (they survive a
  restart of pkletd), then **unstage** once no pod has the volume published.

What is mounted is known from the files alone: after a restart, ``reconstruct`` reads
the staged volumes and the pods' published ones back, so nothing is mounted twice and a
volume left by a pod that went meanwhile is torn down with it. The calls run on pod
worker threads; one volume's stage and unstage are serialised by a lock of its own.
"""

from __future__ import annotations

import json
import logging
import shutil
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol

from pkletd.ipc.apimodel import persistentvolumes as pv
from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.ipc.csi.client import CsiClient, CsiError, NodeCapability, VolumeAccess
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects, ObjectUnavailable
from pkletd.supervisor.pods.setup import mounts
from pkletd.supervisor.pods.setup.claims import CsiVolume

log = logging.getLogger(__name__)

PLUGIN_DIR = "kubernetes.io~csi"
VOL_DATA = "vol_data.json"
POD_INFO = "csi.storage.k8s.io/"
DIR_MODE = 0o750


class CsiFailure(Exception):
    """A driver call failed, or the driver is not registered; the message says which."""


class DriverEndpoints(Protocol):
    def endpoint(self, name: str) -> str | None:
        """The socket of the registered driver ``name`` (None if none is registered)."""
        ...


class _NoDrivers:
    def endpoint(self, name: str) -> str | None:
        return None


NO_DRIVERS: DriverEndpoints = _NoDrivers()  # a node where no driver registered
Clients = Callable[[str], CsiClient]


class CsiVolumes:
    def __init__(
        self, node: NodeInfo, drivers: DriverEndpoints, clients: Clients = CsiClient
    ) -> None:
        self._node = node
        self._drivers = drivers
        self._make_client = clients
        self._clients: dict[str, CsiClient] = {}
        self._lock = threading.Lock()
        self._volume_locks: dict[str, threading.Lock] = {}
        self._staged: set[str] = set()  # unique names
        self._published: dict[str, set[str]] = {}  # unique name -> pod uids

    @property
    def plugins_dir(self) -> Path:
        return self._node.root_dir / "plugins" / "kubernetes.io" / "csi"

    def target(self, pod_uid: str, spec_name: str) -> Path:
        return self._node.pods_dir / pod_uid / "volumes" / PLUGIN_DIR / spec_name / "mount"

    def in_use(self) -> list[str]:
        """The unique names of the volumes staged or published here (``volumesInUse``)."""
        with self._lock:
            return sorted(self._staged | set(self._published))

    # --- set up --------------------------------------------------------------------------

    def publish(
        self, pod: Pod, volume: CsiVolume, objects: ApiObjects, fs_group: int | None
    ) -> bool:
        """Stage (once) and publish the volume for the pod at ``target``; whether it was
        published just now and its ownership is pkletd's to set to ``fs_group``."""
        target = self.target(pod.uid, volume.spec_name)
        if mounts.is_mountpoint(target):
            self._note_published(volume.unique_name, pod.uid)
            return False  # published before (by this pkletd, or the one before it)
        client = self._client(volume.source.driver)
        capabilities = self._call(client.node_capabilities)
        driver_owns = fs_group is not None and _owns_mount_group(volume, capabilities)
        group = fs_group if driver_owns else None
        access = VolumeAccess(
            fs_type=volume.source.fs_type,
            mount_flags=volume.mount_options,
            access_mode=volume.access_mode,
            mount_group="" if group is None else str(group),
        )
        staging = ""
        staged = volume.lifecycle == pv.PERSISTENT  # an inline volume is published only
        if staged and NodeCapability.STAGE_UNSTAGE_VOLUME in capabilities:
            staging = str(self._stage(client, volume, access, objects))
        target.parent.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        _write_json(target.parent / VOL_DATA, self._publish_data(volume))
        self._note_published(volume.unique_name, pod.uid)
        self._call(
            client.publish_volume,
            volume.source.handle,
            staging,
            str(target),
            access,
            volume.read_only,
            dict(volume.publish_context),
            self._volume_context(pod, volume),
            _secrets(objects, volume.source.publish_secret),
        )
        log.info(
            "volume published pod=%s volume=%s driver=%s handle=%s",
            pod.full_name,
            volume.spec_name,
            volume.source.driver,
            volume.source.handle,
        )
        return fs_group is not None and applies_fs_group(volume, driver_owns)

    def _stage(
        self, client: CsiClient, volume: CsiVolume, access: VolumeAccess, objects: ApiObjects
    ) -> Path:
        staging = self._staging_path(volume.source.driver, volume.source.handle)
        with self._volume_lock(volume.unique_name):
            with self._lock:
                if volume.unique_name in self._staged:
                    return staging
            staging.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            data = {"volumeHandle": volume.source.handle, "driverName": volume.source.driver}
            _write_json(staging.parent / VOL_DATA, data)
            self._call(
                client.stage_volume,
                volume.source.handle,
                str(staging),
                access,
                dict(volume.publish_context),
                dict(volume.source.attributes),
                _secrets(objects, volume.source.stage_secret),
            )
            with self._lock:
                self._staged.add(volume.unique_name)
        log.info(
            "volume staged driver=%s handle=%s path=%s",
            volume.source.driver,
            volume.source.handle,
            staging,
        )
        return staging

    def _publish_data(self, volume: CsiVolume) -> dict[str, str]:
        return {
            "specVolID": volume.pv_name or volume.spec_name,
            "volumeHandle": volume.source.handle,
            "driverName": volume.source.driver,
            "nodeName": self._node.name,
            "attachmentID": volume.attachment,
            "volumeLifecycleMode": volume.lifecycle,
        }

    def _volume_context(self, pod: Pod, volume: CsiVolume) -> dict[str, str]:
        context = dict(volume.source.attributes)
        if volume.driver.pod_info_on_mount:
            spec = pod.raw.get("spec") or {}
            context |= {
                POD_INFO + "pod.name": pod.name,
                POD_INFO + "pod.namespace": pod.namespace,
                POD_INFO + "pod.uid": pod.uid,
                POD_INFO + "serviceAccount.name": spec.get("serviceAccountName") or "default",
                POD_INFO + "ephemeral": str(volume.lifecycle == pv.EPHEMERAL).lower(),
            }
        return context

    # --- tear down -----------------------------------------------------------------------

    def unpublish_pod(self, pod_uid: str) -> None:
        """Unpublish every CSI volume of the pod (from its ``vol_data.json`` files), and
        unstage those no other pod has; CsiFailure on the first that fails."""
        for data_file, data in _volume_files(
            self._node.pods_dir / pod_uid / "volumes" / PLUGIN_DIR
        ):
            driver, handle = data["driverName"], data["volumeHandle"]
            target = data_file.parent / "mount"
            if target.exists() or target.is_symlink():
                client = self._client(driver)
                self._call(client.unpublish_volume, handle, str(target))
                if target.exists() and not mounts.is_mountpoint(target):
                    target.rmdir()
            shutil.rmtree(data_file.parent)
            log.info(
                "volume unpublished pod_uid=%s volume=%s driver=%s",
                pod_uid,
                data_file.parent.name,
                driver,
            )
            self._unstage_unused(driver, handle, pod_uid)

    def _unstage_unused(self, driver: str, handle: str, pod_uid: str) -> None:
        unique = pv.unique_name(driver, handle)
        with self._volume_lock(unique):
            with self._lock:
                users = self._published.get(unique, set())
                users.discard(pod_uid)
                if users:
                    return
                self._published.pop(unique, None)
                staged = unique in self._staged
            if not staged:
                return
            staging = self._staging_path(driver, handle)
            self._call(self._client(driver).unstage_volume, handle, str(staging))
            shutil.rmtree(staging.parent, ignore_errors=True)
            with self._lock:
                self._staged.discard(unique)
        log.info("volume unstaged driver=%s handle=%s", driver, handle)

    # --- after a restart -------------------------------------------------------------------

    def reconstruct(self) -> None:
        """Read back what is staged and published (``vol_data.json``), as the kubelet's
        reconstruction of its actual state does."""
        staged = {
            pv.unique_name(d["driverName"], d["volumeHandle"])
            for _, d in _volume_files(self.plugins_dir, depth=2)
        }
        published: dict[str, set[str]] = {}
        for pod_dir in _children(self._node.pods_dir):
            for _, data in _volume_files(pod_dir / "volumes" / PLUGIN_DIR):
                unique = pv.unique_name(data["driverName"], data["volumeHandle"])
                published.setdefault(unique, set()).add(pod_dir.name)
        with self._lock:
            self._staged, self._published = staged, published
        if staged or published:
            log.info("volumes reconstructed staged=%d published=%d", len(staged), len(published))

    # --- the drivers -----------------------------------------------------------------------

    def _client(self, driver: str) -> CsiClient:
        endpoint = self._drivers.endpoint(driver)
        if endpoint is None:
            raise CsiFailure(
                f"kubernetes.io/csi: driver name {driver} not found in the list of registered "
                "CSI drivers"
            )
        with self._lock:
            client = self._clients.get(endpoint)
            if client is None:
                client = self._clients[endpoint] = self._make_client(endpoint)
        return client

    def _call(self, method: Callable[..., Any], *args: Any) -> Any:
        try:
            return method(*args)
        except CsiError as exc:
            raise CsiFailure(f"rpc error: code = {exc.code} desc = {exc.detail}") from exc

    def _staging_path(self, driver: str, handle: str) -> Path:
        return self.plugins_dir / driver / pv.staging_dir_name(handle) / "globalmount"

    def _volume_lock(self, unique: str) -> threading.Lock:
        with self._lock:
            return self._volume_locks.setdefault(unique, threading.Lock())

    def _note_published(self, unique: str, pod_uid: str) -> None:
        with self._lock:
            self._published.setdefault(unique, set()).add(pod_uid)


def _owns_mount_group(volume: CsiVolume, capabilities: frozenset[str]) -> bool:
    """Whether the driver applies fsGroup itself, at mount (VOLUME_MOUNT_GROUP)."""
    return (
        NodeCapability.VOLUME_MOUNT_GROUP in capabilities
        and volume.driver.fs_group_policy != "None"
    )


def applies_fs_group(volume: CsiVolume, capabilities_own_it: bool) -> bool:
    """Whether pkletd sets the volume's ownership to fsGroup (``SetVolumeOwnership``), as
    the CSIDriver's ``fsGroupPolicy`` says."""
    if capabilities_own_it or volume.read_only:
        return False
    policy = volume.driver.fs_group_policy
    if policy == "File":
        return True
    return (
        policy == "ReadWriteOnceWithFSType"
        and bool(volume.source.fs_type)
        and volume.access_mode == "SINGLE_NODE_WRITER"
    )


def _secrets(objects: ApiObjects, ref: pv.SecretRef | None) -> dict[str, str]:
    if ref is None:
        return {}
    try:
        found = objects.get(ObjectKey(ObjectKind.SECRET, ref.namespace, ref.name))
    except ObjectUnavailable as exc:
        raise CsiFailure(f"failed to fetch secret {ref.namespace}/{ref.name}: {exc}") from exc
    return {k: v.decode(errors="replace") for k, v in found.data.items()}


def _write_json(path: Path, data: dict[str, str]) -> None:
    partial = path.with_name(path.name + ".tmp")
    partial.write_text(json.dumps(data))
    partial.replace(path)


def _children(directory: Path) -> list[Path]:
    try:
        return [p for p in directory.iterdir() if p.is_dir()]
    except FileNotFoundError:
        return []


def _volume_files(directory: Path, depth: int = 1) -> Iterator[tuple[Path, dict[str, str]]]:
    """The ``vol_data.json`` files ``depth`` directories under ``directory``, read."""
    pattern = "/".join(["*"] * depth) + "/" + VOL_DATA
    for path in sorted(directory.glob(pattern)) if directory.is_dir() else ():
        try:
            data = json.loads(path.read_text())
        except (OSError, ValueError) as exc:
            log.error("volume data unreadable path=%s error=%s", path, exc)
            continue
        if isinstance(data, dict) and data.get("driverName") and data.get("volumeHandle"):
            yield path, {str(k): str(v) for k, v in data.items()}
