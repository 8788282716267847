"""What each pod uses of the resource a threshold reclaims, from a raw Summary
(``nodestats.summary``), as the kubelet's ranking functions measure it
(``pkg/kubelet/eviction/helpers.go``):

- memory: the pod cgroup's working set; each container's working set;
- pids: the processes in the pod cgroup;
- disk (bytes, or inodes for the ``inodesFree`` signals): the sum of the fs stats the
  signal ranks by. With a dedicated image filesystem, nodefs signals count container
  logs and local volumes, imagefs signals the containers' writable layers; on one
  filesystem every signal counts all three. Local volumes are the pod's hostPath,
  emptyDir (not in memory), configMap, downwardAPI and gitRepo volumes
  (``localVolumeNames``). A container's ``ephemeral-storage`` (for the message) is its
  writable layer plus its logs, when both were measured.

A pod the summary does not list (no pod cgroup) is left out: the parent ranks such a
pod first, as the kubelet ranks a pod it has no stats for.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pkletd.ipc.bus.messages import PodUsage
from pkletd.workers.eviction.thresholds import Signal

Json = Mapping[str, Any]

ROOTFS, LOGS, VOLUMES = "rootfs", "logs", "volumes"
NODEFS_SIGNALS = (Signal.NODEFS, Signal.NODEFS_INODES)
INODE_SIGNALS = (Signal.NODEFS_INODES, Signal.IMAGEFS_INODES)


def measured(signal: Signal, dedicated_imagefs: bool) -> tuple[str, ...]:
    """The fs stats a disk signal ranks pods by."""
    if not dedicated_imagefs:
        return (ROOTFS, LOGS, VOLUMES)
    return (LOGS, VOLUMES) if signal in NODEFS_SIGNALS else (ROOTFS,)


def pod_usage(
    summary_pods: Iterable[Json], specs: Mapping[str, Json], signal: Signal, dedicated: bool
) -> list[PodUsage]:
    found = []
    for stats in summary_pods:
        uid = str(stats["podRef"]["uid"])
        spec = specs.get(uid, {})
        if signal in (Signal.MEMORY, Signal.ALLOCATABLE_MEMORY):
            usage = _used(stats.get("memory"), "workingSetBytes")
            containers = {
                str(c["name"]): _used(c.get("memory"), "workingSetBytes")
                for c in stats.get("containers", [])
                if "memory" in c
            }
        elif signal is Signal.PID:
            usage, containers = _used(stats.get("process_stats"), "process_count"), {}
        else:
            usage = _disk(stats, spec, measured(signal, dedicated), signal in INODE_SIGNALS)
            containers = _container_storage(stats) if signal not in INODE_SIGNALS else {}
        found.append(PodUsage(uid=uid, usage=usage, containers=containers))
    return found


def _used(stats: Json | None, key: str) -> int:
    return int((stats or {}).get(key, 0))


def _disk(stats: Json, spec: Json, parts: tuple[str, ...], inodes: bool) -> int:
    key = "inodesUsed" if inodes else "usedBytes"
    total = 0
    for container in stats.get("containers", []):
        total += sum(_used(container.get(part), key) for part in (ROOTFS, LOGS) if part in parts)
    if VOLUMES in parts:
        local = local_volume_names(spec)
        total += sum(_used(v, key) for v in stats.get("volume", []) if v.get("name") in local)
    return total


def _container_storage(stats: Json) -> dict[str, int]:
    found = {}
    for container in stats.get("containers", []):
        rootfs, logs = container.get(ROOTFS) or {}, container.get(LOGS) or {}
        if "usedBytes" in rootfs and "usedBytes" in logs:
            found[str(container["name"])] = int(rootfs["usedBytes"]) + int(logs["usedBytes"])
    return found


def local_volume_names(spec: Json) -> set[str]:
    """``localVolumeNames``: hostPath and the local ephemeral volumes."""
    found = set()
    for volume in spec.get("volumes") or []:
        empty_dir = volume.get("emptyDir")
        on_disk = empty_dir is not None and (empty_dir or {}).get("medium", "") == ""
        kinds = ("hostPath", "configMap", "downwardAPI", "gitRepo")
        if on_disk or any(volume.get(kind) is not None for kind in kinds):
            found.add(str(volume.get("name", "")))
    return found
