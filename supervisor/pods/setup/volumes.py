"""The volumes a node serves by itself, set up where and as the kubelet sets them up.

Under ``<root-dir>/pods/<uid>/volumes/<plugin>/<name>``:

- ``emptyDir``: a directory, mode 0777 (``kubernetes.io~empty-dir``);
  ``medium: Memory`` mounts a tmpfs there, sized as the kubelet sizes it (the
  node's allocatable memory, lowered to the pod's memory limit and to
  ``sizeLimit``), with ``noswap`` on kernels that have it (6.4+).
- ``downwardAPI``, ``configMap``, ``secret`` and ``projected``: files made by
  ``projection`` (from the pod, and the API objects ``ApiObjects`` holds) and written
  by ``atomicwriter``; always mounted read-only, as the kubelet's volume attributes
  say. Each sync of a pod that has a sandbox writes them again (``remount``: the other
  kinds are left as set up), so a changed object or a refreshed token reaches
  a running container (the ``..data`` swap; a ``subPath`` mount holds the file it
  resolved to and is not updated, as under the kubelet). As the kubelet wraps an
  emptyDir for them, ``secret``, ``projected`` and ``downwardAPI`` files live on a
  tmpfs (a Secret's bytes never touch the disk), ``configMap`` files on disk.
  An object not read yet raises ``VolumePending``: the pod waits, without an event.
- ``hostPath``: the host's path itself, after the kubelet's type check
  (``checkType``), creating it for ``DirectoryOrCreate`` (0755) and
  ``FileOrCreate`` (0644).
- ``persistentVolumeClaim``, generic ``ephemeral`` and inline ``csi``: the storage the
  claim is bound to (``claims``): a CSI driver's volume, staged and published by
  ``csivolumes`` under ``kubernetes.io~csi/<name>/mount`` (unpublished first at
  teardown), or a ``hostPath``/``local`` volume's path. Each is set up once per pod
  (and once more after pkletd restarts, which finds it mounted and mounts nothing);
  a claim that cannot be used fails as the kubelet's volume manager says it
  (``Unable to attach or mount volumes: ...``).

``fsGroup`` is applied to the volumes the kubelet applies it to (everything but
``hostPath``) as ``SetVolumeOwnership`` does: group ``fsGroup``, ``rw-rw----``
(``r--r-----`` for read-only volumes) added, directories setgid and group-searchable.
A failure is reported as the kubelet's ``FailedMount`` message,
``MountVolume.SetUp failed for volume "x" : <why>``.

A mount's ``recursiveReadOnly``: containerd 1.6 has no recursive read-only mounts, so
``IfPossible`` is a plain read-only mount and ``Enabled`` fails the container with the
kubelet's ``CreateContainerConfigError`` message, as on such a runtime.
"""

from __future__ import annotations

import logging
import math
import os
import shutil
import stat
from collections.abc import Callable, Sequence
from fractions import Fraction
from pathlib import Path

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.apimodel.volumespec import Volume
from pkletd.ipc.runtime.cri import MountSpec
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import atomicwriter, claims, downward, mounts
from pkletd.supervisor.pods.setup.claims import STORAGE_KINDS
from pkletd.supervisor.pods.setup.csivolumes import (
    NO_DRIVERS,
    CsiFailure,
    CsiVolumes,
    DriverEndpoints,
)
from pkletd.supervisor.pods.setup.envvars import ConfigError, expand
from pkletd.supervisor.pods.setup.projection import Pending, Projector, SourceFailure
from pkletd.supervisor.pods.setup.securitycontext import pod_security

log = logging.getLogger(__name__)

PLUGIN_DIRS = {
    "emptyDir": "kubernetes.io~empty-dir",
    "downwardAPI": "kubernetes.io~downward-api",
    "projected": "kubernetes.io~projected",
    "configMap": "kubernetes.io~configmap",
    "secret": "kubernetes.io~secret",
}
WRITTEN_KINDS = ("downwardAPI", "projected", "configMap", "secret")  # read-only to containers
MEMORY_BACKED = ("downwardAPI", "projected", "secret")  # the kubelet wraps a Memory emptyDir
EMPTY_DIR_MODE = 0o777
RW_MASK, RO_MASK, EXEC_MASK = 0o660, 0o440, 0o110
PROPAGATIONS = {
    "None": "private",
    "HostToContainer": "host-to-container",
    "Bidirectional": "bidirectional",
}


class VolumeError(Exception):
    """A volume could not be set up; the message is the kubelet's FailedMount event."""


class VolumePending(Exception):
    """A volume waits for an API object (or token) not read yet; the message names it."""


class SetupFailure(Exception):
    """Why one volume failed (the part after ``MountVolume.SetUp failed for volume "x" :``)."""


# --- hostPath ------------------------------------------------------------------------


def check_host_path(path: str, kind: str) -> None:
    """The kubelet's hostPath ``checkType``; SetupFailure with its message."""
    if kind == "":
        return  # no check: the runtime creates a missing directory
    target = Path(path)
    try:
        info = target.stat()
    except FileNotFoundError:
        info = None
    except OSError as exc:
        raise SetupFailure(f"{exc.strerror}: {path}") from exc
    if kind == "DirectoryOrCreate" and info is None:
        _create(lambda: target.mkdir(mode=0o755, parents=True, exist_ok=True))
        return
    if kind == "FileOrCreate" and info is None:
        _create(lambda: os.close(os.open(target, os.O_CREAT | os.O_RDONLY, 0o644)))
        return
    wanted = {
        "DirectoryOrCreate": (stat.S_ISDIR, "a directory"),
        "Directory": (stat.S_ISDIR, "a directory"),
        "FileOrCreate": (stat.S_ISREG, "a file"),
        "File": (stat.S_ISREG, "a file"),
        "Socket": (stat.S_ISSOCK, "a socket file"),
        "CharDevice": (stat.S_ISCHR, "a character device"),
        "BlockDevice": (stat.S_ISBLK, "a block device"),
    }
    if kind not in wanted:
        raise SetupFailure(f"{kind} is an invalid volume type")
    test, what = wanted[kind]
    if info is None or not test(info.st_mode):
        raise SetupFailure(f"hostPath type check failed: {path} is not {what}")


def _create(make: Callable[[], object]) -> None:
    try:
        make()
    except FileExistsError:
        pass
    except OSError as exc:
        raise SetupFailure(f"{exc.strerror}: {exc.filename}") from exc


# --- fsGroup -------------------------------------------------------------------------


def needs_ownership(root: Path, gid: int, read_only: bool, policy: str) -> bool:
    """False when ``OnRootMismatch`` and the root already has the group, bits and setgid."""
    if policy != "OnRootMismatch":
        return True
    info = root.stat()
    wanted = (RO_MASK if read_only else RW_MASK) | EXEC_MASK
    perms = stat.S_IMODE(info.st_mode)
    return info.st_gid != gid or perms & wanted != wanted or not perms & stat.S_ISGID


def set_ownership(root: Path, gid: int, read_only: bool) -> None:
    """``SetVolumeOwnership``: every entry gets group ``gid`` and the group bits it needs."""
    mask = RO_MASK if read_only else RW_MASK
    entries = [root]
    for parent, dirs, files in os.walk(root):
        entries += [Path(parent) / name for name in dirs + files]
    for entry in entries:
        os.lchown(entry, -1, gid)
        info = entry.lstat()
        if stat.S_ISLNK(info.st_mode):
            continue
        extra = mask | stat.S_ISGID | EXEC_MASK if stat.S_ISDIR(info.st_mode) else mask
        entry.chmod(stat.S_IMODE(info.st_mode) | extra)


# --- emptyDir ------------------------------------------------------------------------


def pod_memory_limit(pod: Pod) -> Fraction | None:
    """The pod's memory limit if every container declares one (the pod cgroup's), else None.

    Regular containers and sidecars add up; an init container runs alone, so the
    largest one counts on its own.
    """
    together, alone = Fraction(0), Fraction(0)
    for c in pod.init_containers + pod.containers:
        raw = downward.raw_container(pod, c.name) or {}
        limit = ((raw.get("resources") or {}).get("limits") or {}).get("memory")
        if limit is None:
            return None
        try:
            amount = quantity.parse(limit)
        except quantity.BadQuantity:
            return None
        if c in pod.init_containers and not c.sidecar:
            alone = max(alone, amount)
        else:
            together += amount
    return max(together, alone)


def tmpfs_size(pod: Pod, volume: Volume, node: NodeInfo) -> int:
    """``calculateEmptyDirMemorySize``: allocatable, lowered to the pod limit and sizeLimit."""
    size = node.memory
    for lower in (pod_memory_limit(pod), volume.size_limit):
        if lower is not None and 0 < lower <= size:
            size = lower
    return math.ceil(size)


def setup_empty_dir(pod: Pod, volume: Volume, path: Path, node: NodeInfo) -> bool:
    """Create (and mount) an emptyDir; True if it was new, so ownership is to be applied."""
    if volume.medium not in ("", "Memory"):
        raise SetupFailure(f"unknown storage medium {volume.medium!r}")
    fresh = not path.exists()
    path.mkdir(mode=EMPTY_DIR_MODE, parents=True, exist_ok=True)
    if fresh:
        path.chmod(EMPTY_DIR_MODE)  # whatever the umask
    if volume.medium == "Memory" and mounts.fs_type(path) != "tmpfs":
        options = f"size={tmpfs_size(pod, volume, node)}"
        if node.kernel_at_least(6, 4):
            options += ",noswap"
        try:
            mounts.mount_tmpfs(path, options)
        except OSError as exc:
            raise SetupFailure(str(exc)) from exc
        path.chmod(EMPTY_DIR_MODE)
        return True
    return fresh


# --- the pod's volumes -----------------------------------------------------------------


class PodVolumes:
    def __init__(
        self, node: NodeInfo, objects: ApiObjects, drivers: DriverEndpoints = NO_DRIVERS
    ) -> None:
        self._node = node
        self._objects = objects
        self.csi = CsiVolumes(node, drivers)
        self._storage: dict[tuple[str, str], Path] = {}  # (pod uid, volume): where it is

    def pod_dir(self, uid: str) -> Path:
        return self._node.pods_dir / uid

    def path(self, pod: Pod, volume: Volume) -> Path:
        if volume.kind == "hostPath":
            return Path(volume.path)
        if volume.kind in STORAGE_KINDS:
            found = self._storage.get((pod.uid, volume.name))
            if found is None:
                raise ConfigError(f'volume "{volume.name}" is not mounted')
            return found
        plugin = PLUGIN_DIRS.get(volume.kind, f"kubernetes.io~{volume.kind.lower()}")
        return self.pod_dir(pod.uid) / "volumes" / plugin / volume.name

    def setup(self, pod: Pod, remount: bool = False) -> None:
        """Set up every volume of the pod; with ``remount`` (a pod set up before), only
        bring the written ones up to date, as the kubelet remounts only the plugins that
        ask for it. VolumeError on the first failure, VolumePending on the first that
        waits for the API."""
        if not pod.volumes:
            return
        for sub in ("", "volumes", "plugins"):
            (self.pod_dir(pod.uid) / sub).mkdir(mode=0o750, parents=True, exist_ok=True)
        for volume in pod.volumes:
            if remount and not self._remounted(pod, volume):
                continue
            try:
                self._setup_one(pod, volume)
            except Pending as exc:
                raise VolumePending(f'volume "{volume.name}" waits for {exc}') from exc
            except claims.ClaimError as exc:
                name = volume.name
                raise VolumeError(
                    f"Unable to attach or mount volumes: unmounted volumes=[{name}], "
                    f"unattached volumes=[{name}], failed to process volumes=[{name}]: {exc}"
                ) from exc
            except claims.AttachFailed as exc:
                raise VolumeError(
                    f'MountVolume.WaitForAttach failed for volume "{volume.name}" : {exc}'
                ) from exc
            except (
                SetupFailure,
                SourceFailure,
                CsiFailure,
                OSError,
                atomicwriter.PayloadError,
            ) as exc:
                raise VolumeError(
                    f'MountVolume.SetUp failed for volume "{volume.name}" : {exc}'
                ) from exc

    def _remounted(self, pod: Pod, volume: Volume) -> bool:
        """What a sync of a set-up pod sets up again: the written volumes, and a storage
        volume pkletd has not seen mounted since it started (it checks, mounts nothing
        twice)."""
        if volume.kind in STORAGE_KINDS:
            return (pod.uid, volume.name) not in self._storage
        return volume.kind in WRITTEN_KINDS

    def _setup_one(self, pod: Pod, volume: Volume) -> None:
        if volume.kind in STORAGE_KINDS:
            self._storage[(pod.uid, volume.name)] = self._setup_storage(pod, volume)
            return
        security = pod_security(pod)
        path = self.path(pod, volume)
        if volume.kind == "hostPath":
            check_host_path(volume.path, volume.path_type)
            return
        if volume.kind == "emptyDir":
            fresh = setup_empty_dir(pod, volume, path, self._node)
            if fresh and security.fs_group is not None:
                self._own(path, security.fs_group, False, security.fs_group_change_policy)
            return
        if volume.kind not in WRITTEN_KINDS:
            raise SetupFailure(f"pkletd does not serve volumes of type {volume.kind}")
        files = Projector(pod, self._node, self._objects).payload(volume)
        medium = "Memory" if volume.kind in MEMORY_BACKED else ""
        setup_empty_dir(pod, Volume(volume.name, "emptyDir", medium=medium), path, self._node)
        group = security.fs_group

        def perms(_: Path) -> None:
            if group is not None:
                self._own(path, group, True, security.fs_group_change_policy)

        atomicwriter.write(path, files, perms)

    def _setup_storage(self, pod: Pod, volume: Volume) -> Path:
        """A claim's host path (checked), or its CSI volume published for the pod."""
        found = claims.resolve(pod, volume, self._objects)
        if isinstance(found, claims.HostVolume):
            if not os.path.lexists(found.path):
                raise SetupFailure(f"path {found.path} does not exist")
            return Path(found.path)
        security = pod_security(pod)
        target = self.csi.target(pod.uid, volume.name)
        if self.csi.publish(pod, found, self._objects, security.fs_group):
            assert security.fs_group is not None
            self._own(target, security.fs_group, False, security.fs_group_change_policy)
        return target

    def _own(self, path: Path, gid: int, read_only: bool, policy: str) -> None:
        if needs_ownership(path, gid, read_only, policy):
            set_ownership(path, gid, read_only)

    def mounts(
        self, pod: Pod, container: Container, env: Sequence[tuple[str, str]]
    ) -> tuple[MountSpec, ...]:
        """The container's mounts (``makeMounts``); ConfigError with the kubelet's message."""
        volumes = {v.name: v for v in pod.volumes}
        values = {k: v for k, v in env if v}
        found = []
        for mount in container.volume_mounts:
            if mount.recursive_read_only == "Enabled":
                raise ConfigError(
                    "failed to resolve recursive read-only mode: volume "
                    f'"{mount.name}" requested recursive read-only mode, but it is not '
                    "supported by the runtime"
                )
            volume = volumes[mount.name]
            host = self.path(pod, volume)
            sub = mount.sub_path
            if mount.sub_path_expr:
                missing: set[str] = set()
                sub = expand(mount.sub_path_expr, values, missing)
                if missing:
                    raise ConfigError(f"missing value for {', '.join(sorted(missing))}")
            if sub:
                host = self._sub_path(host, sub, mount.name, container.name)
            if mount.propagation != "None":
                self._shared_root(host)
            found.append(
                MountSpec(
                    container_path=mount.mount_path
                    if mount.mount_path.startswith("/")
                    else "/" + mount.mount_path,
                    host_path=str(host),
                    readonly=mount.read_only or volume.read_only or volume.kind in WRITTEN_KINDS,
                    propagation=PROPAGATIONS[mount.propagation],
                )
            )
        return tuple(found)

    def _shared_root(self, host: Path) -> None:
        """Propagation needs a shared source mount: the kubelet makes its root dir rshared
        at start; pkletd does it when a mount under the root dir first needs it."""
        root = self._node.root_dir
        if host != root and root not in host.parents:
            return  # another host path: shared or not, the runtime says so
        try:
            if mounts.make_rshared(root):
                log.info("root dir made rshared path=%s", root)
        except OSError as exc:
            raise ConfigError(f"error configuring root directory: {exc}") from exc

    def _sub_path(self, volume: Path, sub: str, mount: str, container: str) -> Path:
        if sub.startswith("/"):
            raise ConfigError(f"error SubPath `{sub}` must not be an absolute path")
        if ".." in sub.split("/"):
            raise ConfigError(f"unable to provision SubPath `{sub}`: must not contain '..'")
        base = Path(os.path.realpath(volume))
        target = volume / sub
        if not target.exists() and not target.is_symlink():
            try:
                mode = stat.S_IMODE(volume.stat().st_mode)
                probe = base
                for part in Path(sub).parts:
                    probe = probe / part
                    if not probe.exists():
                        probe.mkdir(mode=mode)
                        probe.chmod(mode)
                    if not _inside(Path(os.path.realpath(probe)), base):
                        raise OSError("escapes the volume")
            except OSError as exc:
                log.error(
                    "subPath mkdir failed mount=%s container=%s error=%s", mount, container, exc
                )
                raise ConfigError(
                    f'failed to create subPath directory for volumeMount "{mount}" of container '
                    f'"{container}"'
                ) from exc
        resolved = Path(os.path.realpath(target))
        if not _inside(resolved, base):
            raise ConfigError(
                f'failed to prepare subPath for volumeMount "{mount}" of container "{container}"'
            )
        return resolved

    def teardown(self, uid: str) -> None:
        """Unmount what is mounted in the pod's dir and remove it (pod termination).

        Its CSI volumes go first, through their drivers: VolumeError if one cannot be
        unpublished (its driver is away, say), so the termination is tried again and the
        pod is not forgotten with a volume still published. Any other failure is logged,
        not raised: the pod is gone from the runtime either way, and a directory still
        mounted is kept rather than emptied.
        """
        pod_dir = self.pod_dir(uid)
        self._storage = {k: v for k, v in self._storage.items() if k[0] != uid}
        if not pod_dir.exists():
            return
        try:
            self.csi.unpublish_pod(uid)
        except (CsiFailure, OSError) as exc:
            log.error("pod volumes not torn down uid=%s error=%s", uid, exc)
            raise VolumeError(f"UnmountVolume.TearDown failed for pod {uid}: {exc}") from exc
        try:
            for point in mounts.mounts_under(pod_dir):
                try:
                    mounts.unmount(point)
                except OSError as exc:
                    log.warning("unmount failed path=%s error=%s; detaching", point, exc)
                    mounts.unmount(point, lazy=True)
            left = mounts.mounts_under(pod_dir)
            if left:
                log.error("pod dir kept, still mounted uid=%s mounts=%s", uid, left)
                return
            shutil.rmtree(pod_dir)
        except OSError as exc:
            log.error("pod volumes not torn down uid=%s error=%s", uid, exc)
            return
        log.info("pod volumes torn down uid=%s", uid)


def _inside(path: Path, base: Path) -> bool:
    return path == base or base in path.parents
