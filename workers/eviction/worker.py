"""The eviction worker's loop: one round every monitoring period, as the kubelet's
eviction manager's ``synchronize``, with the measuring on a thread of its own.

A round: read the signals (``signals``, on the thread), decide (``manager``, on the
loop), report ``SignalsObserved``. With ``localStorageCapacityIsolation``, measure the
pods that have local storage limits (a Summary of those pods, on the thread) and, if
any is over one (``localstorage``), report ``EvictionNeeded`` with ``limits``: the
parent evicts them and the round ends there, as the kubelet's does. Else, if a threshold
is met past its grace period, report ``EvictionThresholdMet`` and either

- ask for node-level reclaim (``ReclaimRequested``, when the threshold's signal is one
  that image and container GC can relieve), wait for the image-gc worker's reclaim
  (``GarbageCollected`` with ``reclaim`` for both its collections, containers and
  images; at most ``RECLAIM_WAIT_S``), read the signals
  again, and stop there if every threshold clears its minimum reclaim; or
- measure what each pod uses (a Summary, on the thread) and report ``EvictionNeeded``:
  the parent evicts one pod. The next round starts once that pod's containers stopped
  (``POD_CLEANUP_S`` at most, the kubelet's podCleanupTimeout), or one monitoring
  period on if the parent evicted none.

Pods come from the parent's snapshot and ``PodStatusUpdated``/``PodForgotten``; the
manager's state from the snapshot's ``eviction``, so a restarted worker goes on where
the last one stopped.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

from pkletd.ipc.apimodel import priority, quantity
from pkletd.ipc.apimodel.fieldcheck import InvalidField
from pkletd.ipc.apimodel.podenums import PodPhase
from pkletd.ipc.bus.messages import (
    EvictionNeeded,
    EvictionThresholdMet,
    GarbageCollected,
    GarbageKind,
    LimitExceeded,
    Message,
    PodForgotten,
    PodStatusUpdated,
    PodUsage,
    ReclaimRequested,
    SignalReading,
    SignalsObserved,
    Snapshot,
    ThresholdReading,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.eviction import localstorage
from pkletd.workers.eviction.manager import Manager, State, Verdict
from pkletd.workers.eviction.podusage import pod_usage
from pkletd.workers.eviction.signals import Reading
from pkletd.workers.eviction.thresholds import COUNTED, Signal, Threshold

log = logging.getLogger(__name__)

RECLAIM_WAIT_S = 120.0  # how long a node-level reclaim may take before the round goes on
POD_CLEANUP_S = 30.0  # the kubelet's podCleanupTimeout
LIVE_STATES = ("running", "ready")  # a container's and a sandbox's, as PLEG keys them
# a reclaim is done once both collections it runs were carried out, as the kubelet runs
# container GC, then image GC, before it measures again
RECLAIMS = frozenset({GarbageKind.CONTAINERS, GarbageKind.IMAGES})
EVICTED = "Evicted"
# signals node-level reclaim (container and image GC) can relieve; on a dedicated image
# filesystem nodefs holds no images or containers (buildSignalToNodeReclaimFuncs)
IMAGEFS_SIGNALS = (Signal.IMAGEFS, Signal.IMAGEFS_INODES)
NODEFS_SIGNALS = (Signal.NODEFS, Signal.NODEFS_INODES)

PodDict = Mapping[str, Any]


class SignalSource(Protocol):
    def read(self) -> Reading: ...


class UsageSource(Protocol):
    """A Summary of the pods (``nodestats.summary.SummaryProvider`` is one)."""

    def raw_summary(
        self, pods: Iterable[PodDict], only_cpu_and_memory: bool = False
    ) -> dict[str, Any]: ...


class Phase(enum.Enum):
    WAITING = "waiting"  # for the next round, due at ``_due``
    READING = "reading"  # the signals are being read
    CHECKING = "checking"  # the pods with local storage limits are being measured
    RECLAIMING = "reclaiming"  # node-level reclaim asked for; ``_due``: give up waiting
    MEASURING = "measuring"  # the pods' usage is being measured
    EVICTING = "evicting"  # the parent was asked to evict; ``_due``: the next round


@dataclass(frozen=True, slots=True)
class Options:
    thresholds: tuple[Threshold, ...]
    transition_s: float  # evictionPressureTransitionPeriod
    monitoring_s: float  # evictionMonitoringPeriod
    local_storage: bool = True  # localStorageCapacityIsolation: enforce the pods' limits


@dataclass(frozen=True, slots=True)
class _Read:
    reading: Reading
    after_reclaim: bool


@dataclass(frozen=True, slots=True)
class _Measured:
    pods: list[PodUsage]


@dataclass(frozen=True, slots=True)
class _Checked:
    exceeded: list[LimitExceeded]


_Result = _Read | _Measured | _Checked
BUSY = (Phase.READING, Phase.CHECKING, Phase.MEASURING)  # the thread's result wakes the loop


def reclaimable(signal: Signal, dedicated_imagefs: bool) -> bool:
    """Whether container and image GC can relieve this signal."""
    if signal in IMAGEFS_SIGNALS:
        return True
    return signal in NODEFS_SIGNALS and not dedicated_imagefs


class EvictionWorker:
    def __init__(
        self,
        bus: Sender,
        signals: SignalSource,
        usage: UsageSource,
        options: Options,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._bus = bus
        self._signals = signals
        self._usage = usage
        self._options = options
        self._clock = clock
        self._manager = Manager(options.thresholds, options.transition_s)
        self._pods: dict[str, PodDict] = {}
        self._objects: dict[str, dict[str, str]] = {}  # a pod's runtime objects, last synced
        self._started = False
        self._phase = Phase.WAITING
        self._due = 0.0
        self._target: tuple[Threshold, Verdict, Reading] | None = None
        self._checking: tuple[Verdict, Reading] | None = None  # the round's, while CHECKING
        self._evicted_before: set[str] = set()
        self._evicting: str = ""  # the pod the parent evicted this round
        self._reclaimed: set[GarbageKind] = set()  # collections done since the reclaim
        self._results: Inbox[_Result | BaseException] = Inbox()
        self._pool = ThreadPoolExecutor(1, thread_name_prefix="measure")

    # --- the Worker protocol ----------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._pods = {p["metadata"]["uid"]: p for p in snapshot.pods}
        if not self._started:  # later snapshots (a gap) carry an older state than ours
            self._started = True
            self._manager.state = State.of_wire(snapshot.eviction)
            self._await_stopping()

    def _await_stopping(self) -> None:
        """A worker (re)started while an evicted pod still stops waits for it, as the
        round that evicted it would have: its memory or disk is not free yet."""
        stopping = [u for u, p in self._pods.items() if _evicted(p) and _running(p)]
        if stopping:
            self._phase, self._evicting = Phase.EVICTING, stopping[0]
            self._due = self._clock.monotonic() + POD_CLEANUP_S

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, PodStatusUpdated):
            uid = message.pod["metadata"]["uid"]
            self._pods[uid] = message.pod
            if message.containers:  # what a sync found (an exit shown first has none)
                self._objects[uid] = message.containers
            self._check_cleanup()
        elif isinstance(message, PodForgotten):
            self._pods.pop(message.uid, None)
            self._objects.pop(message.uid, None)
            if message.uid == self._evicting:
                self._next_round(self._clock.monotonic())
        elif isinstance(message, GarbageCollected) and message.reclaim:
            self._reclaimed.add(message.collection)
            if self._phase is Phase.RECLAIMING and self._reclaimed >= RECLAIMS:
                self._read(after_reclaim=True)

    def fds(self) -> Sequence[int]:
        return (self._results.fileno(),)

    def on_readable(self, fd: int) -> None:
        for result in self._results.take():
            if isinstance(result, BaseException):
                raise RuntimeError(f"measuring failed: {result!r}") from result
            if isinstance(result, _Read):
                self._on_read(result)
            elif isinstance(result, _Checked):
                self._on_checked(result)
            else:
                self._on_measured(result)

    def tick(self, now: float) -> float:
        if self._phase is Phase.EVICTING and now >= self._due:
            self._next_round(now)
        if self._phase is Phase.WAITING and now >= self._due:
            self._read(after_reclaim=False)
        elif self._phase is Phase.RECLAIMING and now >= self._due:
            log.warning("node-level reclaim not reported; measuring again")
            self._read(after_reclaim=True)
        return now + self._options.monitoring_s if self._phase in BUSY else self._due

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._results.close()

    # --- a round ------------------------------------------------------------------------

    def _read(self, after_reclaim: bool) -> None:
        self._phase = Phase.READING
        reading: Future[_Result] = self._pool.submit(
            lambda: _Read(self._signals.read(), after_reclaim)
        )
        reading.add_done_callback(self._deliver)

    def _deliver(self, future: Future[_Result]) -> None:
        if future.cancelled():
            return
        error = future.exception()
        self._results.put(error if error is not None else future.result())

    def _next_round(self, now: float) -> None:
        self._phase, self._due, self._evicting = Phase.WAITING, now, ""

    def _on_read(self, result: _Read) -> None:
        now = self._clock.monotonic()
        if result.after_reclaim:
            self._after_reclaim(result.reading, now)
            return
        verdict = self._manager.synchronize(result.reading.observations, now)
        self._bus.send(observed(result.reading, verdict, self._manager))
        limited = self._limited_pods()
        if limited:
            self._check_limits(limited, verdict, result.reading)
        else:
            self._act(verdict, result.reading, now)

    def _limited_pods(self) -> list[PodDict]:
        """The active pods with local storage limits to enforce. A critical pod is never
        evicted, so it is not measured: over its limits, it does not take the round from
        the thresholds (the parent checks again)."""
        if not self._options.local_storage:
            return []
        return [
            pod
            for pod in self._pods.values()
            if _active(pod) and not _critical(pod) and localstorage.enforced(pod.get("spec") or {})
        ]

    def _check_limits(self, pods: list[PodDict], verdict: Verdict, reading: Reading) -> None:
        specs = {p["metadata"]["uid"]: p.get("spec") or {} for p in pods}
        dedicated = reading.dedicated_imagefs

        def job() -> _Checked:
            summary = self._usage.raw_summary(pods)
            return _Checked(localstorage.over_limits(summary["pods"], specs, dedicated))

        self._phase, self._checking = Phase.CHECKING, (verdict, reading)
        checking: Future[_Result] = self._pool.submit(job)
        checking.add_done_callback(self._deliver)

    def _on_checked(self, result: _Checked) -> None:
        assert self._checking is not None
        verdict, reading = self._checking
        self._checking = None
        if not result.exceeded:
            self._act(verdict, reading, self._clock.monotonic())
            return
        for exceeded in result.exceeded:
            log.warning(
                "pod over its local storage limit uid=%s signal=%s message=%r",
                exceeded["uid"],
                exceeded["signal"],
                exceeded["message"],
            )
        self._bus.send(EvictionNeeded.over_limits(result.exceeded))
        self._await_eviction()

    def _act(self, verdict: Verdict, reading: Reading, now: float) -> None:
        """The round's threshold to reclaim, if any: node-level reclaim or eviction."""
        target = verdict.to_reclaim
        if target is None:
            self._wait(now)
            return
        reclaim = reclaimable(target.signal, reading.dedicated_imagefs)
        log.warning(
            "eviction threshold met signal=%s resource=%s hard=%s reclaim=%s",
            target.signal,
            target.resource,
            target.hard,
            reclaim,
        )
        self._bus.send(EvictionThresholdMet(target.signal, target.resource, reclaim))
        self._target = (target, verdict, reading)
        if reclaim:
            self._reclaimed = set()
            self._bus.send(ReclaimRequested(f"eviction: {target.signal}"))
            self._phase, self._due = Phase.RECLAIMING, now + RECLAIM_WAIT_S
        else:
            self._measure()

    def _after_reclaim(self, reading: Reading, now: float) -> None:
        if self._target is not None and not self._manager.relieved(reading.observations):
            target, verdict, _ = self._target
            self._target = (target, verdict, reading)
            self._measure()
            return
        log.info("node-level reclaim relieved the pressure; no pod evicted")
        self._wait(now)

    def _measure(self) -> None:
        assert self._target is not None
        target, _, reading = self._target
        pods = list(self._pods.values())
        specs = {p["metadata"]["uid"]: p.get("spec", {}) for p in pods}
        memory = target.resource == "memory"
        dedicated = reading.dedicated_imagefs

        def job() -> _Measured:
            summary = self._usage.raw_summary(pods, only_cpu_and_memory=memory)
            return _Measured(pod_usage(summary["pods"], specs, target.signal, dedicated))

        self._phase = Phase.MEASURING
        measuring: Future[_Result] = self._pool.submit(job)
        measuring.add_done_callback(self._deliver)

    def _on_measured(self, result: _Measured) -> None:
        assert self._target is not None
        target, verdict, reading = self._target
        threshold, available = message_figures(target, verdict.due, reading)
        log.warning("pods must be evicted resource=%s pods=%d", target.resource, len(result.pods))
        self._bus.send(
            EvictionNeeded(
                target.signal,
                target.resource,
                target.hard,
                threshold,
                available,
                result.pods,
            )
        )
        self._target = None
        self._await_eviction()

    def _await_eviction(self) -> None:
        """The parent was asked to evict: the next round waits for the evicted pod."""
        self._evicted_before = {uid for uid, pod in self._pods.items() if _evicted(pod)}
        self._phase = Phase.EVICTING
        self._due = self._clock.monotonic() + self._options.monitoring_s

    def _check_cleanup(self) -> None:
        """Once the parent evicted a pod, the next round waits for its containers."""
        if self._phase is not Phase.EVICTING:
            return
        if not self._evicting:
            fresh = [u for u, p in self._pods.items() if _evicted(p)]
            fresh = [u for u in fresh if u not in self._evicted_before]
            if not fresh:
                return
            self._evicting = fresh[0]
            self._due = self._clock.monotonic() + POD_CLEANUP_S
        if self._cleaned_up(self._evicting):
            self._next_round(self._clock.monotonic())

    def _cleaned_up(self, uid: str) -> bool:
        """The kubelet's ``podResourcesAreReclaimed``: no container running, and the sync
        that stopped them has also stopped its sandbox and torn its volumes down (its
        runtime objects show nothing running or ready; an exit the parent showed before
        that sync does not count)."""
        pod = self._pods.get(uid)
        if pod is None:
            return True
        objects = self._objects.get(uid, {"?": "running"})
        return not _running(pod) and not any(s in LIVE_STATES for s in objects.values())

    def _wait(self, now: float) -> None:
        self._target = None
        self._phase, self._due = Phase.WAITING, now + self._options.monitoring_s


def _evicted(pod: PodDict) -> bool:
    status = pod.get("status") or {}
    return bool(status.get("phase") == PodPhase.FAILED and status.get("reason") == EVICTED)


def _active(pod: PodDict) -> bool:
    """Neither finished nor being deleted (the kubelet's active pods)."""
    phase = (pod.get("status") or {}).get("phase")
    deleted = (pod.get("metadata") or {}).get("deletionTimestamp")
    return phase not in ("Succeeded", "Failed") and not deleted


def _critical(pod: PodDict) -> bool:
    try:
        rank = priority.pod_priority(pod.get("spec") or {})
    except InvalidField:
        rank = 0
    return priority.critical((pod.get("metadata") or {}).get("annotations") or {}, rank)


def _running(pod: PodDict) -> bool:
    status = pod.get("status") or {}
    every = (status.get("initContainerStatuses") or []) + (status.get("containerStatuses") or [])
    return any("running" in (c.get("state") or {}) for c in every)


def observed(reading: Reading, verdict: Verdict, manager: Manager) -> SignalsObserved:
    """The round's ``SignalsObserved``."""
    observations = reading.observations
    signals = [
        SignalReading(signal=str(s), available=o.available, capacity=o.capacity)
        for s, o in observations.items()
    ]
    thresholds = []
    for t in manager.thresholds:
        seen = observations.get(t.signal)
        thresholds.append(
            ThresholdReading(
                signal=str(t.signal),
                value=t.value.text,
                grace_s=t.grace_s,
                quantity=t.quantity(seen.capacity) if seen is not None else 0,
                met=t in verdict.met,
            )
        )
    return SignalsObserved(signals, thresholds, list(verdict.conditions), manager.state.wire())


def message_figures(
    target: Threshold, due: Sequence[Threshold], reading: Reading
) -> tuple[str, str]:
    """The threshold quantity and what was available, as the kubelet's eviction message
    prints them (``getThresholdMetInfo``: the first due threshold of the resource)."""
    for threshold in (t for t in due if t.resource == target.resource):
        seen = reading.observations.get(threshold.signal)
        if seen is not None:
            form = quantity.Format.DECIMAL_SI if target.resource in COUNTED else None
            available = quantity.canonical(seen.available, form or quantity.Format.BINARY_SI)
            return threshold.value.shown(seen.capacity), available
    return "", ""
