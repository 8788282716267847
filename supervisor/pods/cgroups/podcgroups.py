"""Pod-level cgroups on the cgroupfs driver, laid out as the kubelet lays them out.

The kubelet's defaults (``cgroupsPerQOS: true``, ``cgroupRoot: /``,
``cgroupDriver: cgroupfs``, ``enforceNodeAllocatable: [pods]``)::

    /kubepods                      cpu.shares of the node's CPUs, memory and pids: the node's
    /kubepods/pod<uid>             a Guaranteed pod
    /kubepods/burstable            cpu.shares from the Burstable pods' summed cpu requests
    /kubepods/burstable/pod<uid>
    /kubepods/besteffort           cpu.shares 2
    /kubepods/besteffort/pod<uid>

``PodCgroups.start`` creates the first level and the QoS levels (the kubelet's
node-allocatable and QoS container managers), ``ensure`` a pod's cgroup before its
sandbox, with ``resources.pod_cgroup_values`` (``ResourceConfigForPod``), and
``remove`` kills what is left in it and removes it once its containers and sandbox
are gone (``Destroy``). The sandbox's ``cgroup_parent`` is ``pod_cgroup_name``; the
runtime puts the sandbox and every container of the pod below it.

``CgroupTree`` writes one cgroupfs: cgroup v2 when ``<mount>/cgroup.controllers``
exists (``cpu.weight`` from the shares as the kubelet converts them, ``cpu.max``,
``memory.max``, ``pids.max``; controllers enabled in each parent's
``cgroup.subtree_control``), else cgroup v1 with a hierarchy per controller under
the mount (``cpu.shares``, ``cpu.cfs_period_us``, ``cpu.cfs_quota_us``,
``memory.limit_in_bytes``, ``pids.max``; made in cpu, cpuacct, cpuset, memory and
pids, with cpuset's cpus and mems copied from the parent as runc needs them).
Removal covers every hierarchy (the runtime made the pod's directory in all of
them). Tests point a tree at a temporary directory.
"""

from __future__ import annotations

import errno
import logging
import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from fractions import Fraction
from pathlib import Path

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.podspec import Pod, PodUID
from pkletd.supervisor.pods import nodeinfo
from pkletd.supervisor.pods.cgroups import qos, resources
from pkletd.supervisor.pods.cgroups.resources import CgroupValues

log = logging.getLogger(__name__)

MOUNT = Path("/sys/fs/cgroup")
ROOT = "/kubepods"
QOS_PARENT = {
    qos.GUARANTEED: ROOT,
    qos.BURSTABLE: f"{ROOT}/burstable",
    qos.BEST_EFFORT: f"{ROOT}/besteffort",
}
V1_CONTROLLERS = ("cpu", "cpuacct", "cpuset", "memory", "pids")
V2_CONTROLLERS = ("cpu", "cpuset", "memory", "pids")
REMOVE_ATTEMPTS = 6  # an emptied cgroup can stay busy for a moment: 10 ms doubling


def pod_cgroup_name(pod: Pod) -> str:
    """The pod's cgroup, the sandbox's ``cgroup_parent``: ``/kubepods/<qos>/pod<uid>``."""
    return f"{QOS_PARENT[qos.pod_qos(pod)]}/pod{pod.uid}"


def pod_cgroup_names(uid: str) -> tuple[str, ...]:
    """Where a pod's cgroup may be, whatever its QoS class was."""
    return tuple(f"{parent}/pod{uid}" for parent in QOS_PARENT.values())


def host_is_v2(mount: Path = MOUNT) -> bool:
    return (mount / "cgroup.controllers").exists()


def _sigkill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


class CgroupTree:
    """Creates, configures and removes cgroups (named ``/a/b``) in one cgroupfs."""

    def __init__(
        self,
        mount: Path = MOUNT,
        v2: bool | None = None,
        kill: Callable[[int], None] = _sigkill,
        rmdir: Callable[[Path], None] = os.rmdir,
    ) -> None:
        self.mount = mount
        self.v2 = host_is_v2(mount) if v2 is None else v2
        self._kill = kill
        self._rmdir = rmdir

    # --- paths --------------------------------------------------------------------------

    def path(self, name: str, controller: str = "") -> Path:
        base = self.mount if self.v2 else self.mount / controller
        return base / name.strip("/")

    def _controllers(self) -> list[str]:
        """v1: the controllers pkletd configures that are mounted, once per hierarchy."""
        if self.v2:
            return [""]
        found: dict[str, str] = {}
        for controller in V1_CONTROLLERS:
            top = self.mount / controller
            if top.is_dir():
                found.setdefault(os.path.realpath(top), controller)
        return list(found.values())

    def _hierarchies(self) -> list[Path]:
        """Every hierarchy's top directory (v1: each mounted controller; v2: the one)."""
        if self.v2:
            return [self.mount]
        tops: dict[str, Path] = {}
        for entry in sorted(self.mount.iterdir()):
            if entry.is_dir():
                tops.setdefault(os.path.realpath(entry), entry)
        return list(tops.values())

    # --- questions ----------------------------------------------------------------------

    def exists(self, name: str) -> bool:
        return all(self.path(name, c).is_dir() for c in self._controllers())

    def any_exists(self, name: str) -> bool:
        return any((top / name.strip("/")).is_dir() for top in self._hierarchies())

    def children(self, name: str) -> set[str]:
        """The names of the cgroups right below ``name``, in any hierarchy."""
        found: set[str] = set()
        for top in self._hierarchies():
            try:
                with os.scandir(top / name.strip("/")) as entries:
                    found.update(e.name for e in entries if e.is_dir(follow_symlinks=False))
            except OSError:
                continue  # not made in this hierarchy, or removed meanwhile
        return found

    def pids(self, name: str) -> set[int]:
        """Processes in the cgroup or below it, in any hierarchy."""
        found: set[int] = set()
        for top in self._hierarchies():
            for directory in _walk(top / name.strip("/")):
                try:
                    text = (directory / "cgroup.procs").read_text()
                except OSError:
                    continue
                found.update(int(word) for word in text.split())
        return found

    # --- changes ------------------------------------------------------------------------

    def create(self, name: str, values: CgroupValues) -> None:
        """Make the cgroup (and its parents) in every configured controller; set values."""
        for controller in self._controllers():
            self._make(name, controller)
        self.update(name, values)

    def update(self, name: str, values: CgroupValues) -> None:
        if self.v2:
            self._write_v2(self.path(name), values)
            return
        controllers = self._controllers()
        if "cpu" in controllers:
            cpu = self.path(name, "cpu")
            _write(cpu / "cpu.shares", values.cpu_shares)
            _write(cpu / "cpu.cfs_period_us", values.cpu_period)  # the period first
            _write(cpu / "cpu.cfs_quota_us", values.cpu_quota)
        if "memory" in controllers and values.memory:
            _write(self.path(name, "memory") / "memory.limit_in_bytes", values.memory)
        if "pids" in controllers and values.pids is not None:
            _write(self.path(name, "pids") / "pids.max", _or_max(values.pids))

    def destroy(self, name: str, kill: bool = True) -> None:
        """Kill what is left in the cgroup (unless not ``kill``: then a cgroup with
        processes stays, with EBUSY), and remove it and below from every hierarchy."""
        for pid in sorted(self.pids(name)) if kill else ():
            self._kill(pid)
        for top in self._hierarchies():
            for directory in reversed(list(_walk(top / name.strip("/")))):
                self._remove(directory)

    def _make(self, name: str, controller: str) -> None:
        parts = [p for p in name.split("/") if p]
        base = self.path("", controller)
        for part in parts:
            parent, base = base, base / part
            if self.v2:
                _enable_controllers(parent)
            try:
                base.mkdir()
            except FileExistsError:
                continue
            if controller == "cpuset":
                for knob in ("cpuset.cpus", "cpuset.mems"):
                    _copy_if_empty(parent / knob, base / knob)

    def _write_v2(self, path: Path, values: CgroupValues) -> None:
        if values.cpu_shares is not None:
            _write(path / "cpu.weight", resources.shares_to_weight(values.cpu_shares))
        if values.cpu_quota is not None or values.cpu_period is not None:
            quota = values.cpu_quota or 0
            period = values.cpu_period or resources.QUOTA_PERIOD
            _write(path / "cpu.max", f"{quota if quota > 0 else 'max'} {period}")
        if values.memory:
            _write(path / "memory.max", values.memory)
        if values.pids is not None:
            _write(path / "pids.max", _or_max(values.pids))

    def _remove(self, directory: Path) -> None:
        delay = 0.01
        for attempt in range(REMOVE_ATTEMPTS):
            try:
                self._rmdir(directory)
                return
            except FileNotFoundError:
                return
            except OSError as exc:
                if exc.errno != errno.EBUSY or attempt == REMOVE_ATTEMPTS - 1:
                    raise
            time.sleep(delay)
            delay *= 2


def _walk(top: Path) -> Iterator[Path]:
    """``top`` and the directories below it, parents first (nothing if it is gone)."""
    if not top.is_dir():
        return
    yield top
    for parent, subdirs, _ in os.walk(top):
        for sub in sorted(subdirs):
            yield Path(parent) / sub


def _write(path: Path, value: object) -> None:
    if value is None:
        return
    with open(path, "w") as f:  # one write(2): cgroupfs takes a value per write
        f.write(str(value))


def _or_max(value: int) -> str:
    return str(value) if value > 0 else "max"


def _copy_if_empty(source: Path, target: Path) -> None:
    try:
        if target.exists() and target.read_text().strip():
            return
        value = source.read_text().strip()
    except OSError:
        return
    if value:
        _write(target, value)


def _enable_controllers(parent: Path) -> None:
    """v2: let the parent's children use the controllers pkletd sets (those it has)."""
    try:
        available = set((parent / "cgroup.controllers").read_text().split())
        enabled = set((parent / "cgroup.subtree_control").read_text().split())
    except OSError:
        return
    wanted = [c for c in V2_CONTROLLERS if c in available and c not in enabled]
    if wanted:
        _write(parent / "cgroup.subtree_control", " ".join(f"+{c}" for c in wanted))


class PodCgroups:
    """The kubelet's QoS and pod cgroups; ``ensure`` and ``remove`` run on pod-worker threads."""

    def __init__(
        self,
        tree: CgroupTree,
        node_milli_cpu: int,
        node_memory: int,
        pid_max: int = 0,
        pods_pids_limit: int = -1,
    ) -> None:
        self.tree = tree
        self._node_milli_cpu = node_milli_cpu
        self._node_memory = node_memory
        self._pid_max = pid_max
        self._pods_pids_limit = pods_pids_limit
        self._lock = threading.Lock()
        self._burstable: dict[str, int] = {}  # pod uid -> its cpu requests in millicores
        self._burstable_shares: int | None = None

    @classmethod
    def host(cls, pods_pids_limit: int = -1) -> PodCgroups:
        return cls(
            CgroupTree(),
            node_milli_cpu=(os.cpu_count() or 1) * 1000,
            node_memory=quantity.ceil_int(nodeinfo.memory_capacity()),
            pid_max=_pid_max(),
            pods_pids_limit=pods_pids_limit,
        )

    def start(self) -> PodCgroups:
        """Create ``/kubepods`` with the node's capacity and the Burstable and BestEffort levels."""
        node = CgroupValues(
            cpu_shares=resources.milli_cpu_to_shares(self._node_milli_cpu),
            memory=self._node_memory or None,
            pids=self._pid_max or None,
        )
        self.tree.create(ROOT, node)
        with self._lock:
            self._burstable_shares = self._burstable_total()
            burstable = CgroupValues(cpu_shares=self._burstable_shares)
            self.tree.create(QOS_PARENT[qos.BURSTABLE], burstable)
        self.tree.create(QOS_PARENT[qos.BEST_EFFORT], CgroupValues(cpu_shares=resources.MIN_SHARES))
        log.info(
            "cgroups ready root=%s driver=cgroupfs version=%d",
            ROOT,
            2 if self.tree.v2 else 1,
        )
        return self

    def track(self, pod: Pod) -> None:
        """Count the pod in its QoS level (the kubelet's periodic QoS update, per sync)."""
        self._track(pod.uid, pod)

    def ensure(self, pod: Pod) -> str | None:
        """Create the pod's cgroup if it is missing; None, or why it could not be."""
        name = pod_cgroup_name(pod)
        self._track(pod.uid, pod)
        if self.tree.exists(name):
            return None
        try:
            self.tree.create(name, resources.pod_cgroup_values(pod, self._pods_pids_limit))
        except OSError as exc:
            log.error("pod cgroup failed pod=%s cgroup=%s error=%s", pod.full_name, name, exc)
            return (
                "unable to ensure pod container exists: "
                f"failed to create container for {name}: {exc}"
            )
        log.info("pod cgroup created pod=%s cgroup=%s", pod.full_name, name)
        return None

    def remove(self, uid: PodUID, kill: bool = True) -> None:
        """Remove the pod's cgroup wherever it is (killing what is left in it, unless
        not ``kill``); a failure is logged."""
        self._track(uid, None)
        for name in pod_cgroup_names(uid):
            if not self.tree.any_exists(name):
                continue
            try:
                self.tree.destroy(name, kill)
            except OSError as exc:
                log.error("pod cgroup removal failed uid=%s cgroup=%s error=%s", uid, name, exc)
                continue
            log.info("pod cgroup removed uid=%s cgroup=%s", uid, name)

    def unused(self, skip: Callable[[PodUID], bool]) -> set[PodUID]:
        """The uid of every pod cgroup under ``/kubepods`` with nothing made below it (no
        sandbox, no container), whoever made it, but for the uids ``skip`` says."""
        found = set()
        for parent in QOS_PARENT.values():
            for child in self.tree.children(parent):
                uid = PodUID(child.removeprefix("pod"))
                if (
                    child.startswith("pod")
                    and not skip(uid)
                    and not self.tree.children(f"{parent}/{child}")  # last: a scan each
                ):
                    found.add(uid)
        return found

    def _track(self, uid: PodUID, pod: Pod | None) -> None:
        """Keep ``/kubepods/burstable``'s shares at the Burstable pods' summed cpu requests."""
        with self._lock:
            if pod is not None and qos.pod_qos(pod) == qos.BURSTABLE:
                cpu = resources.pod_requests(pod).get("cpu", Fraction(0))
                self._burstable[uid] = quantity.milli(cpu)
            else:
                self._burstable.pop(uid, None)
            shares = self._burstable_total()
            if shares == self._burstable_shares or self._burstable_shares is None:
                return
            try:
                self.tree.update(QOS_PARENT[qos.BURSTABLE], CgroupValues(cpu_shares=shares))
            except OSError as exc:
                log.error("burstable cgroup update failed shares=%d error=%s", shares, exc)
                return
            self._burstable_shares = shares

    def _burstable_total(self) -> int:
        return resources.milli_cpu_to_shares(sum(self._burstable.values()))


def _pid_max() -> int:
    try:
        return int(Path("/proc/sys/kernel/pid_max").read_text())
    except (OSError, ValueError):
        return 0
