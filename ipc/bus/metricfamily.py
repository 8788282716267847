"""Metrics as the parent keeps them, and as a ``MetricsReport`` carries them.

``Counter`` and ``Histogram`` count by label values and may be updated from any thread
(the pod workers and the CRI calls run on several); ``family`` makes a wire family of
values kept elsewhere (a gauge read at report time, a count another object keeps). The
http worker renders the families with prometheus_client; the parent never imports it.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Mapping

from pkletd.ipc.bus.messages import MetricFamily, MetricSeries, MetricType

Labels = tuple[str, ...]

ALPHA = "[ALPHA] "  # what the kubelet's metrics framework puts before an alpha metric's help

# Prometheus's default buckets (client_golang's DefBuckets), which the kubelet uses most.
DEFAULT_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)


def exponential_buckets(start: float, factor: float, count: int) -> tuple[float, ...]:
    return tuple(start * factor**i for i in range(count))


def family(
    name: str,
    help_text: str,
    kind: MetricType,
    labels: Labels,
    values: Mapping[Labels, float],
) -> MetricFamily:
    """A counter or gauge family of these values, series in label order."""
    series: list[MetricSeries] = [
        {"labels": list(key), "value": float(value), "buckets": []}
        for key, value in sorted(values.items())
    ]
    return {
        "name": name,
        "type": kind,
        "help": help_text,
        "labels": list(labels),
        "bounds": [],
        "series": series,
    }


class Counter:
    def __init__(self, name: str, help_text: str, labels: Labels = ()) -> None:
        self.name = name
        self._help = help_text
        self._labels = labels
        self._values: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def inc(self, *labels: str, by: float = 1.0) -> None:
        with self._lock:
            self._values[labels] = self._values.get(labels, 0.0) + by

    def family(self) -> MetricFamily:
        with self._lock:
            values = dict(self._values)
        return family(self.name, self._help, "counter", self._labels, values)


class Histogram:
    def __init__(
        self,
        name: str,
        help_text: str,
        bounds: tuple[float, ...] = DEFAULT_BUCKETS,
        labels: Labels = (),
    ) -> None:
        self.name = name
        self._help = help_text
        self._bounds = bounds
        self._labels = labels
        self._counts: dict[Labels, list[int]] = {}  # per bucket (not cumulative), +Inf last
        self._sums: dict[Labels, float] = {}
        self._lock = threading.Lock()

    def observe(self, value: float, *labels: str) -> None:
        index = bisect.bisect_left(self._bounds, value)
        with self._lock:
            counts = self._counts.get(labels)
            if counts is None:
                counts = self._counts[labels] = [0] * (len(self._bounds) + 1)
            counts[index] += 1
            self._sums[labels] = self._sums.get(labels, 0.0) + value

    def family(self) -> MetricFamily:
        with self._lock:
            counts = {key: list(c) for key, c in self._counts.items()}
            sums = dict(self._sums)
        series: list[MetricSeries] = [
            {"labels": list(key), "value": sums[key], "buckets": _cumulative(counts[key])}
            for key in sorted(counts)
        ]
        return {
            "name": self.name,
            "type": "histogram",
            "help": self._help,
            "labels": list(self._labels),
            "bounds": list(self._bounds),
            "series": series,
        }


def _cumulative(counts: list[int]) -> list[int]:
    total, found = 0, []
    for n in counts:
        total += n
        found.append(total)
    return found
