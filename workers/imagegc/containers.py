"""Container GC's decision, as the kubelet's container GC makes it (``kuberuntime_gc.go``).

*Evictable* containers are those not running, created at least ``minimumGCAge`` ago,
grouped by pod and container name (an *evict unit*), newest first. Then:

1. a pod that is gone (the parent has no such pod): every evictable container of it;
2. ``maxPerPodContainer`` (if not negative): the oldest beyond that many in each unit;
3. ``maxContainers`` (if not negative and exceeded): each unit cut to an equal share
   (at least 1), then the oldest overall beyond ``maxContainers``.

Sandboxes: one that is not ready and holds no container (once this collection's
containers are gone), of a pod that is gone, or not the newest of a live pod. Pod log
dirs (``<namespace>_<name>_<uid>`` under ``podLogsDir``): those of pods that are gone and
have nothing running (a ready sandbox or a running container: an orphan the parent has
yet to stop).

What is chosen is a proposal: the parent keeps whatever its own book says a pod still
needs (the status of a running pod shows its previous instance), see
``supervisor/pods/garbagecheck.py``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Protocol

from pkletd.ipc.bus.messages import DeadContainer, DeadSandbox, GarbageFound, GarbageKind, PodLogDir
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.runtime.cri import (
    ContainerInfo,
    ContainerState,
    CriError,
    SandboxInfo,
    SandboxState,
)
from pkletd.workers.imagegc.options import ContainerPolicy

log = logging.getLogger(__name__)

Unit = tuple[str, str]  # pod uid, container name
Gone = Callable[[str], bool]  # is this pod gone?


class ContainerRuntime(Protocol):
    def list_containers(self, pod_uid: str = "") -> list[ContainerInfo]: ...

    def list_sandboxes(self, pod_uid: str = "") -> list[SandboxInfo]: ...


def evict_units(
    containers: Iterable[ContainerInfo], min_age_s: float, now_ns: int
) -> dict[Unit, list[ContainerInfo]]:
    """Containers of pods that are not running and old enough, by unit, newest first."""
    newest_allowed = now_ns - int(min_age_s * 1e9)
    units: dict[Unit, list[ContainerInfo]] = {}
    for c in containers:
        if c.pod_uid and c.state is not ContainerState.RUNNING and c.created_at <= newest_allowed:
            units.setdefault((c.pod_uid, c.name), []).append(c)
    for unit in units.values():
        unit.sort(key=lambda c: c.created_at, reverse=True)
    return units


def select_containers(
    units: Mapping[Unit, list[ContainerInfo]], policy: ContainerPolicy, gone: Gone
) -> list[ContainerInfo]:
    """What the policy removes, oldest first."""
    chosen = [c for (uid, _), unit in units.items() if gone(uid) for c in unit]
    kept = {key: unit for key, unit in units.items() if not gone(key[0])}
    if policy.max_per_pod_container >= 0:
        chosen += _cut(kept, policy.max_per_pod_container)
    total = sum(len(unit) for unit in kept.values())
    if policy.max_containers >= 0 and total > policy.max_containers:
        chosen += _cut(kept, max(policy.max_containers // len(kept), 1))
        rest = sorted((c for unit in kept.values() for c in unit), key=lambda c: -c.created_at)
        chosen += rest[policy.max_containers :]
    return sorted(chosen, key=lambda c: c.created_at)


def _cut(units: dict[Unit, list[ContainerInfo]], keep: int) -> list[ContainerInfo]:
    """Cut every unit to its ``keep`` newest; what was cut."""
    cut = []
    for key, unit in units.items():
        cut += unit[keep:]
        units[key] = unit[:keep]
    return cut


def select_sandboxes(
    sandboxes: Iterable[SandboxInfo], containers_left: Iterable[ContainerInfo], gone: Gone
) -> list[SandboxInfo]:
    """Sandboxes not ready and empty: all of a gone pod's, all but the newest of a live one's."""
    occupied = {c.sandbox_id for c in containers_left}
    by_pod: dict[str, list[SandboxInfo]] = {}
    for sandbox in sandboxes:
        if sandbox.uid:
            by_pod.setdefault(sandbox.uid, []).append(sandbox)
    chosen = []
    for uid, boxes in by_pod.items():
        boxes.sort(key=lambda s: s.created_at, reverse=True)
        for sandbox in boxes if gone(uid) else boxes[1:]:
            if sandbox.state is SandboxState.NOTREADY and sandbox.id not in occupied:
                chosen.append(sandbox)
    return sorted(chosen, key=lambda s: s.created_at)


def pod_uid_of(dir_name: str) -> str:
    """The pod UID in a ``<namespace>_<name>_<uid>`` directory name, else ""."""
    parts = dir_name.split("_")
    return parts[2] if len(parts) == 3 and all(parts) else ""


def select_log_dirs(root: Path, gone: Gone, running: set[str]) -> list[PodLogDir]:
    """Log dirs of pods that are gone, but for those with something ``running``."""
    try:
        entries = [e for e in root.iterdir() if e.is_dir() and not e.is_symlink()]
    except FileNotFoundError:
        return []
    chosen = []
    for entry in sorted(entries):
        uid = pod_uid_of(entry.name)
        if uid and gone(uid) and uid not in running:
            chosen.append(PodLogDir(name=entry.name, pod_uid=uid))
    return chosen


class ContainerCollector:
    def __init__(
        self,
        runtime: ContainerRuntime,
        policy: ContainerPolicy,
        logs_root: Path,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._runtime = runtime
        self._policy = policy
        self._logs_root = logs_root
        self._clock = clock  # CRI creation times are wall-clock nanoseconds

    def collect(self, known: set[str], reclaim: bool = False) -> GarbageFound:
        """One collection's proposal; ``known``: the pods the parent has."""
        try:
            containers = self._runtime.list_containers()
            sandboxes = self._runtime.list_sandboxes()
        except CriError as exc:
            return GarbageFound(GarbageKind.CONTAINERS, reclaim, error=exc.rpc_message)
        gone: Gone = lambda uid: uid not in known  # noqa: E731
        units = evict_units(containers, self._policy.min_age_s, int(self._clock.time() * 1e9))
        dead = select_containers(units, self._policy, gone)
        removed = {c.id for c in dead}
        left = [c for c in containers if c.id not in removed]
        boxes = select_sandboxes(sandboxes, left, gone)
        dirs = select_log_dirs(self._logs_root, gone, _running(containers, sandboxes))
        return GarbageFound(
            GarbageKind.CONTAINERS,
            reclaim,
            containers=[DeadContainer(id=c.id, pod_uid=c.pod_uid, name=c.name) for c in dead],
            sandboxes=[DeadSandbox(id=s.id, pod_uid=s.uid) for s in boxes],
            log_dirs=dirs,
        )


def _running(containers: Sequence[ContainerInfo], sandboxes: Sequence[SandboxInfo]) -> set[str]:
    """Pods with a ready sandbox or a running container."""
    found = {s.uid for s in sandboxes if s.state is SandboxState.READY}
    return found | {c.pod_uid for c in containers if c.state is ContainerState.RUNNING}
