"""PLEG's relists, as the kubelet's metrics show them: ``kubelet_pleg_relist_duration_seconds``,
``kubelet_pleg_relist_interval_seconds`` (from one relist's start to the next one's) and
``kubelet_pleg_last_seen_seconds`` (when the last relist ended, in wall-clock seconds;
absent until the first).

The PLEG worker reports each relist (``RelistCompleted``) and the envelope's send time
dates it: a monotonic time, one clock for every process of the machine.
"""

from __future__ import annotations

from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.bus.metricfamily import ALPHA, Histogram, Labels, family
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock


class PlegMetrics:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self._clock = clock
        self._duration = Histogram(
            "kubelet_pleg_relist_duration_seconds",
            ALPHA + "Duration in seconds for relisting pods in PLEG.",
        )
        self._interval = Histogram(
            "kubelet_pleg_relist_interval_seconds",
            ALPHA + "Interval in seconds between relisting in PLEG.",
        )
        self._last_start: float | None = None
        self._last_seen: float | None = None

    def relisted(self, duration_s: float, sent_at: float) -> None:
        """A relist of ``duration_s`` seconds ended at ``sent_at`` (monotonic)."""
        started = sent_at - duration_s
        if self._last_start is not None:
            self._interval.observe(started - self._last_start)
        self._last_start = started
        self._duration.observe(duration_s)
        self._last_seen = self._clock.time() - (self._clock.monotonic() - sent_at)

    def families(self) -> list[MetricFamily]:
        seen: dict[Labels, float] = {(): self._last_seen} if self._last_seen is not None else {}
        last_seen = family(
            "kubelet_pleg_last_seen_seconds",
            ALPHA + "Timestamp in seconds when PLEG was last seen active.",
            "gauge",
            (),
            seen,
        )
        return [self._duration.family(), self._interval.family(), last_seen]
