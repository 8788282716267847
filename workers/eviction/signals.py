"""Measuring the eviction signals, from the sources the kubelet's summary gives them:

- ``memory.available``: ``MemTotal`` less the root cgroup's working set
  (``nodestats.nodememory``), of ``MemTotal``;
- ``allocatableMemory.available``: the pods' cgroup (``/kubepods``) limit less its working
  set, of that limit;
- ``nodefs.available`` and ``nodefs.inodesFree``: statfs of the root dir;
- ``imagefs.available`` and ``imagefs.inodesFree``: statfs of the mount point CRI
  ``ImageFsInfo`` names;
- ``pid.available``: the lower of ``pid_max`` and ``threads-max``, less the tasks
  running (``/proc/loadavg``).

A source that cannot be read leaves its signals out (a threshold with no observation is
not met), with one log line per failure. The image filesystem is *dedicated* when it is
on another device than the root dir (``HasDedicatedImageFs``): that changes how pods
are ranked and what node-level reclaim can do.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Protocol

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats import fsusage, procfs
from pkletd.ipc.nodestats.cgroupstats import CgroupReader
from pkletd.ipc.nodestats.nodememory import node_memory
from pkletd.ipc.nodestats.podrefs import ROOT as PODS_CGROUP
from pkletd.ipc.runtime.cri import CriError, FilesystemUsage
from pkletd.workers.eviction.thresholds import Observation, Signal

log = logging.getLogger(__name__)


class ImageFs(Protocol):
    """What the signals ask of the runtime (``ipc.runtime.cri.CriRuntime`` is one)."""

    def image_fs_info(self) -> list[FilesystemUsage]: ...


@dataclass(frozen=True, slots=True)
class Reading:
    """One measurement of every signal that could be read."""

    observations: dict[Signal, Observation] = field(default_factory=dict)
    dedicated_imagefs: bool = False


class SignalReader:
    def __init__(
        self,
        cgroups: CgroupReader,
        root_dir: Path,
        runtime: ImageFs,
        proc: Path = procfs.PROC,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._cgroups = cgroups
        self._root_dir = root_dir
        self._runtime = runtime
        self._proc = proc
        self._clock = clock

    def read(self) -> Reading:
        now = self._clock.monotonic()
        found: dict[Signal, Observation] = {}
        self._memory(found, now)
        nodefs = fsusage.capacity(self._root_dir)
        _filesystem(found, nodefs, Signal.NODEFS, Signal.NODEFS_INODES, now)
        mountpoint = self._image_mountpoint()
        imagefs = fsusage.capacity(Path(mountpoint)) if mountpoint else None
        _filesystem(found, imagefs, Signal.IMAGEFS, Signal.IMAGEFS_INODES, now)
        self._pids(found, now)
        return Reading(found, bool(mountpoint) and _other_device(self._root_dir, mountpoint))

    def _memory(self, found: dict[Signal, Observation], now: float) -> None:
        memory = node_memory(self._cgroups.sample("/", now), self._proc)
        if memory is not None and memory.total is not None and memory.available is not None:
            found[Signal.MEMORY] = Observation(memory.available, memory.total, now)
        pods = self._cgroups.sample(PODS_CGROUP, now)
        limit = pods.memory.limit if pods is not None and pods.memory is not None else None
        if pods is not None and pods.memory is not None and limit is not None:
            available = max(limit - pods.memory.working_set, 0)
            found[Signal.ALLOCATABLE_MEMORY] = Observation(available, limit, now)

    def _image_mountpoint(self) -> str:
        try:
            filesystems = self._runtime.image_fs_info()
        except CriError as exc:
            log.warning("image filesystem unknown error=%s", exc)
            return ""
        return filesystems[0].mountpoint if filesystems else ""

    def _pids(self, found: dict[Signal, Observation], now: float) -> None:
        most, running = procfs.pid_max(self._proc), procfs.task_count(self._proc)
        if most is not None and running is not None:
            found[Signal.PID] = Observation(most - running, most, now)


def _filesystem(
    found: dict[Signal, Observation],
    fs: fsusage.FsCapacity | None,
    space: Signal,
    inodes: Signal,
    now: float,
) -> None:
    if fs is None:
        return
    found[space] = Observation(fs.available, fs.capacity, now)
    found[inodes] = Observation(fs.inodes_free, fs.inodes, now)


def _other_device(root_dir: Path, mountpoint: str) -> bool:
    try:
        return os.stat(root_dir).st_dev != os.stat(mountpoint).st_dev
    except OSError:
        return False
