"""Pod start-up latency, as the kubelet's pod startup latency tracker measures it.

A pod is followed from the moment this parent first sees it (``seen``, when it is
admitted) until its status first shows it ``Running``
(``kubelet_pod_start_duration_seconds``, from first seen) and until every container in
it runs (``kubelet_pod_start_sli_duration_seconds``: from its creation, less the time
from its first image pull's start to its last pull's end; and
``kubelet_pod_start_total_duration_seconds``, with the pulls). A pod with no
``creationTimestamp`` (a static pod) was created when it was first seen. The kubelet
stops the clock when the status comes back on its watch of the API; pkletd when the
parent publishes the status its own calls showed, so the API round trip is left out.

A pod that was running before this parent first saw it (a restarted parent adopting
it: its oldest sandbox is older than that) is not a start, and neither is one that
finished first. ``first_with_network`` is ``"true"`` for the first pod of this
parent that is not on the host's network (what the CNI's start-up costs shows in).

``seen``, ``status`` and ``forget`` are called on the loop thread, the pulls on pod
workers' threads.
"""

from __future__ import annotations

import datetime as dt
import threading
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel.podenums import TERMINAL_PHASES, PodPhase
from pkletd.ipc.apimodel.podspec import Pod, PodUID
from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.bus.metricfamily import ALPHA, Histogram
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.supervisor.pods.types import PodRuntime

# The kubelet's podStartupDurationBuckets.
BUCKETS = (0.5, 1, 2, 3, 4, 5, 6, 8, 10, 20, 30, 45, 60, 120, 180, 240, 300, 360, 480, 600,
           900, 1200, 1800, 2700, 3600)  # fmt: skip
SLI_HELP = (
    "Duration in seconds to start a pod, excluding time to pull images and run init "
    "containers, measured from pod creation timestamp to when all its containers are "
    "reported as started and observed via watch"
)
TOTAL_HELP = (
    "Duration in seconds to start a pod since creation, including time to pull images and "
    "run init containers, measured from pod creation timestamp to when all its containers "
    "are reported as started and observed via watch"
)
START_HELP = (
    "Duration in seconds from kubelet seeing a pod for the first time to the pod starting to run"
)


@dataclass
class _Start:
    seen: float  # wall-clock seconds
    created: float
    host_network: bool
    first_pull: float | None = None
    last_pulled: float | None = None
    running_recorded: bool = False

    def pulling_s(self) -> float:
        if self.first_pull is None or self.last_pulled is None:
            return 0.0
        return max(0.0, self.last_pulled - self.first_pull)


class PodStartup:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._starts: dict[PodUID, _Start] = {}
        self._network_pod_seen = False
        self._lock = threading.Lock()
        labels = ("first_with_network",)
        self._start = Histogram("kubelet_pod_start_duration_seconds", ALPHA + START_HELP, BUCKETS)
        self._sli = Histogram(
            "kubelet_pod_start_sli_duration_seconds", ALPHA + SLI_HELP, BUCKETS, labels
        )
        self._total = Histogram(
            "kubelet_pod_start_total_duration_seconds", ALPHA + TOTAL_HELP, BUCKETS, labels
        )

    def seen(self, pod: Pod) -> None:
        now = self._clock.time()
        created = _timestamp(pod.raw.get("metadata", {}).get("creationTimestamp"))
        with self._lock:
            self._starts[pod.uid] = _Start(now, created or now, pod.host_network)

    def pull_started(self, uid: PodUID) -> None:
        with self._lock:
            start = self._starts.get(uid)
            if start is not None and start.first_pull is None:
                start.first_pull = self._clock.time()

    def pull_finished(self, uid: PodUID) -> None:
        with self._lock:
            start = self._starts.get(uid)
            if start is not None:
                start.last_pulled = self._clock.time()

    def status(self, uid: PodUID, api_pod: dict[str, Any], runtime: PodRuntime) -> None:
        """The parent published this status of the pod, from these runtime objects."""
        now = self._clock.time()
        status = api_pod.get("status") or {}
        with self._lock:
            start = self._starts.get(uid)
            if start is None:
                return
            if _adopted(start, runtime) or status.get("phase") in TERMINAL_PHASES:
                del self._starts[uid]
                return
            if status.get("phase") == PodPhase.RUNNING and not start.running_recorded:
                self._start.observe(now - start.seen)
                start.running_recorded = True
            if _all_running(status):
                self._record(start, now)
                del self._starts[uid]

    def _record(self, start: _Start, now: float) -> None:
        first = ""
        if not start.host_network and not self._network_pod_seen:
            first, self._network_pod_seen = "true", True
        total = now - start.created
        self._total.observe(total, first)
        self._sli.observe(total - start.pulling_s(), first)

    def forget(self, uid: PodUID) -> None:
        with self._lock:
            self._starts.pop(uid, None)

    def families(self) -> list[MetricFamily]:
        return [self._start.family(), self._sli.family(), self._total.family()]


def _adopted(start: _Start, runtime: PodRuntime) -> bool:
    created = [s.created_at for s in runtime.sandboxes]
    return bool(created) and min(created) / 1e9 < start.seen


def _all_running(status: dict[str, Any]) -> bool:
    containers = status.get("containerStatuses") or []
    return bool(containers) and all("running" in (c.get("state") or {}) for c in containers)


def _timestamp(text: Any) -> float | None:
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text).timestamp()
    except ValueError:
        return None
