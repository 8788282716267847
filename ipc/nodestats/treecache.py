"""What a directory tree uses (``fsusage.tree_usage``, du), with the time it was walked.

A walk costs a ``stat`` per file, so the stats served to clients walk each volume and log
directory at most once per ``period_s`` (``CachedTrees``), as cAdvisor's fsHandler runs
its du of a container's directories once a minute and the kubelet measures volumes once
per ``volumeStatsAggPeriod`` (1m); each figure keeps the time of its walk. ``FreshTrees``
walks at every call, for whoever decides on the figures of now (the eviction worker).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pkletd.ipc.nodestats import fsusage

DU_PERIOD_S = 60.0  # cAdvisor's fsHandler DefaultPeriod


@dataclass(frozen=True, slots=True)
class Walked:
    usage: fsusage.TreeUsage
    time: float  # wall-clock seconds of the walk


class Trees(Protocol):
    def measure(self, path: Path, now: float) -> Walked | None:
        """The tree's usage (None if it is not there); ``now`` is the wall time."""
        ...


class FreshTrees:
    def measure(self, path: Path, now: float) -> Walked | None:
        usage = fsusage.tree_usage(path)
        return Walked(usage, now) if usage is not None else None


class CachedTrees:
    """The last walk of each path, walked again once ``period_s`` old. One thread uses
    it (the housekeeping's); ``forget_others`` after each pass drops the paths that pass
    did not ask about (pods and containers gone)."""

    def __init__(self, period_s: float = DU_PERIOD_S) -> None:
        self.period_s = period_s
        self._last: dict[Path, Walked] = {}
        self._asked: set[Path] = set()

    def measure(self, path: Path, now: float) -> Walked | None:
        self._asked.add(path)
        last = self._last.get(path)
        if last is not None and now - last.time < self.period_s:
            return last
        walked = FreshTrees().measure(path, now)
        if walked is None:
            self._last.pop(path, None)
        else:
            self._last[path] = walked
        return walked

    def forget_others(self) -> None:
        self._last = {p: w for p, w in self._last.items() if p in self._asked}
        self._asked = set()
