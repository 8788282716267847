"""The node's memory as cAdvisor counts it for the root container: the root cgroup's
usage and working set (usage less inactive file pages), and ``MemTotal``. cgroup v2 has
no counters at the root, so there usage is ``MemTotal - MemFree`` and the working set
that less ``Inactive(file)`` (``/proc/meminfo``). The kubelet's ``memory.available`` is
``MemTotal`` less that working set."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.nodestats import procfs
from pkletd.ipc.nodestats.cgroupstats import CgroupSample, MemoryUsage


@dataclass(frozen=True, slots=True)
class NodeMemory:
    usage: MemoryUsage
    total: int | None  # MemTotal; None when /proc/meminfo does not say

    @property
    def available(self) -> int | None:
        return None if self.total is None else max(self.total - self.usage.working_set, 0)


def node_memory(root: CgroupSample | None, proc: Path = procfs.PROC) -> NodeMemory | None:
    """The node's memory from the root cgroup's sample (``CgroupReader.sample("/")``) and
    /proc/meminfo; None when neither says."""
    info = procfs.meminfo(proc)
    total = info.get("MemTotal")
    usage = root.memory if root is not None else None
    if usage is None and total is not None:
        used = total - info.get("MemFree", 0)
        usage = MemoryUsage(usage=used, working_set=max(used - info.get("Inactive(file)", 0), 0))
    return NodeMemory(usage, total) if usage is not None else None
