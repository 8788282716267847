"""The eviction worker's rounds with fakes for the bus, the signals and the Summary: what it
reports, when it asks for node-level reclaim, when it asks the parent to evict, and how
it waits for the evicted pod; and what each pod's usage is for each signal."""

from __future__ import annotations

import select
from collections.abc import Iterable
from typing import Any

import pytest
from pkletd.ipc.bus.messages import (
    EvictionNeeded,
    EvictionThresholdMet,
    GarbageCollected,
    GarbageKind,
    PodForgotten,
    PodStatusUpdated,
    ReclaimRequested,
    SignalsObserved,
    Snapshot,
)
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.clock import FakeClock
from pkletd.workers.eviction.podusage import local_volume_names, pod_usage
from pkletd.workers.eviction.signals import Reading
from pkletd.workers.eviction.thresholds import Amount, Observation, Signal, Threshold
from pkletd.workers.eviction.worker import EvictionWorker, Options, Phase

GI = 2**30
MEMORY = Threshold(Signal.MEMORY, Amount("1Gi"))
NODEFS = Threshold(Signal.NODEFS, Amount("10%"))


class Signals:
    def __init__(self, *readings: Reading) -> None:
        self.readings = list(readings)

    def read(self) -> Reading:
        return self.readings.pop(0) if len(self.readings) > 1 else self.readings[0]


class Usage:
    def __init__(self, pods: list[dict[str, Any]]) -> None:
        self.pods = pods
        self.asked: list[bool] = []

    def raw_summary(self, pods: Iterable[Any], only_cpu_and_memory: bool = False) -> dict[str, Any]:
        self.asked.append(only_cpu_and_memory)
        return {"node": {}, "pods": self.pods}


STOPPED = {"sandbox:s1": "notready", "c1": "exited"}  # what the killing sync found


def reading(signal: Signal, available: int, capacity: int, dedicated: bool = False) -> Reading:
    return Reading({signal: Observation(available, capacity, 0.0)}, dedicated)


def api_pod(uid: str, phase: str = "Running", reason: str = "", running: bool = True) -> Any:
    state = {"running": {}} if running else {"terminated": {"exitCode": 137}}
    status: dict[str, Any] = {"phase": phase, "containerStatuses": [{"name": "c", "state": state}]}
    if reason:
        status["reason"] = reason
    return {"metadata": {"uid": uid, "name": uid}, "spec": {"containers": []}, "status": status}


def summary_pod(uid: str, working_set: int) -> dict[str, Any]:
    return {
        "podRef": {"uid": uid, "name": uid, "namespace": "default"},
        "memory": {"workingSetBytes": working_set},
        "containers": [{"name": "c", "memory": {"workingSetBytes": working_set}}],
    }


def started(
    signals: Signals, usage: Usage, *thresholds: Threshold
) -> tuple[EvictionWorker, FakeSender, FakeClock]:
    bus, clock = FakeSender(), FakeClock(mono=1000.0)
    worker = EvictionWorker(bus, signals, usage, Options(thresholds, 300.0, 10.0), clock)
    worker.on_snapshot(Snapshot(0, [api_pod("a"), api_pod("b")], {}))
    return worker, bus, clock


def settle(worker: EvictionWorker, clock: FakeClock) -> None:
    """Run the worker's loop until its thread has nothing under way."""
    for _ in range(10):
        worker.tick(clock.mono)
        if worker._phase not in (Phase.READING, Phase.MEASURING):
            return
        ready, _, _ = select.select(list(worker.fds()), [], [], 5.0)
        assert ready, "the worker's thread never answered"
        worker.on_readable(ready[0])
    raise AssertionError("the worker did not settle")


@pytest.fixture
def closing() -> Any:
    workers: list[EvictionWorker] = []
    yield workers.append
    for worker in workers:
        worker.close()


def test_a_quiet_round_reports_the_signals_only(closing: Any) -> None:
    worker, bus, clock = started(Signals(reading(Signal.MEMORY, 4 * GI, 8 * GI)), Usage([]), MEMORY)
    closing(worker)
    settle(worker, clock)
    assert bus.kinds() == ["SignalsObserved"]
    observed = bus.sent[0]
    assert isinstance(observed, SignalsObserved)
    assert observed.signals == [
        {"signal": "memory.available", "available": 4 * GI, "capacity": 8 * GI}
    ]
    assert observed.thresholds == [
        {"signal": "memory.available", "value": "1Gi", "grace_s": 0.0, "quantity": GI, "met": False}
    ]
    assert observed.conditions == []
    assert worker.tick(clock.mono) == clock.mono + 10.0  # the next round, a period on


def test_memory_pressure_asks_the_parent_to_evict(closing: Any) -> None:
    usage = Usage([summary_pod("a", 100 * 2**20), summary_pod("b", 700 * 2**20)])
    worker, bus, clock = started(Signals(reading(Signal.MEMORY, GI // 2, 8 * GI)), usage, MEMORY)
    closing(worker)
    settle(worker, clock)
    assert bus.kinds() == ["SignalsObserved", "EvictionThresholdMet", "EvictionNeeded"]
    assert bus.sent[1] == EvictionThresholdMet("memory.available", "memory", reclaim=False)
    needed = bus.sent[2]
    assert isinstance(needed, EvictionNeeded)
    assert (needed.hard, needed.threshold, needed.available) == (True, "1Gi", "512Mi")
    assert needed.pods[1] == {"uid": "b", "usage": 700 * 2**20, "containers": {"c": 700 * 2**20}}
    assert usage.asked == [True]  # memory needs no disk usage
    # the parent evicts b: the next round waits for its containers to stop
    worker.on_broadcast(PodStatusUpdated(api_pod("b", "Failed", "Evicted")))
    assert worker.tick(clock.mono) == clock.mono + 30.0
    # its exit shown first, before the sync that stops its sandbox and frees its volumes
    worker.on_broadcast(PodStatusUpdated(api_pod("b", "Failed", "Evicted", running=False)))
    worker.tick(clock.mono)
    assert worker._phase is Phase.EVICTING
    worker.on_broadcast(PodStatusUpdated(api_pod("b", "Failed", "Evicted", running=False), STOPPED))
    worker.tick(clock.mono)
    assert worker._phase is Phase.READING  # at once, as the kubelet after a cleanup


def test_no_eviction_seen_means_the_next_round_a_period_on(closing: Any) -> None:
    worker, bus, clock = started(
        Signals(reading(Signal.MEMORY, GI // 2, 8 * GI)), Usage([]), MEMORY
    )
    closing(worker)
    settle(worker, clock)
    assert worker.tick(clock.mono) == clock.mono + 10.0
    clock.mono += 10.0
    settle(worker, clock)
    assert bus.kinds().count("EvictionNeeded") == 2


def test_disk_pressure_on_one_filesystem_reclaims_first(closing: Any) -> None:
    low = reading(Signal.NODEFS, 5, 100)
    after = reading(Signal.NODEFS, 50, 100)
    worker, bus, clock = started(Signals(low, after), Usage([]), NODEFS)
    closing(worker)
    settle(worker, clock)
    assert bus.kinds() == ["SignalsObserved", "EvictionThresholdMet", "ReclaimRequested"]
    assert bus.sent[1] == EvictionThresholdMet("nodefs.available", "ephemeral-storage", True)
    assert bus.sent[2] == ReclaimRequested("eviction: nodefs.available")
    worker.on_broadcast(collected(reclaim=False))  # a periodic collection: not ours
    worker.on_broadcast(collected(reclaim=True, kind=GarbageKind.CONTAINERS))
    assert worker._phase is Phase.RECLAIMING  # image GC has not run yet
    worker.on_broadcast(collected(reclaim=True))
    settle(worker, clock)
    assert "EvictionNeeded" not in bus.kinds()  # the reclaim was enough
    assert worker.tick(clock.mono) == clock.mono + 10.0


def test_reclaim_that_is_not_enough_leads_to_an_eviction(closing: Any) -> None:
    low = reading(Signal.IMAGEFS, 5, 100, dedicated=True)
    threshold = Threshold(Signal.IMAGEFS, Amount("15%"))
    usage = Usage([])
    worker, bus, clock = started(Signals(low), usage, threshold)
    closing(worker)
    settle(worker, clock)
    worker.on_broadcast(collected(reclaim=True))
    worker.on_broadcast(collected(reclaim=True, kind=GarbageKind.CONTAINERS))
    settle(worker, clock)
    assert bus.kinds()[-2:] == ["ReclaimRequested", "EvictionNeeded"]
    assert usage.asked == [False]  # disk needs the whole Summary


def test_nodefs_on_its_own_filesystem_has_nothing_to_reclaim(closing: Any) -> None:
    low = reading(Signal.NODEFS, 5, 100, dedicated=True)
    worker, bus, clock = started(Signals(low), Usage([]), NODEFS)
    closing(worker)
    settle(worker, clock)
    assert bus.kinds() == ["SignalsObserved", "EvictionThresholdMet", "EvictionNeeded"]
    needed = bus.sent[2]
    assert isinstance(needed, EvictionNeeded) and needed.threshold == "10"


def test_a_reclaim_never_reported_is_given_up(closing: Any) -> None:
    worker, bus, clock = started(Signals(reading(Signal.NODEFS, 5, 100)), Usage([]), NODEFS)
    closing(worker)
    settle(worker, clock)
    clock.mono += 120.0
    settle(worker, clock)
    assert bus.kinds()[-1] == "EvictionNeeded"


def test_an_evicted_pod_forgotten_starts_the_next_round(closing: Any) -> None:
    worker, _, clock = started(Signals(reading(Signal.MEMORY, GI // 2, 8 * GI)), Usage([]), MEMORY)
    closing(worker)
    settle(worker, clock)
    worker.on_broadcast(PodStatusUpdated(api_pod("a", "Failed", "Evicted")))
    worker.on_broadcast(PodForgotten("a"))
    worker.tick(clock.mono)
    assert worker._phase is Phase.READING


def test_a_restarted_worker_waits_for_a_pod_still_being_evicted(closing: Any) -> None:
    bus, clock = FakeSender(), FakeClock(mono=1000.0)
    signals = Signals(reading(Signal.MEMORY, GI // 2, 8 * GI))
    worker = EvictionWorker(bus, signals, Usage([]), Options((MEMORY,), 300.0, 10.0), clock)
    closing(worker)
    stopping = api_pod("a", "Failed", "Evicted")
    worker.on_snapshot(Snapshot(0, [stopping, api_pod("b")], {}))
    assert worker.tick(clock.mono) == clock.mono + 30.0  # no round until a has stopped
    assert bus.sent == []
    worker.on_broadcast(PodStatusUpdated(api_pod("a", "Failed", "Evicted", running=False), STOPPED))
    settle(worker, clock)
    assert bus.kinds()[0] == "SignalsObserved"


def collected(reclaim: bool, kind: GarbageKind = GarbageKind.IMAGES) -> GarbageCollected:
    return GarbageCollected(kind, reclaim, 0, 0, 0, 1, 100, "")


# --- what each pod uses ------------------------------------------------------------------


def disk_pod(uid: str) -> dict[str, Any]:
    def fs(used: int, inodes: int) -> dict[str, int]:
        return {"usedBytes": used, "inodesUsed": inodes}

    return {
        "podRef": {"uid": uid},
        "containers": [
            {"name": "c", "rootfs": fs(100, 1), "logs": fs(10, 2)},
            {"name": "d", "rootfs": fs(200, 3)},  # no logs measured: not in the message
        ],
        "volume": [
            {"name": "scratch", **fs(1000, 4)},
            {"name": "secret", **fs(5000, 5)},  # tmpfs: not local storage
        ],
        "process_stats": {"process_count": 7},
    }


SPEC = {
    "volumes": [
        {"name": "scratch", "emptyDir": {}},
        {"name": "shm", "emptyDir": {"medium": "Memory"}},
        {"name": "secret", "secret": {"secretName": "s"}},
        {"name": "cm", "configMap": {"name": "c"}},
        {"name": "host", "hostPath": {"path": "/tmp"}},
    ]
}


def test_local_volumes_are_the_kubelets() -> None:
    assert local_volume_names(SPEC) == {"scratch", "cm", "host"}


@pytest.mark.parametrize(
    ("signal", "dedicated", "usage", "containers"),
    [
        (Signal.NODEFS, False, 100 + 10 + 200 + 1000, {"c": 110}),
        (Signal.NODEFS, True, 10 + 1000, {"c": 110}),
        (Signal.IMAGEFS, True, 100 + 200, {"c": 110}),
        (Signal.NODEFS_INODES, False, 1 + 2 + 3 + 4, {}),
        (Signal.IMAGEFS_INODES, True, 1 + 3, {}),
        (Signal.PID, False, 7, {}),
    ],
)
def test_pod_usage_by_signal(
    signal: Signal, dedicated: bool, usage: int, containers: dict[str, int]
) -> None:
    (found,) = pod_usage([disk_pod("p")], {"p": SPEC}, signal, dedicated)
    assert found == {"uid": "p", "usage": usage, "containers": containers}
