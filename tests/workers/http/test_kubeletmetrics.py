"""``/metrics`` of an http worker in the test process: the parent's report, as the bus
carries it, rendered as Prometheus text on both ports (behind the kubelet API's filter on
10250); the worker's own requests counted by the kubelet's labels; and a report family
that does not fit left out with one log line."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest
from pkletd.ipc.bus import codec
from pkletd.ipc.bus.messages import MetricFamily, MetricsReport
from pkletd.ipc.bus.metricfamily import DEFAULT_BUCKETS, Counter, Histogram, family
from pkletd.workers.http.httpmetrics import root_path
from pkletd.workers.http.reportcollector import usable
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.workers.http.kubeletapi_helpers import Served, serve


def samples(text: str) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = {}
    for metric in text_string_to_metric_families(text):
        for sample in metric.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def value(found: dict[str, list[Sample]], name: str, **labels: str) -> float:
    [match] = [s for s in found[name] if s.labels == labels]
    return match.value


def report() -> MetricsReport:
    operations = Counter(
        "kubelet_runtime_operations_total", "Runtime operations.", ("operation_type",)
    )
    operations.inc("run_podsandbox")
    operations.inc("version", by=2)
    durations = Histogram("kubelet_pleg_relist_duration_seconds", "Relists.", (0.1, 1.0))
    durations.observe(0.05)
    durations.observe(0.5)
    durations.observe(3.0)
    node = family("kubelet_node_name", "The node's name.", "gauge", ("node",), {("n1",): 1.0})
    sent = MetricsReport([node, operations.family(), durations.family()])
    decoded = codec.decode(codec.encode(sent, "supervisor", 1, 0.0)).message  # as the bus has it
    assert isinstance(decoded, MetricsReport)
    return decoded


@pytest.fixture
def served(tmp_path: Path) -> Served:
    with serve(tmp_path) as served:
        yield served


def test_the_parents_report_is_served_on_both_ports(served: Served) -> None:
    served.worker.on_broadcast(report())
    reply = served.admin("/metrics")
    assert reply.status == 200
    assert reply.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    found = samples(reply.text)
    assert value(found, "kubelet_node_name", node="n1") == 1.0
    ops = "kubelet_runtime_operations_total"
    assert value(found, ops, operation_type="version") == 2.0
    assert value(found, ops, operation_type="run_podsandbox") == 1.0
    relists = "kubelet_pleg_relist_duration_seconds"
    buckets = {s.labels["le"]: s.value for s in found[f"{relists}_bucket"]}
    assert buckets == {"0.1": 1.0, "1.0": 2.0, "+Inf": 3.0}
    assert value(found, f"{relists}_count") == 3.0
    assert value(found, f"{relists}_sum") == 3.55
    assert value(found, "process_resident_memory_bytes") > 0  # the http worker's own
    plain = samples(served.plain("/metrics").text)
    assert value(plain, "kubelet_node_name", node="n1") == 1.0
    assert served.get("/metrics").status == 401  # 10250 keeps its filter


def test_requests_are_counted_by_the_kubelets_labels(served: Served) -> None:
    assert served.admin("/pods").status == 200
    assert served.get("/pods").status == 401
    assert served.admin("/metrics/probes").status == 200
    assert served.admin("/no/such/path").status == 404
    assert served.plain("/pods").status == 200
    found = samples(served.admin("/metrics").text)
    total = "kubelet_http_requests_total"

    def counted(path: str, server_type: str = "readwrite") -> float:
        labels = {"method": "GET", "path": path, "server_type": server_type}
        return value(found, total, **labels, long_running="false")

    assert counted("pods") == 2.0  # the refused one too, as the kubelet counts it
    assert counted("metrics/probes") == 1.0
    assert counted("other") == 1.0
    assert counted("pods", "readonly") == 1.0
    this = {"method": "GET", "path": "metrics", "server_type": "readwrite", "long_running": "false"}
    assert value(found, "kubelet_http_inflight_requests", **this) == 1.0  # this very request
    count = "kubelet_http_requests_duration_seconds_count"
    assert value(found, count, **{**this, "path": "pods"}) == 2.0
    bounds = {s.labels["le"] for s in found["kubelet_http_requests_duration_seconds_bucket"]}
    assert bounds == {*map(str, DEFAULT_BUCKETS), "+Inf"}  # Go's DefBuckets, as the kubelet's
    assert not [name for name in found if name.endswith("_created")]  # Go has none


@pytest.mark.parametrize(
    ("path", "bucket"),
    [
        ("/pods", "pods"),
        ("/pods/", "pods"),
        ("/metrics", "metrics"),
        ("/metrics/cadvisor", "metrics/cadvisor"),
        ("/containerLogs/ns/pod/c", "containerLogs"),
        ("/exec/ns/pod/uid/c", "exec"),
        ("/", ""),
    ],
)
def test_paths_fall_in_the_kubelets_buckets(path: str, bucket: str) -> None:
    assert root_path(path) == bucket


def test_a_family_that_does_not_fit_is_left_out(caplog: pytest.LogCaptureFixture) -> None:
    good = family("kubelet_running_pods", "Pods.", "gauge", (), {(): 2.0})
    bad: MetricFamily = {**good, "name": "kubelet_running_containers", "labels": ["state"]}
    histogram = Histogram("kubelet_pleg_relist_interval_seconds", "Intervals.", (1.0,))
    histogram.observe(0.5)
    short: MetricFamily = {**histogram.family(), "bounds": [1.0, 2.0]}
    with caplog.at_level(logging.ERROR):
        assert usable([bad, good, short]) == [good]
    assert "name=kubelet_running_containers" in caplog.text
    assert "name=kubelet_pleg_relist_interval_seconds" in caplog.text
