"""/metrics/resource and /metrics/cadvisor: Prometheus texts that parse, with the names,
labels and timestamps metrics-server's scraper and cAdvisor's users expect."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.nodestats import resource
from pkletd.ipc.nodestats.cadvisor import CadvisorSource, cadvisor_metrics
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.samples import Sample

from tests.ipc.nodestats.nodestats_helpers import (
    CID,
    GI,
    MI,
    POD_CGROUP,
    SANDBOX,
    FakeStatsRuntime,
    Node,
    api_pod,
)

NOW = 1_700_000_000.0
RX = "container_network_receive_bytes_total"
TX = "container_network_transmit_bytes_total"


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path).standard()


def samples(text: str) -> dict[str, list[Sample]]:
    found: dict[str, list[Sample]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append(sample)
    return found


def series_line(text: str, name: str) -> list[str]:
    return [line for line in text.splitlines() if re.match(rf"{name}(\{{| )", line)]


# --- /metrics/resource -----------------------------------------------------------------------


def resource_text(node: Node) -> str:
    provider = node.provider(FakeClock(wall=NOW))
    return resource.resource_metrics(provider.raw_summary([api_pod()], only_cpu_and_memory=True))


def test_resource_metrics_carry_metrics_servers_names_labels_and_timestamps(node: Node) -> None:
    text = resource_text(node)
    found = samples(text)
    [node_cpu] = found["node_cpu_usage_seconds_total"]
    assert node_cpu.value == 50.0 and node_cpu.labels == {}
    assert node_cpu.timestamp == NOW  # the parser gives seconds; the text has milliseconds
    [node_memory] = found["node_memory_working_set_bytes"]
    assert node_memory.value == 2 * GI
    labels = {"container": "app", "pod": "web", "namespace": "default"}
    [cpu] = found["container_cpu_usage_seconds_total"]
    assert (cpu.labels, cpu.value, cpu.timestamp) == (labels, 1.5, NOW)
    [memory] = found["container_memory_working_set_bytes"]
    assert (memory.labels, memory.value) == (labels, 40 * MI)
    [start] = found["container_start_time_seconds"]
    assert (start.labels, start.value, start.timestamp) == (labels, 1699999990.0, None)
    [pod_cpu] = found["pod_cpu_usage_seconds_total"]
    assert (pod_cpu.labels, pod_cpu.value) == ({"pod": "web", "namespace": "default"}, 2.0)
    [pod_memory] = found["pod_memory_working_set_bytes"]
    assert pod_memory.value == 48 * MI
    [error] = found["resource_scrape_error"]
    assert (error.value, error.timestamp) == (0.0, None)


def test_resource_text_is_what_metrics_servers_parser_matches(node: Node) -> None:
    """metrics-server matches a series by its name followed by '{' or a space, finds the
    labels by their `name="` prefixes and reads the timestamp in milliseconds; the labels
    come sorted, as the kubelet's Go client writes them."""
    text = resource_text(node)
    assert series_line(text, "node_cpu_usage_seconds_total") == [
        "node_cpu_usage_seconds_total 50.0 1700000000000"
    ]
    [line] = series_line(text, "container_cpu_usage_seconds_total")
    assert line == (
        'container_cpu_usage_seconds_total{container="app",namespace="default",pod="web"}'
        " 1.5 1700000000000"
    )
    assert "# TYPE container_cpu_usage_seconds_total counter" in text
    assert "# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time" in text
    assert resource.CONTENT_TYPE.startswith("text/plain; version=0.0.4")


def test_resource_scrape_error_when_the_node_cannot_be_read(tmp_path: Path) -> None:
    node = Node(tmp_path)
    (node.proc / "meminfo").unlink()
    (node.proc / "stat").write_text("")
    gathered = node.housekeeping(FakeClock()).gather([api_pod()])
    assert gathered.summary is None and "could not be read" in gathered.error
    found = samples(resource.resource_metrics(gathered.summary))
    assert found["resource_scrape_error"][0].value == 1.0
    assert "node_cpu_usage_seconds_total" not in found


# --- /metrics/cadvisor -----------------------------------------------------------------------


def cadvisor_text(node: Node, runtime: FakeStatsRuntime | None = None) -> str:
    source = CadvisorSource(node.reader(), runtime, FakeClock(wall=NOW), node.proc, node.base)
    return cadvisor_metrics(source.rows([api_pod()]), source.machine())


def by_id(found: dict[str, list[Sample]], name: str) -> dict[str, Sample]:
    return {s.labels["id"]: s for s in found[name]}


def test_cadvisor_series_per_cgroup_with_cadvisors_labels(node: Node) -> None:
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    found = samples(cadvisor_text(node, runtime))
    usage = by_id(found, "container_cpu_usage_seconds_total")
    assert set(usage) == {
        "/",
        "/kubepods",
        "/kubepods/burstable",
        "/kubepods/besteffort",
        POD_CGROUP,
        f"{POD_CGROUP}/{SANDBOX}",
        f"{POD_CGROUP}/{CID}",
    }
    app = usage[f"{POD_CGROUP}/{CID}"]
    assert app.labels == {
        "container": "app",
        "id": f"{POD_CGROUP}/{CID}",
        "image": "nginx:1.25",
        "name": CID,
        "namespace": "default",
        "pod": "web",
        "cpu": "total",
    }
    assert (app.value, app.timestamp) == (1.5, NOW)
    pod = usage[POD_CGROUP].labels
    assert (pod["container"], pod["pod"], pod["namespace"], pod["name"]) == (
        "",
        "web",
        "default",
        "",
    )
    assert usage["/"].labels["pod"] == ""
    sandbox = usage[f"{POD_CGROUP}/{SANDBOX}"].labels
    assert (sandbox["name"], sandbox["container"], sandbox["pod"]) == (SANDBOX, "", "web")


def test_cadvisor_cpu_and_memory_values(node: Node) -> None:
    found = samples(cadvisor_text(node))
    app = f"{POD_CGROUP}/{CID}"
    assert by_id(found, "container_cpu_user_seconds_total")[app].value == pytest.approx(0.3)
    assert by_id(found, "container_cpu_system_seconds_total")[app].value == pytest.approx(0.1)
    assert by_id(found, "container_cpu_cfs_periods_total")[app].value == 90
    assert by_id(found, "container_cpu_cfs_throttled_periods_total")[app].value == 6
    assert by_id(found, "container_cpu_cfs_throttled_seconds_total")[app].value == 0.03
    assert "/" not in by_id(found, "container_cpu_cfs_periods_total")  # no quota, no CFS series
    assert by_id(found, "container_memory_usage_bytes")[app].value == 48 * MI
    assert by_id(found, "container_memory_working_set_bytes")[app].value == 40 * MI
    assert by_id(found, "container_memory_rss")[app].value == 5 * MI
    assert by_id(found, "container_memory_cache")[app].value == 16 * MI
    assert by_id(found, "container_spec_memory_limit_bytes")[app].value == 128 * MI
    assert by_id(found, "container_spec_memory_limit_bytes")[POD_CGROUP].value == 0  # none
    assert by_id(found, "container_spec_cpu_shares")[app].value == 102
    assert by_id(found, "container_spec_cpu_shares")[app].timestamp is None
    assert by_id(found, "container_last_seen")[app].value == NOW


def test_cadvisor_network_on_the_sandbox_and_fs_on_the_container(node: Node) -> None:
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    found = samples(cadvisor_text(node, runtime))
    rx = {(s.labels["id"], s.labels["interface"]): s for s in found[RX]}
    assert set(rx) == {
        ("/", "eth0"),
        (f"{POD_CGROUP}/{SANDBOX}", "eth0"),
        (f"{POD_CGROUP}/{SANDBOX}", "veth12"),
    }  # host: no lo, no veth
    assert rx[(f"{POD_CGROUP}/{SANDBOX}", "eth0")].labels["pod"] == "web"
    assert rx[(f"{POD_CGROUP}/{SANDBOX}", "eth0")].value == 111
    assert rx[("/", "eth0")].value == 1000
    tx = {(s.labels["id"], s.labels["interface"]): s.value for s in found[TX]}
    assert tx[(f"{POD_CGROUP}/{SANDBOX}", "eth0")] == 222
    [fs] = found["container_fs_usage_bytes"]
    assert fs.labels["container"] == "app"
    assert (fs.labels["device"], fs.value) == (str(node.images), 4096)


def test_cadvisor_machine_metrics(node: Node) -> None:
    (node.base / "etc").mkdir()
    (node.base / "etc/machine-id").write_text("abc123\n")
    found = samples(cadvisor_text(node))
    [cores] = found["machine_cpu_cores"]
    assert cores.value >= 1
    assert cores.labels == {"boot_id": "", "machine_id": "abc123", "system_uuid": ""}
    assert found["machine_memory_bytes"][0].value == 8 * GI
    assert found["container_scrape_error"][0].value == 0


def test_cadvisor_families_have_one_type_each(node: Node) -> None:
    text = cadvisor_text(node, FakeStatsRuntime(str(node.images), {CID: 4096}))
    types = re.findall(r"^# TYPE (\S+) (\S+)$", text, re.M)
    names = [name for name, _ in types]
    assert len(names) == len(set(names))
    assert ("container_cpu_usage_seconds_total", "counter") in types
    assert ("container_memory_working_set_bytes", "gauge") in types
