"""Eviction signals and thresholds, as the kubelet's eviction manager knows them
(``pkg/kubelet/eviction/api/types.go`` and ``helpers.go``).

A threshold is ``<signal> < <value>``: a quantity, or a percentage of what the signal
measures against (its capacity). Hard thresholds act at once; soft ones once met for
their grace period. ``minimum reclaim`` raises the bar a met threshold must clear again
before it counts as resolved. ``from_config`` builds them from the validated
KubeletConfiguration text as ``ParseThresholdConfig`` does: ``0%`` and ``100%`` are
ignored, ``allocatableMemory.available`` copies the hard ``memory.available`` (the
kubelet adds it when ``enforceNodeAllocatable`` holds ``pods``, pkletd's fixed setting),
and the ``containerfs`` signals are dropped: the kubelet sets them to the nodefs or
imagefs ones, and only a runtime with a split container filesystem (CRI-O) reports
them.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from pkletd.ipc.apimodel import quantity


class Signal(enum.StrEnum):
    MEMORY = "memory.available"
    ALLOCATABLE_MEMORY = "allocatableMemory.available"
    NODEFS = "nodefs.available"
    NODEFS_INODES = "nodefs.inodesFree"
    IMAGEFS = "imagefs.available"
    IMAGEFS_INODES = "imagefs.inodesFree"
    PID = "pid.available"


# signal -> the node condition it drives (signalToNodeCondition)
CONDITION = {
    Signal.MEMORY: "MemoryPressure",
    Signal.ALLOCATABLE_MEMORY: "MemoryPressure",
    Signal.NODEFS: "DiskPressure",
    Signal.NODEFS_INODES: "DiskPressure",
    Signal.IMAGEFS: "DiskPressure",
    Signal.IMAGEFS_INODES: "DiskPressure",
    Signal.PID: "PIDPressure",
}
CONDITIONS = ("MemoryPressure", "DiskPressure", "PIDPressure")  # the order they are listed in
# signal -> the resource reclaimed by evicting pods (signalToResource)
RESOURCE = {
    Signal.MEMORY: "memory",
    Signal.ALLOCATABLE_MEMORY: "memory",
    Signal.NODEFS: "ephemeral-storage",
    Signal.NODEFS_INODES: "inodes",
    Signal.IMAGEFS: "ephemeral-storage",
    Signal.IMAGEFS_INODES: "inodes",
    Signal.PID: "pids",
}
COUNTED = frozenset({"inodes", "pids"})  # counts, written in decimal SI; the rest are bytes
IGNORED_PERCENTAGES = ("0%", "100%")
DROPPED_SIGNALS = ("containerfs.available", "containerfs.inodesFree")


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


@dataclass(frozen=True, slots=True)
class Amount:
    """A threshold's value or minimum reclaim as configured: ``100Mi`` or ``10%``."""

    text: str

    @property
    def percentage(self) -> bool:
        return self.text.endswith("%")

    def of(self, capacity: int) -> int:
        """``GetThresholdQuantity``: the quantity, or the percentage of ``capacity`` (a
        float32 fraction, the product truncated)."""
        if not self.percentage:
            return quantity.ceil_int(quantity.parse(self.text))
        fraction = _float32(_float32(float(self.text[:-1])) / 100)
        return int(float(capacity) * fraction)

    def shown(self, capacity: int) -> str:
        """As the kubelet prints the quantity (``Quantity.String()``): a configured
        quantity in its own format, a percentage's bytes in binary SI."""
        if self.percentage:
            return quantity.canonical(self.of(capacity), quantity.Format.BINARY_SI)
        return quantity.canonical(quantity.parse(self.text), quantity.format_of(self.text))


@dataclass(frozen=True, slots=True)
class Observation:
    """What a signal measured: ``available`` of ``capacity``, at ``time`` (monotonic)."""

    available: int
    capacity: int
    time: float


Observations = Mapping[Signal, Observation]


@dataclass(frozen=True, slots=True)
class Threshold:
    signal: Signal
    value: Amount
    grace_s: float = 0.0  # 0: a hard threshold
    min_reclaim: Amount | None = None

    @property
    def hard(self) -> bool:
        return self.grace_s == 0

    @property
    def key(self) -> str:
        """Its identity, across restarts of the worker: ``memory.available<1Gi`` (hard) or
        ``memory.available<1Gi for 90s`` (soft)."""
        text = f"{self.signal}<{self.value.text}"
        return text if self.hard else f"{text} for {self.grace_s:g}s"

    @property
    def condition(self) -> str:
        return CONDITION[self.signal]

    @property
    def resource(self) -> str:
        return RESOURCE[self.signal]

    def quantity(self, capacity: int) -> int:
        return self.value.of(capacity)

    def met(self, observations: Observations, enforce_min_reclaim: bool) -> bool:
        """Available below the threshold (plus its minimum reclaim, when enforced)."""
        observed = observations.get(self.signal)
        if observed is None:
            return False
        bar = self.quantity(observed.capacity)
        if enforce_min_reclaim and self.min_reclaim is not None:
            bar += self.min_reclaim.of(observed.capacity)
        return bar > observed.available


def from_config(
    hard: Sequence[tuple[str, str]],
    soft: Sequence[tuple[str, str]],
    grace: Sequence[tuple[str, float]],
    min_reclaim: Sequence[tuple[str, str]],
) -> tuple[Threshold, ...]:
    """The thresholds of the (validated) eviction fields."""
    periods = dict(grace)
    reclaims = {signal: Amount(text) for signal, text in min_reclaim}
    found = []
    for pairs, soft_ones in ((hard, False), (soft, True)):
        for name, text in pairs:
            if name in DROPPED_SIGNALS or text in IGNORED_PERCENTAGES:
                continue
            signal = Signal(name)
            period = periods[name] if soft_ones else 0.0
            found.append(Threshold(signal, Amount(text), period, reclaims.get(name)))
    allocatable = [
        Threshold(Signal.ALLOCATABLE_MEMORY, t.value, 0.0, t.min_reclaim)
        for t in found
        if t.signal is Signal.MEMORY and t.hard
    ]
    return tuple(found + allocatable)


def eviction_order(thresholds: Sequence[Threshold]) -> list[Threshold]:
    """Memory first, the others as they came (``byEvictionPriority``)."""
    memory = (Signal.MEMORY, Signal.ALLOCATABLE_MEMORY)
    return sorted(thresholds, key=lambda t: t.signal not in memory)
