"""The kubelet's pod metrics, as the pod logic records them.

How long each pod sync took, by the kubelet's sync type
(``kubelet_pod_worker_duration_seconds``); the sandboxes and containers the syncs
started, and the starts that failed (``kubelet_started_*``, the error's ``code`` a
waiting reason); the pods' start-up latency (``podstartup``); and, read from the book
when asked, what the runtime has (``kubelet_running_pods``: pods with a ready sandbox,
``kubelet_running_containers`` by state). Syncs run on pod workers' threads, so every
count takes a lock (``ipc.bus.metricfamily``).
"""

from __future__ import annotations

import enum

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.bus.metricfamily import ALPHA, Counter, Histogram, Labels, family
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.runtime.cri import ContainerState, SandboxState
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.podstartup import PodStartup


class SyncType(enum.StrEnum):
    """Why a pod is synced, as the kubelet's SyncPodType labels it: the first sync of a pod
    new to this parent, a change from its source, anything else (PLEG, probes, requeues)."""

    CREATE = "create"
    UPDATE = "update"
    SYNC = "sync"


class ContainerType(enum.StrEnum):
    CONTAINER = "container"
    INIT_CONTAINER = "init_container"
    EPHEMERAL_CONTAINER = "ephemeral_container"

    @classmethod
    def of(cls, pod: Pod, container: Container) -> ContainerType:
        if container in pod.init_containers:
            return cls.INIT_CONTAINER
        if container in pod.ephemeral_containers:
            return cls.EPHEMERAL_CONTAINER
        return cls.CONTAINER


class PodMetrics:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.startup = PodStartup(clock)
        self.sync_duration = Histogram(
            "kubelet_pod_worker_duration_seconds",
            ALPHA + "Duration in seconds to sync a single pod. "
            "Broken down by operation type: create, update, or sync",
            labels=("operation_type",),
        )
        self.started_pods = Counter(
            "kubelet_started_pods_total", ALPHA + "Cumulative number of pods started"
        )
        self.started_pods_errors = Counter(
            "kubelet_started_pods_errors_total",
            ALPHA + "Cumulative number of errors when starting pods",
        )
        self.started_containers = Counter(
            "kubelet_started_containers_total",
            ALPHA + "Cumulative number of containers started",
            ("container_type",),
        )
        self.started_containers_errors = Counter(
            "kubelet_started_containers_errors_total",
            ALPHA + "Cumulative number of errors when starting containers",
            ("container_type", "code"),
        )

    def families(self, book: Pods) -> list[MetricFamily]:
        counters = (
            self.sync_duration,
            self.started_pods,
            self.started_pods_errors,
            self.started_containers,
            self.started_containers_errors,
        )
        return [*self.startup.families(), *(c.family() for c in counters), *_running(book)]


def _running(book: Pods) -> list[MetricFamily]:
    runtimes = [e.runtime for e in book.entries.values() if e.runtime is not None]
    pods = sum(any(s.state is SandboxState.READY for s in r.sandboxes) for r in runtimes)
    states: dict[Labels, float] = {(state.value,): 0.0 for state in ContainerState}
    for runtime in runtimes:
        for container in runtime.containers:
            states[(container.state.value,)] += 1
    return [
        family(
            "kubelet_running_pods",
            ALPHA + "Number of pods that have a running pod sandbox",
            "gauge",
            (),
            {(): float(pods)},
        ),
        family(
            "kubelet_running_containers",
            ALPHA + "Number of containers currently running",
            "gauge",
            ("container_state",),
            states,
        ),
    ]
