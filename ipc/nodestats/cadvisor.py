"""``/metrics/cadvisor``: per-cgroup usage in cAdvisor's names and labels, for Prometheus.

One series set per cgroup pkletd knows: the root (``id="/"``, with the host's network),
``/kubepods`` and its QoS levels, each pod's cgroup, each sandbox's (``name`` its id; the
pod's network is reported here, as cAdvisor reports it on the sandbox) and each running
container's (``container``, ``image``, ``name`` its id). The labels are the kubelet's
for cAdvisor: ``container``, ``id`` (the cgroup), ``image``, ``name``, ``namespace``,
``pod``, blank where unknown, plus ``cpu``, ``device`` or ``interface`` where cAdvisor
adds them. Usage samples carry
the time they were read; ``container_spec_*`` and ``machine_*`` carry none.

The CPU-time counters come from ``cpuacct``/``cpu.stat``, memory from ``memory.stat``
(working set = usage - inactive file, cAdvisor's rule), a container's filesystem usage from
CRI ``ListContainerStats`` (its writable layer), when a runtime is given.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats import podrefs, procfs
from pkletd.ipc.nodestats.cgroupstats import CgroupReader, CgroupSample
from pkletd.ipc.nodestats.podrefs import PodDict
from pkletd.ipc.nodestats.summary import StatsRuntime
from pkletd.ipc.runtime.cri import CriError, FilesystemUsage
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

log = logging.getLogger(__name__)

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
BASE_LABELS = ("container", "id", "image", "name", "namespace", "pod")
MACHINE_LABELS = ("boot_id", "machine_id", "system_uuid")
NS_PER_S = 1e9


@dataclass(frozen=True, slots=True)
class Row:
    """One cgroup and what was read of it."""

    labels: tuple[str, ...]  # values of BASE_LABELS
    sample: CgroupSample
    interfaces: tuple[procfs.Interface, ...] = ()
    layer: FilesystemUsage | None = None


Values = list[tuple[tuple[str, ...], float]]  # (extra label values, value)


@dataclass(frozen=True, slots=True)
class Series:
    name: str
    help: str
    counter: bool
    values: Callable[[Row], Values]
    extra: tuple[str, ...] = ()
    timestamped: bool = True


def _one(value: float | None) -> Values:
    return [((), float(value))] if value is not None else []


def _cpu(get: Callable[[CgroupSample], float | None]) -> Callable[[Row], Values]:
    return lambda row: _one(get(row.sample)) if row.sample.cpu is not None else []


def _memory(field: str) -> Callable[[Row], Values]:
    def values(row: Row) -> Values:
        memory = row.sample.memory
        return _one(getattr(memory, field)) if memory is not None else []

    return values


def _seconds(ns: int | None) -> float | None:
    return ns / NS_PER_S if ns is not None else None


def _cfs(get: Callable[[CgroupSample], float | None]) -> Callable[[Row], Values]:
    def values(row: Row) -> Values:
        cpu = row.sample.cpu
        return _one(get(row.sample)) if cpu is not None and cpu.periods else []

    return values


def _net(field: str) -> Callable[[Row], Values]:
    return lambda row: [((i.name,), float(getattr(i, field))) for i in row.interfaces]


def _fs(row: Row) -> Values:
    layer = row.layer
    if layer is None or layer.used_bytes is None:
        return []
    return [((layer.mountpoint,), float(layer.used_bytes))]


SERIES = (
    Series(
        "container_cpu_usage_seconds_total",
        "Cumulative cpu time consumed in seconds.",
        True,
        lambda row: [(("total",), row.sample.cpu.usage_ns / NS_PER_S)] if row.sample.cpu else [],
        ("cpu",),
    ),
    Series(
        "container_cpu_user_seconds_total",
        "Cumulative user cpu time consumed in seconds.",
        True,
        _cpu(lambda s: _seconds(s.cpu.user_ns) if s.cpu else None),
    ),
    Series(
        "container_cpu_system_seconds_total",
        "Cumulative system cpu time consumed in seconds.",
        True,
        _cpu(lambda s: _seconds(s.cpu.system_ns) if s.cpu else None),
    ),
    Series(
        "container_cpu_cfs_periods_total",
        "Number of elapsed enforcement period intervals.",
        True,
        _cfs(lambda s: s.cpu.periods if s.cpu else None),
    ),
    Series(
        "container_cpu_cfs_throttled_periods_total",
        "Number of throttled period intervals.",
        True,
        _cfs(lambda s: s.cpu.throttled_periods if s.cpu else None),
    ),
    Series(
        "container_cpu_cfs_throttled_seconds_total",
        "Total time duration the container has been throttled.",
        True,
        _cfs(lambda s: _seconds(s.cpu.throttled_ns) if s.cpu else None),
    ),
    Series(
        "container_memory_usage_bytes",
        "Current memory usage in bytes, including all memory regardless of when it was accessed",
        False,
        _memory("usage"),
    ),
    Series(
        "container_memory_working_set_bytes",
        "Current working set in bytes.",
        False,
        _memory("working_set"),
    ),
    Series("container_memory_rss", "Size of RSS in bytes.", False, _memory("rss")),
    Series(
        "container_memory_cache", "Number of bytes of page cache memory.", False, _memory("cache")
    ),
    Series(
        "container_memory_mapped_file",
        "Size of memory mapped files in bytes.",
        False,
        _memory("mapped_file"),
    ),
    Series(
        "container_spec_memory_limit_bytes",
        "Memory limit for the container.",
        False,
        lambda row: _one((row.sample.memory.limit or 0) if row.sample.memory else None),
        timestamped=False,
    ),
    Series(
        "container_spec_cpu_shares",
        "CPU share of the container.",
        False,
        lambda row: _one(row.sample.cpu_shares),
        timestamped=False,
    ),
    Series(
        "container_fs_usage_bytes",
        "Number of bytes that are consumed by the container on this filesystem.",
        False,
        _fs,
        ("device",),
    ),
    *(
        Series(f"container_network_{name}", text, True, _net(field), ("interface",))
        for name, text, field in (
            ("receive_bytes_total", "Cumulative count of bytes received", "rx_bytes"),
            ("receive_packets_total", "Cumulative count of packets received", "rx_packets"),
            (
                "receive_errors_total",
                "Cumulative count of errors encountered while receiving",
                "rx_errors",
            ),
            (
                "receive_packets_dropped_total",
                "Cumulative count of packets dropped while receiving",
                "rx_dropped",
            ),
            ("transmit_bytes_total", "Cumulative count of bytes transmitted", "tx_bytes"),
            ("transmit_packets_total", "Cumulative count of packets transmitted", "tx_packets"),
            (
                "transmit_errors_total",
                "Cumulative count of errors encountered while transmitting",
                "tx_errors",
            ),
            (
                "transmit_packets_dropped_total",
                "Cumulative count of packets dropped while transmitting",
                "tx_dropped",
            ),
        )
    ),
    Series(
        "container_last_seen",
        "Last time a container was seen by the exporter",
        False,
        lambda row: _one(row.sample.time),
    ),
)


@dataclass(frozen=True, slots=True)
class Machine:
    labels: tuple[str, ...]  # values of MACHINE_LABELS
    cores: int  # logical
    memory: int | None  # bytes


class CadvisorSource:
    """What ``/metrics/cadvisor`` reads: the cgroups, ``/proc``, the runtime, a clock."""

    def __init__(
        self,
        cgroups: CgroupReader,
        runtime: StatsRuntime | None = None,
        clock: Clock = SYSTEM_CLOCK,
        proc: Path = procfs.PROC,
        host_root: Path = Path("/"),
    ) -> None:
        self.cgroups = cgroups
        self.runtime = runtime
        self.clock = clock
        self.proc = proc
        self.host_root = host_root

    def rows(self, pods: Iterable[PodDict]) -> list[Row]:
        layers = self._layers()
        now = self.clock.time()
        host = tuple(procfs.host_interfaces(self.proc))
        rows = [
            self._row(name, ("", name, "", "", "", ""), now, host if name == "/" else ())
            for name in self._node_cgroups()
        ]
        for pod in podrefs.resolve_all(self.cgroups, pods):
            rows.append(
                self._row(pod.cgroup, ("", pod.cgroup, "", "", pod.namespace, pod.name), now)
            )
            for sandbox in pod.sandboxes:
                interfaces = self._interfaces(sandbox)
                name = sandbox.rsplit("/", 1)[1]
                labels = ("", sandbox, "", name, pod.namespace, pod.name)
                rows.append(self._row(sandbox, labels, now, interfaces=interfaces))
            for c in pod.containers:
                labels = (c.name, c.cgroup, c.image, c.id, pod.namespace, pod.name)
                rows.append(self._row(c.cgroup, labels, now, layer=layers.get(c.id)))
        return [r for r in rows if r is not None]

    def machine(self) -> Machine:
        ids = procfs.machine_ids(self.host_root)
        memory = procfs.meminfo(self.proc).get("MemTotal")
        return Machine(tuple(ids[k] for k in MACHINE_LABELS), os.cpu_count() or 1, memory)

    def _node_cgroups(self) -> list[str]:
        return ["/", *(name for name in podrefs.QOS_PARENTS if self.cgroups.exists(name))]

    def _row(
        self,
        cgroup: str,
        labels: tuple[str, ...],
        now: float,
        interfaces: tuple[procfs.Interface, ...] = (),
        layer: FilesystemUsage | None = None,
    ) -> Row | None:
        sample = self.cgroups.sample(cgroup, now)
        return Row(labels, sample, interfaces, layer) if sample is not None else None

    def _interfaces(self, cgroup: str) -> tuple[procfs.Interface, ...]:
        pids = self.cgroups.pids(cgroup)
        return tuple(procfs.net_dev(self.proc, pids[0])) if pids else ()

    def _layers(self) -> dict[str, FilesystemUsage]:
        if self.runtime is None:
            return {}
        try:
            stats = self.runtime.list_container_stats()
        except CriError as exc:
            log.warning("runtime stats failed error=%s", exc)
            return {}
        return {s.id: s.writable_layer for s in stats if s.writable_layer is not None}


class CadvisorCollector(Collector):
    """The rows read (None: they could not be read) and the machine, as cAdvisor's
    Prometheus collector shows them."""

    def __init__(self, rows: list[Row] | None, machine: Machine) -> None:
        self._rows = rows
        self._machine = machine

    def collect(self) -> Iterator[Metric]:
        rows, error = (self._rows, 0.0) if self._rows is not None else ([], 1.0)
        for series in SERIES:
            family = _family(series)
            for row in rows:
                timestamp = row.sample.time if series.timestamped else None
                for extra, value in series.values(row):
                    family.add_metric([*row.labels, *extra], value, timestamp=timestamp)
            yield family
        yield from _machine(self._machine)
        scrape = GaugeMetricFamily(
            "container_scrape_error",
            "1 if there was an error while getting container metrics, 0 otherwise",
        )
        scrape.add_metric([], error)
        yield scrape


def _family(series: Series) -> CounterMetricFamily | GaugeMetricFamily:
    labels = [*BASE_LABELS, *series.extra]
    if series.counter:
        return CounterMetricFamily(series.name, series.help, labels=labels)
    return GaugeMetricFamily(series.name, series.help, labels=labels)


def _machine(machine: Machine) -> Iterator[Metric]:
    labels, cores, memory = machine.labels, machine.cores, machine.memory
    family = GaugeMetricFamily(
        "machine_cpu_cores", "Number of logical CPU cores.", labels=MACHINE_LABELS
    )
    family.add_metric(labels, float(cores))
    yield family
    if memory is not None:
        family = GaugeMetricFamily(
            "machine_memory_bytes",
            "Amount of memory installed on the machine.",
            labels=MACHINE_LABELS,
        )
        family.add_metric(labels, float(memory))
        yield family


def cadvisor_metrics(rows: list[Row] | None, machine: Machine) -> str:
    """The body of ``/metrics/cadvisor`` (content type ``CONTENT_TYPE``) from what
    ``CadvisorSource`` read: its rows (None: reading them failed) and the machine."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(CadvisorCollector(rows, machine))
    return generate_latest(registry).decode()
