"""``/metrics/resource``: the kubelet's resource metrics, what metrics-server (0.6 and later)
scrapes for ``kubectl top`` and the HPA.

The kubelet's ``resourceMetricsCollector`` over its CPU-and-memory summary, with its
names, help, labels (``container``, ``pod``, ``namespace``) and timestamps: each usage
sample carries the time it was read (milliseconds), ``container_start_time_seconds`` and
``resource_scrape_error`` carry none. Rendered from a raw Summary (``nodestats.summary``;
its CPU and memory are all it reads), or from None when the node's stats could not be read
(``resource_scrape_error`` 1). Through ``prometheus_client``, with a registry of its own
per rendering (no global state).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry

CONTENT_TYPE = CONTENT_TYPE_PLAIN_0_0_4
CONTAINER_LABELS = ("container", "pod", "namespace")
POD_LABELS = ("pod", "namespace")
NS_PER_S = 1e9

Family = CounterMetricFamily | GaugeMetricFamily


def _help(text: str) -> str:
    return f"[STABLE] {text}"


class ResourceCollector(Collector):
    """One scrape: the summary's CPU and memory as the kubelet's resource metrics."""

    def __init__(self, summary: dict[str, Any] | None) -> None:
        self._summary = summary

    def collect(self) -> Iterator[Metric]:
        families = _families()
        error = 0.0
        summary = self._summary
        if summary is None:
            error = 1.0
        else:
            _add_node(families, summary["node"])
            for pod in summary["pods"]:
                _add_pod(families, pod)
        scrape = GaugeMetricFamily(
            "resource_scrape_error",
            _help("1 if there was an error while getting container metrics, 0 otherwise"),
        )
        scrape.add_metric([], error)
        yield from families.values()
        yield scrape


def _families() -> dict[str, Family]:
    def counter(name: str, text: str, labels: tuple[str, ...] = ()) -> CounterMetricFamily:
        return CounterMetricFamily(name, _help(text), labels=labels)

    def gauge(name: str, text: str, labels: tuple[str, ...] = ()) -> GaugeMetricFamily:
        return GaugeMetricFamily(name, _help(text), labels=labels)

    return {
        "node_cpu": counter(
            "node_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the node in core-seconds",
        ),
        "node_memory": gauge(
            "node_memory_working_set_bytes", "Current working set of the node in bytes"
        ),
        "container_start": gauge(
            "container_start_time_seconds",
            "Start time of the container since unix epoch in seconds",
            CONTAINER_LABELS,
        ),
        "container_cpu": counter(
            "container_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the container in core-seconds",
            CONTAINER_LABELS,
        ),
        "container_memory": gauge(
            "container_memory_working_set_bytes",
            "Current working set of the container in bytes",
            CONTAINER_LABELS,
        ),
        "pod_cpu": counter(
            "pod_cpu_usage_seconds_total",
            "Cumulative cpu time consumed by the pod in core-seconds",
            POD_LABELS,
        ),
        "pod_memory": gauge(
            "pod_memory_working_set_bytes", "Current working set of the pod in bytes", POD_LABELS
        ),
    }


def _add_usage(
    families: dict[str, Family], prefix: str, stats: dict[str, Any], labels: list[str]
) -> None:
    cpu = stats.get("cpu")
    if cpu is not None and "usageCoreNanoSeconds" in cpu:
        value = cpu["usageCoreNanoSeconds"] / NS_PER_S
        _add(families[f"{prefix}_cpu"], labels, value, cpu["time"])
    memory = stats.get("memory")
    if memory is not None and "workingSetBytes" in memory:
        _add(families[f"{prefix}_memory"], labels, memory["workingSetBytes"], memory["time"])


def _add(family: Family, labels: list[str], value: float, timestamp: float | None) -> None:
    family.add_metric(labels, float(value), timestamp=timestamp)


def _add_node(families: dict[str, Family], node: dict[str, Any]) -> None:
    _add_usage(families, "node", node, [])


def _add_pod(families: dict[str, Family], pod: dict[str, Any]) -> None:
    ref = pod["podRef"]
    for container in pod["containers"]:
        labels = [container["name"], ref["name"], ref["namespace"]]
        if container.get("startTime", 0) > 0:
            _add(families["container_start"], labels, container["startTime"], None)
        _add_usage(families, "container", container, labels)
    _add_usage(families, "pod", pod, [ref["name"], ref["namespace"]])


def resource_metrics(summary: dict[str, Any] | None) -> str:
    """The body of ``/metrics/resource`` (content type ``CONTENT_TYPE``) from a raw
    Summary; None: the node could not be read."""
    registry = CollectorRegistry(auto_describe=False)
    registry.register(ResourceCollector(summary))
    return generate_latest(registry).decode()
