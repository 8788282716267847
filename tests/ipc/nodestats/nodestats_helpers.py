"""A node written into a temporary directory for the nodestats tests: cgroup v1 and v2
trees laid out as /sys/fs/cgroup, a /proc, a root dir and pod logs, a fake CRI, a clock."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pkletd.ipc.clock import FakeClock
from pkletd.ipc.csi.client import CsiError, VolumeStats
from pkletd.ipc.nodestats.cgroupstats import CgroupReader
from pkletd.ipc.nodestats.housekeeping import Housekeeping
from pkletd.ipc.nodestats.summary import NodePaths, SummaryProvider
from pkletd.ipc.nodestats.treecache import CachedTrees
from pkletd.ipc.runtime.cri import ContainerID, ContainerStatsInfo, CriError, FilesystemUsage

NODE = "node-a"
UID = "0f5d4c3b-0000-4000-8000-000000000001"
POD_CGROUP = f"/kubepods/burstable/pod{UID}"
CID = "c0ffee" * 10 + "abcd"
SANDBOX = "5a" * 32
SANDBOX_PID = 4242
V1_HIERARCHIES = ("cpu", "cpuacct", "memory", "pids")
GI = 2**30
MI = 2**20
NET_DEV = "\n".join(
    [
        "Inter-|   Receive                           |  Transmit",
        " face |bytes packets errs drop fifo frame compressed multicast|bytes packets errs drop",
        "    lo:  500  5 0 0 0 0 0 0  500  5 0 0 0 0 0 0",
        "  eth0: {rx} 10 1 2 0 0 0 0 {tx} 20 3 4 0 0 0 0",
        "veth12:  700  7 0 0 0 0 0 0  800  8 0 0 0 0 0 0",
        "",
    ]
)


@dataclass
class FakeStatsRuntime:
    """CRI ImageFsInfo and ListContainerStats from fields; ``fail`` makes the next call fail."""

    mountpoint: str
    layers: dict[str, int] = field(default_factory=dict)  # container id -> used bytes
    image_bytes: int = 300 * MI
    calls: list[str] = field(default_factory=list)
    fail: bool = False

    def image_fs_info(self) -> list[FilesystemUsage]:
        self.calls.append("ImageFsInfo")
        self._maybe_fail("ImageFsInfo")
        return [FilesystemUsage(1, self.mountpoint, self.image_bytes, 1000)]

    def list_container_stats(self) -> list[ContainerStatsInfo]:
        self.calls.append("ListContainerStats")
        self._maybe_fail("ListContainerStats")
        return [
            ContainerStatsInfo(
                ContainerID(cid),
                "c0",
                {"io.kubernetes.pod.uid": UID},
                FilesystemUsage(1, self.mountpoint, used, 12),
            )
            for cid, used in self.layers.items()
        ]

    def _maybe_fail(self, method: str) -> None:
        if self.fail:
            self.fail = False
            raise CriError(method, "runtime", "UNAVAILABLE", "connection refused")


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


class Node:
    """The files under one temporary directory; ``set_cpu``/``set_memory`` change them."""

    def __init__(self, base: Path, v2: bool = False) -> None:
        self.base = base
        self.v2 = v2
        self.mount = base / "cgroup"
        self.proc = base / "proc"
        self.root_dir = base / "root"
        self.pod_logs = base / "pods"
        self.images = base / "images"
        for d in (self.root_dir, self.pod_logs, self.images):
            d.mkdir(parents=True)
        if v2:
            write(self.mount / "cgroup.controllers", "cpu memory pids\n")
        self._proc()

    def _proc(self) -> None:
        write(
            self.proc / "meminfo",
            f"MemTotal: {8 * GI // 1024} kB\nMemFree: 1024 kB\nInactive(file): 2048 kB\n",
        )
        write(self.proc / "stat", "cpu  100 0 50 1000 10 0 0 0 0 0\nbtime 1690000000\n")
        write(self.proc / "loadavg", "0.10 0.20 0.30 2/345 6789\n")
        write(self.proc / "sys/kernel/pid_max", "4194304\n")
        write(self.proc / "sys/kernel/threads-max", "126000\n")
        self.set_net(self.proc / "net/dev", rx=1000, tx=2000)
        self.set_net(self.proc / str(SANDBOX_PID) / "net/dev", rx=111, tx=222)

    def set_net(self, path: Path, rx: int, tx: int) -> None:
        write(path, NET_DEV.format(rx=rx, tx=tx))

    def cgroup_dir(self, name: str, controller: str) -> Path:
        base = self.mount if self.v2 else self.mount / controller
        return base / name.strip("/")

    def make(self, name: str, procs: tuple[int, ...] = ()) -> None:
        for controller in ("",) if self.v2 else V1_HIERARCHIES:
            directory = self.cgroup_dir(name, controller)
            directory.mkdir(parents=True, exist_ok=True)
            write(directory / "cgroup.procs", "".join(f"{p}\n" for p in procs))

    def set_cpu(
        self,
        name: str,
        usage_ns: int,
        user_ticks: int = 30,
        system_ticks: int = 10,
        periods: int = 0,
        throttled: int = 0,
        throttled_ns: int = 0,
    ) -> None:
        if self.v2:
            write(
                self.cgroup_dir(name, "") / "cpu.stat",
                f"usage_usec {usage_ns // 1000}\nuser_usec {user_ticks * 10_000}\n"
                f"system_usec {system_ticks * 10_000}\nnr_periods {periods}\n"
                f"nr_throttled {throttled}\nthrottled_usec {throttled_ns // 1000}\n",
            )
            write(self.cgroup_dir(name, "") / "cpu.weight", "100\n")
            return
        cpuacct = self.cgroup_dir(name, "cpuacct")
        write(cpuacct / "cpuacct.usage", f"{usage_ns}\n")
        write(cpuacct / "cpuacct.stat", f"user {user_ticks}\nsystem {system_ticks}\n")
        cpu = self.cgroup_dir(name, "cpu")
        write(
            cpu / "cpu.stat",
            f"nr_periods {periods}\nnr_throttled {throttled}\nthrottled_time {throttled_ns}\n",
        )
        write(cpu / "cpu.shares", "102\n")

    def set_memory(
        self, name: str, usage: int, inactive_file: int, limit: int | None = None, rss: int = 5 * MI
    ) -> None:
        if self.v2:
            directory = self.cgroup_dir(name, "")
            write(directory / "memory.current", f"{usage}\n")
            write(directory / "memory.max", f"{limit}\n" if limit else "max\n")
            write(
                directory / "memory.stat",
                f"anon {rss}\nfile {inactive_file * 2}\nfile_mapped 4096\n"
                f"inactive_file {inactive_file}\npgfault 77\npgmajfault 3\n",
            )
            return
        directory = self.cgroup_dir(name, "memory")
        write(directory / "memory.usage_in_bytes", f"{usage}\n")
        write(directory / "memory.limit_in_bytes", f"{limit or 9223372036854771712}\n")
        write(
            directory / "memory.stat",
            f"cache {inactive_file * 2}\nrss {rss}\nmapped_file 4096\npgfault 77\n"
            f"pgmajfault 3\ninactive_file {inactive_file}\ntotal_cache {inactive_file * 2}\n"
            f"total_rss {rss}\ntotal_mapped_file 4096\ntotal_inactive_file {inactive_file}\n",
        )

    def standard(self) -> Node:
        """The root, /kubepods and one Burstable pod with a sandbox and one container."""
        for name in ("/", "/kubepods", "/kubepods/burstable", "/kubepods/besteffort"):
            self.make(name)
        self.make(POD_CGROUP)
        self.make(f"{POD_CGROUP}/{SANDBOX}", (SANDBOX_PID,))
        self.make(f"{POD_CGROUP}/{CID}", (SANDBOX_PID + 1, SANDBOX_PID + 2))
        self.set_cpu("/", 50_000_000_000)
        self.set_memory("/", 3 * GI, GI)
        self.set_cpu("/kubepods", 9_000_000_000)
        self.set_cpu("/kubepods/burstable", 4_000_000_000)
        self.set_cpu("/kubepods/besteffort", 1_000_000_000)
        self.set_memory("/kubepods", GI, 100 * MI)
        self.set_cpu(POD_CGROUP, 2_000_000_000, periods=100, throttled=7, throttled_ns=35_000_000)
        self.set_memory(POD_CGROUP, 64 * MI, 16 * MI)
        self.set_cpu(
            f"{POD_CGROUP}/{CID}", 1_500_000_000, periods=90, throttled=6, throttled_ns=30_000_000
        )
        self.set_memory(f"{POD_CGROUP}/{CID}", 48 * MI, 8 * MI, limit=128 * MI)
        self.set_cpu(f"{POD_CGROUP}/{SANDBOX}", 20_000_000)
        self.set_memory(f"{POD_CGROUP}/{SANDBOX}", MI, 0)
        volume = self.root_dir / "pods" / UID / "volumes" / "kubernetes.io~empty-dir" / "scratch"
        write(volume / "data", "x" * 10000)
        write(self.pod_logs / f"default_web_{UID}" / "app" / "0.log", "hello\n" * 100)
        return self

    def reader(self) -> CgroupReader:
        return CgroupReader(self.mount, v2=self.v2)

    def paths(self) -> NodePaths:
        return NodePaths(
            node_name=NODE,
            root_dir=self.root_dir,
            pod_logs_dir=self.pod_logs,
            proc=self.proc,
            system_cgroups={"pods": "/kubepods"},
        )

    def provider(self, clock: FakeClock, runtime: Any = None) -> SummaryProvider:
        return SummaryProvider(self.paths(), self.reader(), runtime=runtime, clock=clock)

    def housekeeping(
        self, clock: FakeClock, runtime: Any = None, du_period_s: float = 60.0
    ) -> Housekeeping:
        return Housekeeping(
            self.paths(),
            self.reader(),
            runtime,
            clock=clock,
            trees=CachedTrees(du_period_s),
            host_root=self.base,
        )


def api_pod(phase: str = "Running", name: str = "web", uid: str = UID) -> dict[str, Any]:
    """The pod as the http worker holds it (what the parent's PodStatusUpdated carries)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "uid": uid},
        "spec": {
            "initContainers": [
                {"name": "setup", "image": "busybox"},
                {"name": "proxy", "image": "busybox", "restartPolicy": "Always"},
            ],
            "containers": [{"name": "app", "image": "nginx:1.25"}],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        },
        "status": {
            "phase": phase,
            "qosClass": "Burstable",
            "startTime": "2023-11-14T22:13:00Z",
            "containerStatuses": [
                {
                    "name": "app",
                    "image": "nginx:1.25",
                    "containerID": f"containerd://{CID}",
                    "state": {"running": {"startedAt": "2023-11-14T22:13:10Z"}},
                }
            ],
        },
    }


# --- a CSI driver's stats (csivolumes) ---------------------------------------------

DRIVER = "hostpath.csi.pkletd.test"
SOCKET = "/plugins/hostpath/csi.sock"
EVERYTHING = frozenset({"GET_VOLUME_STATS", "VOLUME_CONDITION", "STAGE_UNSTAGE_VOLUME"})
FIGURES = VolumeStats(
    available_bytes=700,
    capacity_bytes=1000,
    used_bytes=300,
    inodes_free=90,
    inodes=100,
    inodes_used=10,
)


class FakeDriver:
    """A driver's client: records its calls, answers with ``stats`` by volume handle."""

    def __init__(self, capabilities: frozenset[str] = EVERYTHING) -> None:
        self.capabilities = capabilities
        self.stats: dict[str, VolumeStats] = {}
        self.calls: list[tuple[str, ...]] = []
        self.fail: CsiError | None = None
        self.closed = False

    def node_capabilities(self) -> frozenset[str]:
        self.calls.append(("NodeGetCapabilities",))
        return self.capabilities

    def volume_stats(self, volume_id: str, volume_path: str) -> VolumeStats:
        self.calls.append(("NodeGetVolumeStats", volume_id, volume_path))
        if self.fail is not None:
            raise self.fail
        return self.stats.get(volume_id, FIGURES)

    def close(self) -> None:
        self.closed = True

    def stats_calls(self) -> list[tuple[str, ...]]:
        return [c for c in self.calls if c[0] == "NodeGetVolumeStats"]
