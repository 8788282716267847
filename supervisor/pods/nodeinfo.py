"""What a pod may learn about its node: name, addresses, root dir, allocatable resources.

Allocatable is the kubelet's: capacity (CPUs, MemTotal, the root dir's file
system) minus the default hard-eviction reservation (``memory.available<100Mi``,
``nodefs.available<10%``). pkletd reads neither ``kubeReserved``,
``systemReserved`` nor ``evictionHard``, so they are at their defaults. The
kubelet uses allocatable where a container sets no limit (the downward API's
``resourceFieldRef``) and as the ceiling of a memory-backed emptyDir.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

MEMORY_EVICTION = Fraction(100 * 2**20)  # evictionHard memory.available default
NODEFS_EVICTION = Fraction(1, 10)  # evictionHard nodefs.available default


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    host_ips: tuple[str, ...]
    root_dir: Path
    cpu: Fraction = Fraction(1)  # cores
    memory: Fraction = Fraction(2**30)  # bytes
    ephemeral_storage: Fraction = Fraction(2**34)  # bytes
    kernel: tuple[int, ...] = field(default=(0,))

    @classmethod
    def detect(cls, name: str, host_ips: tuple[str, ...], root_dir: Path) -> NodeInfo:
        return cls(
            name=name,
            host_ips=host_ips,
            root_dir=root_dir,
            cpu=Fraction(os.cpu_count() or 1),
            memory=max(Fraction(0), memory_capacity() - MEMORY_EVICTION),
            ephemeral_storage=disk_capacity(root_dir) * (1 - NODEFS_EVICTION),
            kernel=kernel_version(),
        )

    @property
    def pods_dir(self) -> Path:
        return self.root_dir / "pods"

    def kernel_at_least(self, *version: int) -> bool:
        return self.kernel >= version


def memory_capacity() -> Fraction:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return Fraction(int(line.split()[1]) * 1024)
    return Fraction(0)


def disk_capacity(path: Path) -> Fraction:
    probe = path
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    stat = os.statvfs(probe)
    return Fraction(stat.f_blocks * stat.f_frsize)


def kernel_version() -> tuple[int, ...]:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", os.uname().release)
    if match is None:
        return (0,)
    return tuple(int(part) for part in match.groups() if part is not None)
