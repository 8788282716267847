"""One housekeeping pass, as cAdvisor's: every figure the stats endpoints serve, read at
once, so the endpoints only render what the last pass found.

A pass reads each cgroup once (``_PassReader``: the Summary and cAdvisor's rows share
what it read) and asks the runtime once (``_PassRuntime``: ``ImageFsInfo`` and
``ListContainerStats``), walks the volume and log directories whose last walk is a
``du`` period old (``treecache.CachedTrees``) and keeps the CPU samples between passes
(``rates.CpuRates``), so ``usageNanoCores`` is the rate between two housekeeping samples.
Every figure carries the time it was read (a du figure the time of its walk).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats.cadvisor import CadvisorSource, Machine, Row
from pkletd.ipc.nodestats.cgroupstats import CgroupReader, CgroupSample
from pkletd.ipc.nodestats.podrefs import PodDict
from pkletd.ipc.nodestats.rates import CpuRates
from pkletd.ipc.nodestats.summary import (
    CsiVolumeSource,
    Json,
    NodePaths,
    StatsRuntime,
    StatsUnavailable,
    SummaryProvider,
)
from pkletd.ipc.nodestats.treecache import CachedTrees
from pkletd.ipc.runtime.cri import ContainerStatsInfo, CriError, FilesystemUsage

log = logging.getLogger(__name__)

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Gathered:
    """What one pass found."""

    time: float  # wall-clock seconds the pass began
    took_s: float
    summary: Json | None  # the raw Summary, every part (times in seconds); None: unreadable
    error: str  # why ``summary`` is None
    rows: list[Row] | None  # cAdvisor's rows; None: the cgroups could not be read
    machine: Machine


class _PassReader(CgroupReader):
    """A ``CgroupReader`` that reads each cgroup once: for one pass only."""

    def __init__(self, reader: CgroupReader) -> None:
        super().__init__(reader.mount, reader.v2)
        self._samples: dict[str, CgroupSample | None] = {}
        self._exists: dict[str, bool] = {}
        self._pids: dict[str, list[int]] = {}
        self._children: dict[str, list[str]] = {}

    def sample(self, name: str, now: float) -> CgroupSample | None:
        if name not in self._samples:
            self._samples[name] = super().sample(name, now)
        return self._samples[name]

    def exists(self, name: str) -> bool:
        if name not in self._exists:
            self._exists[name] = super().exists(name)
        return self._exists[name]

    def pids(self, name: str) -> list[int]:
        if name not in self._pids:
            self._pids[name] = super().pids(name)
        return self._pids[name]

    def children(self, name: str) -> list[str]:
        if name not in self._children:
            self._children[name] = super().children(name)
        return self._children[name]


class _PassRuntime:
    """A ``StatsRuntime`` that asks the runtime once per call kind: for one pass only. A
    failed call answers nothing (what the Summary and the rows leave out then) and is
    kept in ``errors``."""

    def __init__(self, runtime: StatsRuntime) -> None:
        self._runtime = runtime
        self._answers: dict[str, Any] = {}
        self.errors: list[CriError] = []

    def _once(self, kind: str, call: Callable[[], list[T]]) -> list[T]:
        if kind not in self._answers:
            try:
                self._answers[kind] = call()
            except CriError as exc:
                self.errors.append(exc)
                self._answers[kind] = []
        found: list[T] = self._answers[kind]
        return found

    def image_fs_info(self) -> list[FilesystemUsage]:
        return self._once("ImageFsInfo", self._runtime.image_fs_info)

    def list_container_stats(self) -> list[ContainerStatsInfo]:
        return self._once("ListContainerStats", self._runtime.list_container_stats)


class Housekeeping:
    """Gathers passes; keeps what must last from one to the next (CPU samples, du walks).
    One thread calls ``gather``."""

    def __init__(
        self,
        paths: NodePaths,
        cgroups: CgroupReader,
        runtime: StatsRuntime | None = None,
        csi: CsiVolumeSource | None = None,
        clock: Clock = SYSTEM_CLOCK,
        trees: CachedTrees | None = None,
        host_root: Path = Path("/"),
    ) -> None:
        self._paths = paths
        self._cgroups = cgroups
        self._runtime = runtime
        self._csi = csi
        self._clock = clock
        self._rates = CpuRates()
        self._trees = trees if trees is not None else CachedTrees()
        self._host_root = host_root
        self._runtime_failing = False

    def gather(self, pods: Iterable[PodDict]) -> Gathered:
        listed = list(pods)
        began, start = self._clock.time(), self._clock.monotonic()
        reader = _PassReader(self._cgroups)
        runtime = _PassRuntime(self._runtime) if self._runtime is not None else None
        provider = SummaryProvider(
            self._paths, reader, runtime, self._clock, self._rates, self._csi, self._trees
        )
        summary, error = None, ""
        try:
            summary = provider.raw_summary(listed)
        except (StatsUnavailable, OSError) as exc:
            error = str(exc)
            log.error("node stats unreadable error=%s", exc)
        self._trees.forget_others()
        source = CadvisorSource(reader, runtime, self._clock, self._paths.proc, self._host_root)
        rows: list[Row] | None = None
        try:
            rows = source.rows(listed)
        except OSError as exc:
            log.error("cadvisor rows unreadable error=%s", exc)
        if runtime is not None:
            self._runtime_said(runtime.errors)
        took = self._clock.monotonic() - start
        return Gathered(began, took, summary, error, rows, source.machine())

    def _runtime_said(self, errors: list[CriError]) -> None:
        """One line when the runtime's stats start failing, one when they come back (not
        one per pass)."""
        failing = bool(errors)
        if failing and not self._runtime_failing:
            log.warning("runtime stats failed error=%s", errors[0])
        elif self._runtime_failing and not failing:
            log.info("runtime stats answered again")
        self._runtime_failing = failing
