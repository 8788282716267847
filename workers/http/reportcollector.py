"""The parent's ``MetricsReport`` as prometheus_client metric families.

The parent keeps the counts (pods, PLEG, runtime operations, workers, the bus) and sends
them as plain data; this worker only renders the last report it got. A family whose
series do not fit it (a label or bucket count that is not the family's) is dropped
when the report arrives (``usable``), with one line naming it, and the others are served.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator

from pkletd.ipc.bus.messages import MetricFamily
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector
from prometheus_client.utils import floatToGoString

log = logging.getLogger(__name__)


def usable(families: list[MetricFamily]) -> list[MetricFamily]:
    """The families whose series fit them; each other one logged and left out."""
    found = []
    for family in families:
        problem = _misfit(family)
        if problem:
            log.error("dropped metric family from the parent name=%s reason=%s", family["name"],
                      problem)  # fmt: skip
        else:
            found.append(family)
    return found


def _misfit(family: MetricFamily) -> str:
    buckets = len(family["bounds"]) + 1 if family["type"] == "histogram" else 0
    for series in family["series"]:
        if len(series["labels"]) != len(family["labels"]):
            return f"series labels {series['labels']} for label names {family['labels']}"
        if len(series["buckets"]) != buckets:
            return f"{len(series['buckets'])} bucket counts for {buckets} buckets"
    return ""


class ReportCollector(Collector):
    """Renders what ``families`` gives at each scrape (the last report's families)."""

    def __init__(self, families: Callable[[], list[MetricFamily]]) -> None:
        self._families = families

    def collect(self) -> Iterator[Metric]:
        for family in self._families():
            yield _metric(family)


def _metric(family: MetricFamily) -> Metric:
    name, help_text, labels = family["name"], family["help"], family["labels"]
    if family["type"] == "histogram":
        histogram = HistogramMetricFamily(name, help_text, labels=labels)
        bounds = [*map(floatToGoString, family["bounds"]), "+Inf"]
        for series in family["series"]:
            buckets = [(le, float(n)) for le, n in zip(bounds, series["buckets"], strict=True)]
            histogram.add_metric(series["labels"], buckets, series["value"])
        return histogram
    metric: CounterMetricFamily | GaugeMetricFamily
    if family["type"] == "counter":
        metric = CounterMetricFamily(name, help_text, labels=labels)
    else:
        metric = GaugeMetricFamily(name, help_text, labels=labels)
    for series in family["series"]:
        metric.add_metric(series["labels"], series["value"])
    return metric
