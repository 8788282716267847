"""``/stats/summary``: the kubelet's Summary API (``k8s.io/kubelet/pkg/apis/stats/v1alpha1``).

``SummaryProvider.summary(pods)`` builds the ``Summary`` JSON object from the pods as the
http worker holds them (API pod dicts with status), the cgroups, ``/proc``, the
filesystems and, when given, the runtime (CRI ``ImageFsInfo`` and ``ListContainerStats``
for the image filesystem and the containers' writable layers):

- ``node``: ``nodeName``, ``systemContainers`` (``kubelet``, ``runtime``, ``pods``: the
  cgroups the provider is told of), ``startTime`` (boot), ``cpu`` and ``memory`` (the root
  cgroup; ``/proc`` where cgroup v2 has no root counters), ``network`` (the host's
  interfaces), ``fs`` (the filesystem of the root dir), ``runtime.imageFs``, ``rlimit``;
- ``pods``: ``podRef``, ``startTime``, ``containers`` (``cpu``, ``memory``, ``rootfs``,
  ``logs``), ``cpu`` and ``memory`` (the pod's cgroup), ``network`` (the sandbox's network
  namespace), ``volume`` (each volume directory under ``<root-dir>/pods/<uid>/volumes``,
  walked as ``du`` does, but the CSI volumes: those are their drivers' figures, from the
  ``CsiVolumeSource`` given, see ``csivolumes``), ``ephemeral-storage`` and
  ``process_stats``.

A pod's ``ephemeral-storage`` is the kubelet's (``calcEphemeralStorage``): its containers'
writable layers and logs, its local ephemeral volumes (``IsLocalEphemeralVolume``: an
emptyDir on disk, a configMap, a gitRepo; not a memory-backed one), the files directly in
its log directory and its ``etc-hosts`` file. It is what a pod's ephemeral-storage limit
is enforced against.

``usageNanoCores`` comes from ``rates.CpuRates`` (two samples; missing on the first). The
volumes' and logs' ``du`` is ``trees``' (``treecache``: a fresh walk unless told
otherwise), each with the time of its walk.
``only_cpu_and_memory`` (the query ``?only_cpu_and_memory=true``) leaves out all but the
CPU and memory, as the kubelet's ``GetCPUAndMemoryStats`` does. A node whose CPU or memory
cannot be read at all raises ``StatsUnavailable``.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats import csivolumes, fsusage, podrefs, procfs
from pkletd.ipc.nodestats.cgroupstats import CgroupReader, CgroupSample, MemoryUsage
from pkletd.ipc.nodestats.nodememory import node_memory
from pkletd.ipc.nodestats.podrefs import ContainerRef, PodDict, PodRef
from pkletd.ipc.nodestats.rates import CpuRates
from pkletd.ipc.nodestats.treecache import FreshTrees, Trees
from pkletd.ipc.runtime.cri import ContainerStatsInfo, CriError, FilesystemUsage

log = logging.getLogger(__name__)

DEFAULT_INTERFACE = "eth0"  # the kubelet's network.DefaultInterfaceName
ETC_HOSTS = "etc-hosts"  # <root-dir>/pods/<uid>/etc-hosts, the kubelet-managed hosts file

Json = dict[str, Any]


class StatsUnavailable(RuntimeError):
    """The node's own CPU or memory could not be read."""


class StatsRuntime(Protocol):
    """What the stats ask of the container runtime (``ipc.runtime.cri.CriRuntime`` is one)."""

    def image_fs_info(self) -> list[FilesystemUsage]: ...

    def list_container_stats(self) -> list[ContainerStatsInfo]: ...


class CsiVolumeSource(Protocol):
    """The pods' CSI volume stats, measured elsewhere (``csivolumes.CsiVolumeStats``);
    None: volume stats are off, for every volume (``csivolumes.VolumeStatsOff``)."""

    def of_pod(self, uid: str) -> list[Json] | None: ...


@dataclass(frozen=True, slots=True)
class NodePaths:
    """Where the node's facts are; ``system_cgroups`` names the system containers."""

    node_name: str
    root_dir: Path
    pod_logs_dir: Path
    proc: Path = procfs.PROC
    system_cgroups: Mapping[str, str] = field(default_factory=lambda: {"pods": podrefs.ROOT})


def system_cgroups(proc: Path = procfs.PROC, runtime_pid: int | None = None) -> dict[str, str]:
    """The kubelet's system containers: ``kubelet`` (this process's cgroup), ``runtime``
    (the runtime's, when its pid is given) and ``pods`` (``/kubepods``)."""
    found = {"pods": podrefs.ROOT}
    for name, pid in (("kubelet", "self"), ("runtime", runtime_pid)):
        cgroup = procfs.process_cgroup(proc, pid) if pid is not None else None
        if cgroup is not None:
            found[name] = cgroup
    return found


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True, slots=True)
class _RuntimeFacts:
    image_fs: FilesystemUsage | None
    layers: Mapping[str, FilesystemUsage]  # container id -> its writable layer


class SummaryProvider:
    """Builds Summaries; keeps the CPU samples between requests (thread-safe)."""

    def __init__(
        self,
        paths: NodePaths,
        cgroups: CgroupReader,
        runtime: StatsRuntime | None = None,
        clock: Clock = SYSTEM_CLOCK,
        rates: CpuRates | None = None,
        csi: CsiVolumeSource | None = None,
        trees: Trees | None = None,
    ) -> None:
        self.paths = paths
        self.cgroups = cgroups
        self.runtime = runtime
        self.clock = clock
        self.rates = rates if rates is not None else CpuRates()
        self.csi = csi  # None: the CSI volumes have no stats
        self.trees = trees if trees is not None else FreshTrees()  # du of volumes and logs

    def summary(self, pods: Iterable[PodDict], only_cpu_and_memory: bool = False) -> Json:
        """The Summary as the kubelet serves it (times in RFC 3339)."""
        formatted: Json = format_times(self.raw_summary(pods, only_cpu_and_memory))
        return formatted

    def raw_summary(self, pods: Iterable[PodDict], only_cpu_and_memory: bool = False) -> Json:
        """The Summary with its times as seconds since the epoch (floats)."""
        listed = list(pods)
        refs = podrefs.resolve_all(self.cgroups, listed)
        specs = {str(p["metadata"]["uid"]): p.get("spec") or {} for p in listed}
        facts = _RuntimeFacts(None, {}) if only_cpu_and_memory else self._runtime_facts()
        node = self._node(only_cpu_and_memory, facts)
        pod_stats = [
            self._pod(ref, only_cpu_and_memory, facts, specs.get(ref.uid, {})) for ref in refs
        ]
        self.rates.keep_only(
            ["/", *self.paths.system_cgroups.values()]
            + [r.cgroup for r in refs]
            + [c.cgroup for r in refs for c in r.containers]
        )
        return {"node": node, "pods": pod_stats}

    # --- the node -----------------------------------------------------------------------

    def _node(self, only_cpu_and_memory: bool, facts: _RuntimeFacts) -> Json:
        now = self.clock.time()
        time = now
        proc = self.paths.proc
        root = self.cgroups.sample("/", now)
        cpu = self._node_cpu(root, now)
        memory = self._node_memory(root, time)
        if cpu is None or memory is None:
            raise StatsUnavailable("the node's cpu or memory counters could not be read")
        boot = procfs.boot_time(proc)
        node: Json = {
            "nodeName": self.paths.node_name,
            "systemContainers": self._system_containers(now, boot),
            "startTime": boot if boot is not None else now,
            "cpu": cpu,
            "memory": memory,
        }
        if only_cpu_and_memory:
            return node
        node["network"] = network_stats(time, procfs.host_interfaces(proc))
        nodefs = fsusage.capacity(self.paths.root_dir)
        if nodefs is not None:
            node["fs"] = fsusage.filesystem_stats(time, nodefs)
        if facts.image_fs is not None:
            node["runtime"] = {"imageFs": _image_fs(time, facts.image_fs)}
        node["rlimit"] = _rlimit(time, proc)
        return node

    def _node_cpu(self, root: CgroupSample | None, now: float) -> Json | None:
        if root is not None and root.cpu is not None:
            return self._cpu(root.name, now, root.cpu.usage_ns)
        usage = procfs.cpu_ns(self.paths.proc)
        return self._cpu("/", now, usage) if usage is not None else None

    def _node_memory(self, root: CgroupSample | None, time: float) -> Json | None:
        memory = node_memory(root, self.paths.proc)
        if memory is None:
            return None
        out = memory_stats(time, memory.usage)
        if memory.available is not None:
            out["availableBytes"] = memory.available
        return out

    def _system_containers(self, now: float, boot: float | None) -> list[Json]:
        found = []
        for name, cgroup in sorted(self.paths.system_cgroups.items()):
            sample = self.cgroups.sample(cgroup, now)
            if sample is None:
                continue
            entry: Json = {"name": name, "startTime": boot if boot else now}
            entry.update(self._usage(sample))
            found.append(entry)
        return found

    # --- pods ---------------------------------------------------------------------------

    def _pod(
        self, ref: PodRef, only_cpu_and_memory: bool, facts: _RuntimeFacts, spec: PodDict
    ) -> Json:
        now = self.clock.time()
        time = now
        containers = [self._container(ref, c, only_cpu_and_memory, facts) for c in ref.containers]
        pod: Json = {
            "podRef": {"name": ref.name, "namespace": ref.namespace, "uid": ref.uid},
            "startTime": ref.start_time if ref.start_time is not None else now,
            "containers": containers,
        }
        sample = self.cgroups.sample(ref.cgroup, now)
        if sample is not None:
            pod.update(self._usage(sample))
        if only_cpu_and_memory:
            return pod
        pid = self._sandbox_pid(ref)
        if pid is not None:
            pod["network"] = network_stats(time, procfs.net_dev(self.paths.proc, pid))
        volumes = self._volumes(ref, time)
        if volumes:
            pod["volume"] = volumes
        local = local_ephemeral_volumes(spec)
        parts = [c[k] for c in containers for k in ("rootfs", "logs") if k in c]
        parts += [v for v in volumes if v["name"] in local] + self._pod_files(ref, time)
        pod["ephemeral-storage"] = self._ephemeral(time, parts)
        pod["process_stats"] = {"process_count": self.cgroups.process_count(ref.cgroup)}
        return pod

    def _container(
        self, pod: PodRef, ref: ContainerRef, only_cpu_and_memory: bool, facts: _RuntimeFacts
    ) -> Json:
        now = self.clock.time()
        time = now
        started = ref.started_at if ref.started_at is not None else now
        out: Json = {"name": ref.name, "startTime": started}
        sample = self.cgroups.sample(ref.cgroup, now)
        if sample is not None:
            out.update(self._usage(sample))
        if only_cpu_and_memory:
            return out
        layer = facts.layers.get(ref.id)
        if layer is not None:
            image_fs = fsusage.capacity(Path(layer.mountpoint)) if layer.mountpoint else None
            out["rootfs"] = fsusage.part_stats(time, image_fs, layer.used_bytes, layer.inodes_used)
        logs = self._logs(pod, ref, time)
        if logs is not None:
            out["logs"] = logs
        return out

    def _usage(self, sample: CgroupSample) -> Json:
        time = sample.time
        out: Json = {}
        if sample.cpu is not None:
            out["cpu"] = self._cpu(sample.name, sample.time, sample.cpu.usage_ns)
        if sample.memory is not None:
            out["memory"] = memory_stats(time, sample.memory)
        return out

    def _cpu(self, key: str, now: float, usage_ns: int) -> Json:
        out: Json = {"time": now}
        rate = self.rates.nano_cores(key, now, usage_ns)
        if rate is not None:
            out["usageNanoCores"] = rate
        out["usageCoreNanoSeconds"] = usage_ns
        return out

    def _sandbox_pid(self, ref: PodRef) -> int | None:
        for cgroup in (*ref.sandboxes, *(c.cgroup for c in ref.containers)):
            pids = self.cgroups.pids(cgroup)
            if pids:
                return pids[0]
        return None

    def _logs(self, pod: PodRef, ref: ContainerRef, time: float) -> Json | None:
        directory = self.paths.pod_logs_dir / f"{pod.namespace}_{pod.name}_{pod.uid}" / ref.name
        return self._tree_stats(directory, time)

    def _volumes(self, ref: PodRef, time: float) -> list[Json]:
        """The VolumeStats of each volume directory of the pod; a CSI volume's are its
        driver's (never a walk of what it mounts)."""
        csi = self.csi.of_pod(ref.uid) if self.csi is not None else []
        if csi is None:
            return []
        top = self.paths.root_dir / "pods" / ref.uid / "volumes"
        found = []
        for plugin_dir in sorted(_subdirs(top)):
            if plugin_dir.name == csivolumes.PLUGIN_DIR:
                continue
            for volume in sorted(_subdirs(plugin_dir)):
                stats = self._tree_stats(volume, time)
                if stats is not None:
                    found.append({**stats, "name": volume.name})
        return found + csi

    def _pod_files(self, ref: PodRef, time: float) -> list[Json]:
        """FsStats of the pod's own files: those directly in its log directory (the
        kubelet's pod log stats) and its etc-hosts."""
        logs = self.paths.pod_logs_dir / f"{ref.namespace}_{ref.name}_{ref.uid}"
        try:
            files = [p for p in logs.iterdir() if p.is_file() and not p.is_symlink()]
        except OSError:
            files = []
        files.append(self.paths.root_dir / "pods" / ref.uid / ETC_HOSTS)
        found = (self._tree_stats(path, time) for path in files)
        return [stats for stats in found if stats is not None]

    def _tree_stats(self, path: Path, time: float) -> Json | None:
        """FsStats of what a file or a directory tree uses, at the time it was walked;
        None if it is not there."""
        walked = self.trees.measure(path, time)
        if walked is None:
            return None
        used = walked.usage
        return fsusage.part_stats(walked.time, fsusage.capacity(path), used.used, used.inodes)

    def _ephemeral(self, time: float, parts: list[Json]) -> Json:
        """The pod's ephemeral storage: the sum of its parts."""
        used = sum(p.get("usedBytes", 0) for p in parts)
        inodes = sum(p.get("inodesUsed", 0) for p in parts)
        return fsusage.part_stats(time, fsusage.capacity(self.paths.root_dir), used, inodes)

    # --- the runtime --------------------------------------------------------------------

    def _runtime_facts(self) -> _RuntimeFacts:
        if self.runtime is None:
            return _RuntimeFacts(None, {})
        try:
            image_fs = self.runtime.image_fs_info()
            stats = self.runtime.list_container_stats()
        except CriError as exc:
            log.warning("runtime stats failed error=%s", exc)
            return _RuntimeFacts(None, {})
        layers: dict[str, FilesystemUsage] = {
            s.id: s.writable_layer for s in stats if s.writable_layer is not None
        }
        return _RuntimeFacts(image_fs[0] if image_fs else None, layers)


NODE_CPU_AND_MEMORY = ("nodeName", "systemContainers", "startTime", "cpu", "memory")
POD_CPU_AND_MEMORY = ("podRef", "startTime", "containers", "cpu", "memory")
CONTAINER_CPU_AND_MEMORY = ("name", "startTime", "cpu", "memory")


def cpu_and_memory(raw: Json) -> Json:
    """A full Summary cut to what ``only_cpu_and_memory`` serves (the kubelet's
    ``GetCPUAndMemoryStats``): the same figures, nothing else."""

    def keep(stats: Json, keys: tuple[str, ...]) -> Json:
        return {k: stats[k] for k in keys if k in stats}

    pods = []
    for pod in raw["pods"]:
        cut = keep(pod, POD_CPU_AND_MEMORY)
        cut["containers"] = [keep(c, CONTAINER_CPU_AND_MEMORY) for c in pod["containers"]]
        pods.append(cut)
    return {"node": keep(raw["node"], NODE_CPU_AND_MEMORY), "pods": pods}


def format_times(value: Any, key: str = "") -> Any:
    """Every ``time`` and ``startTime`` (seconds) of a raw summary as RFC 3339."""
    if isinstance(value, dict):
        return {k: format_times(v, k) for k, v in value.items()}
    if isinstance(value, list):
        return [format_times(v) for v in value]
    if key in ("time", "startTime") and isinstance(value, float | int):
        return rfc3339(value)
    return value


def memory_stats(time: float, memory: MemoryUsage) -> Json:
    out: Json = {"time": time}
    if memory.limit is not None:
        out["availableBytes"] = max(memory.limit - memory.working_set, 0)
    out.update(
        usageBytes=memory.usage,
        workingSetBytes=memory.working_set,
        rssBytes=memory.rss,
        pageFaults=memory.page_faults,
        majorPageFaults=memory.major_page_faults,
    )
    return out


def network_stats(time: float, interfaces: list[procfs.Interface]) -> Json:
    """``NetworkStats``: every interface, and the default one (eth0) inline."""
    listed = [
        {
            "name": i.name,
            "rxBytes": i.rx_bytes,
            "rxErrors": i.rx_errors,
            "txBytes": i.tx_bytes,
            "txErrors": i.tx_errors,
        }
        for i in interfaces
    ]
    out: Json = {"time": time}
    default = next((i for i in listed if i["name"] == DEFAULT_INTERFACE), None)
    if default is not None:
        out.update(default)
    out["interfaces"] = listed
    return out


def _image_fs(time: float, usage: FilesystemUsage) -> Json:
    fs = fsusage.capacity(Path(usage.mountpoint)) if usage.mountpoint else None
    return fsusage.part_stats(time, fs, usage.used_bytes, usage.inodes_used)


def _rlimit(time: float, proc: Path) -> Json:
    out: Json = {"time": time}
    maxpid, curproc = procfs.pid_max(proc), procfs.task_count(proc)
    if maxpid is not None:
        out["maxpid"] = maxpid
    if curproc is not None:
        out["curproc"] = curproc
    return out


def local_ephemeral_volumes(spec: PodDict) -> frozenset[str]:
    """The names of the pod's local ephemeral volumes (the kubelet's
    ``IsLocalEphemeralVolume``): an emptyDir on the node's disk, a configMap, a gitRepo."""
    found = set()
    for volume in spec.get("volumes") or []:
        empty_dir = volume.get("emptyDir")
        on_disk = empty_dir is not None and not (empty_dir or {}).get("medium")
        if on_disk or volume.get("configMap") is not None or volume.get("gitRepo") is not None:
            found.add(str(volume.get("name", "")))
    return frozenset(found)


def _subdirs(top: Path) -> list[Path]:
    try:
        return [p for p in top.iterdir() if p.is_dir() and not p.is_symlink()]
    except OSError:
        return []
