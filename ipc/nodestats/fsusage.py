"""Filesystem usage: a whole filesystem (statvfs) and what a directory tree takes (du).

The Summary API's ``FsStats`` fields, as the kubelet fills them: capacity and available
from the filesystem, used from the filesystem for the node and from ``du`` for a
volume or a container's logs (the kubelet's ``MetricsDu``: allocated blocks, inodes).
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Any


@dataclass(frozen=True, slots=True)
class FsCapacity:
    capacity: int
    available: int
    used: int
    inodes: int
    inodes_free: int

    @property
    def inodes_used(self) -> int:
        return self.inodes - self.inodes_free


@dataclass(frozen=True, slots=True)
class TreeUsage:
    used: int  # bytes allocated, as du counts them
    inodes: int


def capacity(path: Path) -> FsCapacity | None:
    """The filesystem holding ``path``; None if it is not there."""
    try:
        s = os.statvfs(path)
    except OSError:
        return None
    return FsCapacity(
        capacity=s.f_blocks * s.f_frsize,
        available=s.f_bavail * s.f_frsize,
        used=(s.f_blocks - s.f_bfree) * s.f_frsize,
        inodes=s.f_files,
        inodes_free=s.f_ffree,
    )


def tree_usage(top: Path) -> TreeUsage | None:
    """Bytes allocated and inodes under ``top`` (hard links once; no crossing mounts)."""
    try:
        top_info = top.lstat()
    except OSError:
        return None
    device = top_info.st_dev
    seen: set[int] = set()
    used = 0
    pending = [str(top)]
    while pending:
        directory = pending.pop()
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            try:
                info = entry.stat(follow_symlinks=False)
            except OSError:
                continue
            if info.st_dev != device or info.st_ino in seen:
                continue
            seen.add(info.st_ino)
            used += info.st_blocks * 512
            if stat.S_ISDIR(info.st_mode):
                pending.append(entry.path)
    return TreeUsage(used=used + top_info.st_blocks * 512, inodes=len(seen) + 1)


def filesystem_stats(time: float, fs: FsCapacity) -> dict[str, Any]:
    """A Summary API ``FsStats`` of a whole filesystem."""
    return part_stats(time, fs, fs.used, fs.inodes_used)


def part_stats(
    time: float, fs: FsCapacity | None, used: int | None, inodes_used: int | None
) -> dict[str, Any]:
    """A Summary API ``FsStats`` of what one tree or layer uses on a filesystem."""
    out: dict[str, Any] = {"time": time}
    if fs is not None:
        out.update(
            availableBytes=fs.available,
            capacityBytes=fs.capacity,
            inodesFree=fs.inodes_free,
            inodes=fs.inodes,
        )
    if used is not None:
        out["usedBytes"] = used
    if inodes_used is not None:
        out["inodesUsed"] = inodes_used
    return out
