"""One cgroup's CPU and memory counters, read from a cgroupfs as cAdvisor reads them.

cgroup v1 (a hierarchy per controller under the mount): ``cpuacct.usage`` and
``cpuacct.stat`` (user and system, in USER_HZ ticks), ``cpu.stat`` (CFS periods and
throttling), ``cpu.shares``, ``memory.usage_in_bytes``, ``memory.limit_in_bytes`` and
``memory.stat``. cgroup v2 (one hierarchy; when ``<mount>/cgroup.controllers`` exists):
``cpu.stat`` (microseconds), ``cpu.weight``, ``memory.current``, ``memory.max`` and
``memory.stat``.

The working set is cAdvisor's: usage minus inactive file pages (``total_inactive_file``
on v1, ``inactive_file`` on v2), never below zero. A cgroup that is gone, or a file
its kernel does not have, reads as None rather than failing: containers come and go
between listing and reading.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

MOUNT = Path("/sys/fs/cgroup")
USER_HZ = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100
NS_PER_TICK = 1_000_000_000 // USER_HZ
UNLIMITED = 1 << 62  # v1 writes "no limit" as a page-rounded 2^63 - 1


@dataclass(frozen=True, slots=True)
class CpuUsage:
    usage_ns: int  # cumulative, all cores
    user_ns: int | None = None
    system_ns: int | None = None
    periods: int | None = None
    throttled_periods: int | None = None
    throttled_ns: int | None = None


@dataclass(frozen=True, slots=True)
class MemoryUsage:
    usage: int
    working_set: int
    rss: int = 0
    cache: int = 0
    mapped_file: int = 0
    page_faults: int = 0
    major_page_faults: int = 0
    limit: int | None = None  # None: no limit


@dataclass(frozen=True, slots=True)
class CgroupSample:
    """What one read of a cgroup found; ``time`` is the clock's wall time, in seconds."""

    name: str
    time: float
    cpu: CpuUsage | None
    memory: MemoryUsage | None
    cpu_shares: int | None = None


def _read(path: Path) -> str | None:
    try:
        return path.read_text()
    except (OSError, ValueError):
        return None


def _int(path: Path) -> int | None:
    text = _read(path)
    if text is None:
        return None
    try:
        return int(text.strip())
    except ValueError:
        return None


def _keyed(path: Path) -> dict[str, int]:
    """A flat keyed file (``memory.stat``, ``cpu.stat``): ``key value`` per line."""
    found: dict[str, int] = {}
    for line in (_read(path) or "").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[1].lstrip("-").isdigit():
            found[parts[0]] = int(parts[1])
    return found


def working_set(usage: int, inactive_file: int) -> int:
    """cAdvisor's working set: usage less the inactive file cache, at least 0."""
    return max(usage - inactive_file, 0)


def weight_to_shares(weight: int) -> int:
    """cgroup v2 ``cpu.weight`` back to v1 shares (the inverse of the kubelet's conversion)."""
    return 2 + ((weight - 1) * 262142) // 9999


class CgroupReader:
    """Reads cgroups (named ``/a/b``) under one cgroupfs mount."""

    def __init__(self, mount: Path = MOUNT, v2: bool | None = None) -> None:
        self.mount = mount
        self.v2 = (mount / "cgroup.controllers").exists() if v2 is None else v2

    def path(self, name: str, controller: str = "") -> Path:
        base = self.mount if self.v2 else self.mount / controller
        return base / name.strip("/")

    def exists(self, name: str) -> bool:
        return self.path(name, "memory").is_dir()

    def children(self, name: str) -> list[str]:
        """The names of the cgroups right below ``name`` (in the memory hierarchy on v1)."""
        try:
            with os.scandir(self.path(name, "memory")) as entries:
                return sorted(e.name for e in entries if e.is_dir(follow_symlinks=False))
        except OSError:
            return []

    def pids(self, name: str) -> list[int]:
        """The processes in the cgroup itself (not below it)."""
        text = _read(self.path(name, "memory") / "cgroup.procs") or ""
        return [int(word) for word in text.split() if word.isdigit()]

    def process_count(self, name: str) -> int:
        """The processes in the cgroup and below it."""
        count = 0
        for directory, _, _ in os.walk(self.path(name, "memory")):
            count += len((_read(Path(directory) / "cgroup.procs") or "").split())
        return count

    def sample(self, name: str, now: float) -> CgroupSample | None:
        """Read the cgroup; None when it is not there."""
        if not self.exists(name):
            return None
        if self.v2:
            return CgroupSample(
                name, now, self._cpu_v2(name), self._memory_v2(name), self._shares_v2(name)
            )
        return CgroupSample(
            name,
            now,
            self._cpu_v1(name),
            self._memory_v1(name),
            _int(self.path(name, "cpu") / "cpu.shares"),
        )

    # --- v1 -----------------------------------------------------------------------------

    def _cpu_v1(self, name: str) -> CpuUsage | None:
        usage = _int(self.path(name, "cpuacct") / "cpuacct.usage")
        if usage is None:
            return None
        ticks = _keyed(self.path(name, "cpuacct") / "cpuacct.stat")
        cfs = _keyed(self.path(name, "cpu") / "cpu.stat")
        return CpuUsage(
            usage_ns=usage,
            user_ns=ticks["user"] * NS_PER_TICK if "user" in ticks else None,
            system_ns=ticks["system"] * NS_PER_TICK if "system" in ticks else None,
            periods=cfs.get("nr_periods"),
            throttled_periods=cfs.get("nr_throttled"),
            throttled_ns=cfs.get("throttled_time"),
        )

    def _memory_v1(self, name: str) -> MemoryUsage | None:
        directory = self.path(name, "memory")
        usage = _int(directory / "memory.usage_in_bytes")
        if usage is None:
            return None
        stat = _keyed(directory / "memory.stat")
        limit = _int(directory / "memory.limit_in_bytes")
        inactive = stat.get("total_inactive_file", stat.get("inactive_file", 0))
        return MemoryUsage(
            usage=usage,
            working_set=working_set(usage, inactive),
            rss=stat.get("total_rss", stat.get("rss", 0)),
            cache=stat.get("total_cache", stat.get("cache", 0)),
            mapped_file=stat.get("total_mapped_file", stat.get("mapped_file", 0)),
            page_faults=stat.get("pgfault", 0),
            major_page_faults=stat.get("pgmajfault", 0),
            limit=limit if limit is not None and limit < UNLIMITED else None,
        )

    # --- v2 -----------------------------------------------------------------------------

    def _cpu_v2(self, name: str) -> CpuUsage | None:
        stat = _keyed(self.path(name) / "cpu.stat")
        if "usage_usec" not in stat:
            return None

        def ns(key: str) -> int | None:
            return stat[key] * 1000 if key in stat else None

        return CpuUsage(
            usage_ns=stat["usage_usec"] * 1000,
            user_ns=ns("user_usec"),
            system_ns=ns("system_usec"),
            periods=stat.get("nr_periods"),
            throttled_periods=stat.get("nr_throttled"),
            throttled_ns=ns("throttled_usec"),
        )

    def _memory_v2(self, name: str) -> MemoryUsage | None:
        directory = self.path(name)
        usage = _int(directory / "memory.current")
        if usage is None:
            return None
        stat = _keyed(directory / "memory.stat")
        return MemoryUsage(
            usage=usage,
            working_set=working_set(usage, stat.get("inactive_file", 0)),
            rss=stat.get("anon", 0),
            cache=stat.get("file", 0),
            mapped_file=stat.get("file_mapped", 0),
            page_faults=stat.get("pgfault", 0),
            major_page_faults=stat.get("pgmajfault", 0),
            limit=_int(directory / "memory.max"),  # "max" reads as None
        )

    def _shares_v2(self, name: str) -> int | None:
        weight = _int(self.path(name) / "cpu.weight")
        return weight_to_shares(weight) if weight is not None else None
