"""pkletd: prober -- runs every probe of every container and reports the results.

One schedule entry per (pod, container, probe type), started when the parent
reports the container running and dropped when the container id changes or the
pod goes. Probes run on thread pools so a slow one (an exec that takes its whole
timeout) never delays the others: exec probes on one pool, network probes
(httpGet, tcpSocket, grpc) on another, so an HTTP probe keeps its period when the
runtime is slow to exec (the kubelet gives every probe a goroutine of its own).
Results come back through an eventfd.

Counting is the kubelet's: ``successes``/``failures`` are consecutive runs, and
the reported ``result`` flips only at ``successThreshold``/``failureThreshold``.
Initial results: readiness failure (not ready until it passes), liveness success,
startup unknown. A startup probe gates liveness and readiness: they do not run
until it has succeeded. After a liveness or startup failure the probe holds until
the container is replaced. A restarted prober takes results and counters from the
parent's snapshot and resumes, with a random first delay within one period so a
node's probes do not all fire at once.

A ``ProbeResult`` goes to the parent when a run changes what it acts on or keeps: the
result, or the consecutive counts up to their thresholds (beyond, they change
nothing), and at least every ``RESEND_S`` otherwise (the parent drops a result older
than 10 s: one held up so long is refreshed). The kubelet's results manager also
signals only a changed result. The schedules wait in a heap by due time, so a turn of
the loop costs what is due, not a scan of every probe, and a turn launches with them
the runs due within ``BATCH_S`` (5 ms, the lateness histogram's first bucket): with 220
probes a second, one wake-up for each run was most of the loop's cost.

``ProbeMetrics`` carries ``prober_probe_total`` (the kubelet's counter, by
probe_type and result) and ``pkletd_prober_lateness_seconds`` (how late each run
started against its schedule), sent at most once a second.
"""

from __future__ import annotations

import bisect
import heapq
import itertools
import logging
import random
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pkletd.ipc.apimodel.podspec import InvalidPod, PodUID, parse_pod
from pkletd.ipc.apimodel.probespec import Probe, ProbeType
from pkletd.ipc.bus.messages import (
    Message,
    PodForgotten,
    PodStatusUpdated,
    ProbeMetrics,
    ProbeResult,
    ProbeVerdict,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.runtime import handlers
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

SUCCESS, FAILURE, UNKNOWN = ProbeVerdict.SUCCESS, ProbeVerdict.FAILURE, ProbeVerdict.UNKNOWN
INITIAL = {ProbeType.READINESS: FAILURE, ProbeType.LIVENESS: SUCCESS, ProbeType.STARTUP: UNKNOWN}
METRIC_RESULT = {SUCCESS: "successful", FAILURE: "failed", UNKNOWN: "unknown"}
LATENESS_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
METRICS_EVERY_S = 1.0
RESEND_S = 5.0  # an unchanged result goes to the parent again after this long
BATCH_S = 0.005  # runs due this soon go with those due now
IDLE_WAKE_S = 60.0
THREADS = 16  # per pool

Key = tuple[PodUID, str, ProbeType]  # pod uid, container name, probe type
Done = tuple[Key, str, handlers.Outcome, float]  # key, container id, outcome, lateness
Reported = tuple[ProbeVerdict, int, int]  # result, successes, failures (up to thresholds)


@dataclass
class Schedule:
    """One probe of one container instance."""

    key: Key
    probe: Probe
    target: handlers.Target
    pod: tuple[str, str]  # namespace, name
    due: float
    successes: int = 0
    failures: int = 0
    result: ProbeVerdict = UNKNOWN
    running: bool = False
    on_hold: bool = False
    reported: Reported | None = None  # what the parent last heard...
    reported_at: float = 0.0  # ...and when
    labels: dict[ProbeVerdict, tuple[str, ...]] = field(default_factory=dict)  # metric

    def record(self, ok: bool) -> None:
        if ok:
            self.successes, self.failures = self.successes + 1, 0
            if self.successes >= self.probe.success_threshold:
                self.result = SUCCESS
        else:
            self.successes, self.failures = 0, self.failures + 1
            if self.failures >= self.probe.failure_threshold:
                self.result = FAILURE
                self.on_hold = self.probe.type is not ProbeType.READINESS

    def report(self, now: float) -> bool:
        """The parent should hear this state now (see the module doc); noted if so."""
        probe = self.probe
        state = (
            self.result,
            min(self.successes, probe.success_threshold),
            min(self.failures, probe.failure_threshold),
        )
        if state == self.reported and now - self.reported_at < RESEND_S:
            return False
        self.reported, self.reported_at = state, now
        return True


@dataclass
class Metrics:
    totals: dict[tuple[str, ...], int] = field(default_factory=dict)
    lateness: list[int] = field(default_factory=lambda: [0] * (len(LATENESS_BUCKETS) + 1))
    lateness_sum: float = 0.0
    changed: bool = False

    def count(self, schedule: Schedule, result: ProbeVerdict, late: float) -> None:
        labels = schedule.labels.get(result)
        if labels is None:
            namespace, pod = schedule.pod
            uid, container, kind = schedule.key
            labels = schedule.labels[result] = (
                kind.capitalize(), METRIC_RESULT[result], container, pod, namespace, uid
            )  # fmt: skip
        self.totals[labels] = self.totals.get(labels, 0) + 1
        self.lateness[bisect.bisect_left(LATENESS_BUCKETS, late)] += 1
        self.lateness_sum += late
        self.changed = True

    def forget(self, uid: str) -> None:
        self.totals = {k: v for k, v in self.totals.items() if k[5] != uid}
        self.changed = True

    def samples(self) -> list[dict[str, Any]]:
        names = ("probe_type", "result", "container", "pod", "namespace", "pod_uid")
        out = [
            {"name": "prober_probe_total", "labels": dict(zip(names, k, strict=True)), "value": v}
            for k, v in sorted(self.totals.items())
        ]
        cumulative = 0
        for bound, n in zip((*map(str, LATENESS_BUCKETS), "+Inf"), self.lateness, strict=True):
            cumulative += n
            out.append(
                {
                    "name": "pkletd_prober_lateness_seconds_bucket",
                    "labels": {"le": bound},
                    "value": cumulative,
                }
            )
        out.append(
            {"name": "pkletd_prober_lateness_seconds_sum", "labels": {}, "value": self.lateness_sum}
        )
        out.append(
            {"name": "pkletd_prober_lateness_seconds_count", "labels": {}, "value": cumulative}
        )
        return out

    def restore(self, samples: list[dict[str, Any]]) -> None:
        names = ("probe_type", "result", "container", "pod", "namespace", "pod_uid")
        for s in samples:
            if s.get("name") == "prober_probe_total":
                self.totals[tuple(s["labels"][n] for n in names)] = int(s["value"])


class Prober:
    def __init__(self, runtime: CriRuntime, bus: Sender) -> None:
        self._runtime = runtime
        self._bus = bus
        self._schedules: dict[Key, Schedule] = {}
        self._saved: dict[Key, dict[str, Any]] = {}  # results from the parent's snapshot
        self._metrics = Metrics()
        self._next_metrics = 0.0
        self._pools = {
            kind: ThreadPoolExecutor(THREADS, thread_name_prefix=f"probe-{kind}")
            for kind in ("exec", "network")
        }
        self._done: Inbox[Done] = Inbox()
        self._timers: list[tuple[float, int, Schedule]] = []  # (due, order, schedule) heap
        self._order = itertools.count()

    # --- what the parent tells us ---------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._saved = {_key(r): r for r in snapshot.probes}
        if not self._metrics.totals:
            self._metrics.restore(snapshot.probe_metrics)
        live = set()
        for pod in snapshot.pods:
            live |= self._track(pod, resumed=True)
        for key in set(self._schedules) - live:
            del self._schedules[key]

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, PodStatusUpdated):
            uid = message.pod["metadata"]["uid"]
            live = self._track(message.pod, resumed=False)
            for key in [k for k in self._schedules if k[0] == uid and k not in live]:
                del self._schedules[key]
        elif isinstance(message, PodForgotten):
            for key in [k for k in self._schedules if k[0] == message.uid]:
                del self._schedules[key]
            self._metrics.forget(message.uid)

    def _track(self, pod: dict[str, Any], resumed: bool) -> set[Key]:
        """Schedule the probes of the pod's running containers; the keys still wanted."""
        try:
            spec = parse_pod(pod)
        except InvalidPod as exc:
            log.error("pod not probed uid=%s reason=%s", pod.get("metadata", {}).get("uid"), exc)
            return set()
        status = pod.get("status", {})
        pod_ip = "127.0.0.1" if spec.host_network else status.get("podIP", "")
        running = {
            s["name"]: s
            for s in status.get("containerStatuses", [])
            if "running" in s.get("state", {}) and s.get("containerID")
        }
        live: set[Key] = set()
        for container in spec.containers:
            state = running.get(container.name)
            if state is None or not pod_ip:
                continue
            container_id = state["containerID"].split("://")[-1]
            for probe in container.probes:
                key = (spec.uid, container.name, probe.type)
                live.add(key)
                current = self._schedules.get(key)
                if current is None or current.target.container_id != container_id:
                    target = handlers.Target(container, container_id, pod_ip)
                    schedule = self._new(key, probe, target, (spec.namespace, spec.name), resumed)
                    self._schedules[key] = schedule
                    self._arm(schedule)
        return live

    def _new(
        self, key: Key, probe: Probe, target: handlers.Target, pod: tuple[str, str], resumed: bool
    ) -> Schedule:
        now = time.monotonic()
        saved = self._saved.pop(key, None)
        if saved is not None and saved["container_id"] == target.container_id:
            schedule = Schedule(key, probe, target, pod, now + random.random() * probe.period_s)
            schedule.result = saved["result"]
            schedule.successes, schedule.failures = saved["successes"], saved["failures"]
            schedule.on_hold = schedule.result is FAILURE and probe.type is not ProbeType.READINESS
            return schedule
        first = now + probe.initial_delay_s
        if resumed:
            first += random.random() * probe.period_s
        return Schedule(key, probe, target, pod, first, result=INITIAL[probe.type])

    # --- running probes -------------------------------------------------------------

    def fds(self) -> Sequence[int]:
        return (self._done.fileno(),)

    def on_readable(self, fd: int) -> None:
        for key, container_id, outcome, late in self._done.take():
            self._finish(key, container_id, outcome, late)

    def _arm(self, schedule: Schedule) -> None:
        heapq.heappush(self._timers, (schedule.due, next(self._order), schedule))

    def tick(self, now: float) -> float:
        timers = self._timers
        while timers and timers[0][0] <= now + BATCH_S:
            due, _, schedule = heapq.heappop(timers)
            if (
                self._schedules.get(schedule.key) is not schedule  # dropped or replaced
                or schedule.running  # armed again when it ends
                or schedule.on_hold
                or due != schedule.due
            ):
                continue
            if self._gated(schedule):
                schedule.due = now + schedule.probe.period_s
                self._arm(schedule)
            else:
                self._launch(schedule, now)
        next_due = timers[0][0] if timers else now + IDLE_WAKE_S
        if now >= self._next_metrics and self._metrics.changed:
            self._metrics.changed = False
            self._bus.send(ProbeMetrics(self._metrics.samples()))
            self._next_metrics = now + METRICS_EVERY_S
        return min(next_due, self._next_metrics) if self._metrics.changed else next_due

    def _gated(self, schedule: Schedule) -> bool:
        """Liveness and readiness wait for the container's startup probe to succeed."""
        if schedule.probe.type is ProbeType.STARTUP:
            return False
        uid, name, _ = schedule.key
        startup = self._schedules.get((uid, name, ProbeType.STARTUP))
        return startup is not None and startup.result is not SUCCESS

    def _launch(self, schedule: Schedule, now: float) -> None:
        late = max(0.0, now - schedule.due)  # a batched run may go up to BATCH_S early
        schedule.running = True
        schedule.due += schedule.probe.period_s * max(1, int(late // schedule.probe.period_s) + 1)
        key, container_id = schedule.key, schedule.target.container_id
        probe, target = schedule.probe, schedule.target

        def work() -> None:
            try:
                outcome = handlers.run(probe, target, self._runtime)
            except Exception as exc:  # a probe must never take the prober down
                outcome = handlers.Outcome(False, f"probe error: {exc}")
            self._done.put((key, container_id, outcome, late))

        self._pools["exec" if probe.handler == "exec" else "network"].submit(work)

    def _finish(self, key: Key, container_id: str, outcome: handlers.Outcome, late: float) -> None:
        schedule = self._schedules.get(key)
        if schedule is None or schedule.target.container_id != container_id:
            return  # the container went away while the probe ran
        schedule.running = False
        schedule.record(outcome.ok)
        self._metrics.count(schedule, SUCCESS if outcome.ok else FAILURE, late)
        if not schedule.on_hold:
            self._arm(schedule)
        if not schedule.report(time.monotonic()):
            return
        uid, name, kind = key
        self._bus.send(
            ProbeResult(
                uid,
                name,
                container_id,
                kind,
                schedule.result,
                schedule.successes,
                schedule.failures,
                outcome.output[:1024],
            )
        )

    def close(self) -> None:
        for pool in self._pools.values():
            pool.shutdown(wait=False, cancel_futures=True)
        self._runtime.close()


def _key(result: dict[str, Any]) -> Key:
    return (result["pod_uid"], result["container"], result["probe"])


def main(settings: WorkerSettings, endpoint: str, timeout: float) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    return serve(settings, bus, Prober(CriRuntime(endpoint, timeout), bus))
