"""Eviction thresholds and the eviction manager's decisions, on synthetic observations and
a stepped clock: hard and soft thresholds, grace periods, minimum reclaim, the pressure
transition period, and a state that survives a restart of the worker."""

from __future__ import annotations

from pkletd.ipc.apimodel import quantity
from pkletd.workers.eviction.manager import Manager, State
from pkletd.workers.eviction.thresholds import (
    Amount,
    Observation,
    Signal,
    Threshold,
    eviction_order,
    from_config,
)

MI = 2**20
GI = 2**30


def memory(available: int, capacity: int = 8 * GI, time: float = 0.0) -> dict[Signal, Observation]:
    return {Signal.MEMORY: Observation(available, capacity, time)}


def test_from_config_as_parse_threshold_config() -> None:
    thresholds = from_config(
        hard=[
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "0%"),  # ignored, as 100% is
            ("imagefs.available", "100%"),
            ("containerfs.available", "10%"),  # containerd reports no container fs
        ],
        soft=[("memory.available", "1Gi")],
        grace=[("memory.available", 90.0), ("pid.available", 5.0)],
        min_reclaim=[("memory.available", "500Mi")],
    )
    assert [t.key for t in thresholds] == [
        "memory.available<100Mi",
        "nodefs.available<10%",
        "memory.available<1Gi for 90s",
        "allocatableMemory.available<100Mi",  # the hard memory threshold, for /kubepods
    ]
    hard_memory, nodefs, soft_memory, allocatable = thresholds
    assert hard_memory.hard and not soft_memory.hard and soft_memory.grace_s == 90.0
    assert hard_memory.min_reclaim == Amount("500Mi") == allocatable.min_reclaim
    assert nodefs.min_reclaim is None
    assert (hard_memory.condition, nodefs.condition) == ("MemoryPressure", "DiskPressure")
    assert (hard_memory.resource, nodefs.resource) == ("memory", "ephemeral-storage")


def test_amounts_as_get_threshold_quantity() -> None:
    assert Amount("100Mi").of(8 * GI) == 100 * MI
    # a float32 fraction of the capacity, the product truncated
    assert Amount("10%").of(1000) == 100
    assert Amount("7.5%").of(10**9) == int(10**9 * 0.07500000298023224)
    assert Amount("100Mi").shown(0) == "100Mi"
    assert Amount("1.5Gi").shown(0) == "1536Mi"
    assert Amount("500M").shown(0) == "500M"
    # float32(0.1) is a little over a tenth: the kubelet prints the bytes it comes to
    assert Amount("10%").shown(10 * 2**30) == "1073741840"
    assert Amount("50%").shown(2 * 2**30) == "1Gi"


def test_quantities_print_as_go_does() -> None:
    binary, decimal = quantity.Format.BINARY_SI, quantity.Format.DECIMAL_SI
    assert quantity.canonical(629145600, binary) == "600Mi"
    assert quantity.canonical(1536, binary) == "1536"
    assert quantity.canonical(1000000, binary) == "1000000"
    assert quantity.canonical(1023, binary) == "1023"
    assert quantity.canonical(2000, decimal) == "2k"
    assert quantity.canonical(204, decimal) == "204"
    assert quantity.canonical(quantity.parse("0.5"), decimal) == "500m"
    assert quantity.canonical(quantity.parse("1e3"), quantity.format_of("1e3")) == "1e3"


def test_met_and_minimum_reclaim() -> None:
    threshold = Threshold(Signal.MEMORY, Amount("1Gi"), min_reclaim=Amount("512Mi"))
    assert threshold.met(memory(GI - 1), enforce_min_reclaim=False)
    assert not threshold.met(memory(GI), enforce_min_reclaim=False)
    assert threshold.met(memory(GI + 100 * MI), enforce_min_reclaim=True)
    assert not threshold.met(memory(GI + 512 * MI), enforce_min_reclaim=True)
    assert not threshold.met({}, enforce_min_reclaim=False)  # no observation: not met


def test_memory_goes_first() -> None:
    disk = Threshold(Signal.NODEFS, Amount("10%"))
    pids = Threshold(Signal.PID, Amount("100"))
    mem = Threshold(Signal.MEMORY, Amount("1Gi"))
    assert eviction_order([disk, pids, mem]) == [mem, disk, pids]


def test_hard_threshold_is_due_at_once_and_sets_the_condition() -> None:
    hard = Threshold(Signal.MEMORY, Amount("1Gi"))
    manager = Manager([hard], transition_s=300.0)
    verdict = manager.synchronize(memory(2 * GI), now=0.0)
    assert (verdict.conditions, verdict.due) == ((), ())
    verdict = manager.synchronize(memory(GI // 2), now=10.0)
    assert verdict.conditions == ("MemoryPressure",)
    assert verdict.to_reclaim == hard


def test_soft_threshold_waits_for_its_grace_period() -> None:
    soft = Threshold(Signal.MEMORY, Amount("1Gi"), grace_s=60.0)
    manager = Manager([soft], transition_s=300.0)
    assert manager.synchronize(memory(GI // 2), now=0.0).due == ()
    verdict = manager.synchronize(memory(GI // 2), now=59.0)
    assert verdict.conditions == ("MemoryPressure",) and verdict.due == ()
    assert manager.synchronize(memory(GI // 2), now=60.0).due == (soft,)
    # cleared, then met again: the grace period starts over
    manager.synchronize(memory(2 * GI), now=70.0)
    assert manager.synchronize(memory(GI // 2), now=80.0).due == ()
    assert manager.synchronize(memory(GI // 2), now=140.0).due == (soft,)


def test_condition_holds_for_the_transition_period() -> None:
    manager = Manager([Threshold(Signal.NODEFS, Amount("10%"))], transition_s=30.0)
    low = {Signal.NODEFS: Observation(5, 100, 0.0)}
    fine = {Signal.NODEFS: Observation(50, 100, 0.0)}
    assert manager.synchronize(low, now=100.0).conditions == ("DiskPressure",)
    verdict = manager.synchronize(fine, now=110.0)
    assert verdict.conditions == ("DiskPressure",) and verdict.due == ()
    assert manager.synchronize(fine, now=129.0).conditions == ("DiskPressure",)
    assert manager.synchronize(fine, now=130.0).conditions == ()


def test_a_met_threshold_stays_until_its_minimum_reclaim_is_cleared() -> None:
    threshold = Threshold(Signal.MEMORY, Amount("1Gi"), min_reclaim=Amount("500Mi"))
    manager = Manager([threshold], transition_s=300.0)
    assert manager.synchronize(memory(GI - 1), now=0.0).due == (threshold,)
    # above the threshold but not by the minimum reclaim: still met
    verdict = manager.synchronize(memory(GI + 100 * MI), now=10.0)
    assert verdict.due == (threshold,) and verdict.met == (threshold,)
    assert not manager.relieved(memory(GI + 100 * MI))
    assert manager.synchronize(memory(GI + 600 * MI), now=20.0).due == ()
    assert manager.relieved(memory(GI + 600 * MI))


def test_state_survives_a_restart() -> None:
    soft = Threshold(Signal.MEMORY, Amount("1Gi"), grace_s=60.0)
    first = Manager([soft], transition_s=300.0)
    first.synchronize(memory(GI // 2), now=0.0)
    wire = first.state.wire()
    second = Manager([soft], transition_s=300.0, state=State.of_wire(wire))
    assert second.synchronize(memory(GI // 2), now=60.0).due == (soft,)
    # the transition period too
    third = Manager([soft], transition_s=300.0, state=State.of_wire(second.state.wire()))
    assert third.synchronize(memory(2 * GI), now=100.0).conditions == ("MemoryPressure",)
    assert State.of_wire({"first_met": "nonsense"}) == State()
