"""/stats/summary from cgroup files in a temporary directory, a fake CRI and a fake clock."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.nodestats.cgroupstats import CgroupReader, weight_to_shares
from pkletd.ipc.nodestats.rates import CpuRates
from pkletd.ipc.nodestats.summary import StatsUnavailable, system_cgroups

from tests.ipc.nodestats.nodestats_helpers import (
    CID,
    GI,
    MI,
    NODE,
    POD_CGROUP,
    UID,
    FakeStatsRuntime,
    Node,
    api_pod,
)

RFC3339 = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path).standard()


def only_pod(summary: dict[str, Any]) -> dict[str, Any]:
    [pod] = summary["pods"]
    return pod


def test_first_summary_has_cumulative_cpu_but_no_rate_yet(node: Node) -> None:
    summary = node.provider(FakeClock()).summary([api_pod()])
    assert summary["node"]["cpu"]["usageCoreNanoSeconds"] == 50_000_000_000
    assert "usageNanoCores" not in summary["node"]["cpu"]
    assert "usageNanoCores" not in only_pod(summary)["containers"][0]["cpu"]


def test_usage_nano_cores_is_the_rate_between_two_samples(node: Node) -> None:
    clock = FakeClock()
    provider = node.provider(clock)
    provider.summary([api_pod()])
    clock.step(10)
    node.set_cpu("/", 50_000_000_000 + 20_000_000_000)  # 2 cores busy for 10 s
    node.set_cpu(f"{POD_CGROUP}/{CID}", 1_500_000_000 + 2_500_000_000)  # a quarter core
    node.set_cpu(POD_CGROUP, 2_000_000_000 + 3_000_000_000)
    summary = provider.summary([api_pod()])
    assert summary["node"]["cpu"]["usageNanoCores"] == 2_000_000_000
    pod = only_pod(summary)
    assert pod["containers"][0]["cpu"]["usageNanoCores"] == 250_000_000
    assert pod["cpu"]["usageNanoCores"] == 300_000_000


def test_what_metrics_server_and_kubectl_top_read_is_there(node: Node) -> None:
    """metrics-server before 0.6 decoded /stats/summary: node and container cpu (time,
    usageCoreNanoSeconds, usageNanoCores), memory (time, workingSetBytes), the pod's
    podRef and every container's name and startTime."""
    clock = FakeClock()
    provider = node.provider(clock)
    provider.summary([api_pod()])
    clock.step(15)
    summary = provider.summary([api_pod()])
    n = summary["node"]
    assert n["nodeName"] == NODE
    assert RFC3339.match(n["startTime"]) and n["startTime"] == "2023-07-22T04:26:40Z"  # btime
    for stats in (n, only_pod(summary), only_pod(summary)["containers"][0]):
        assert set(stats["cpu"]) == {"time", "usageNanoCores", "usageCoreNanoSeconds"}
        assert RFC3339.match(stats["cpu"]["time"])
        assert {"time", "workingSetBytes", "usageBytes"} <= set(stats["memory"])
    pod = only_pod(summary)
    assert pod["podRef"] == {"name": "web", "namespace": "default", "uid": UID}
    assert pod["startTime"] == "2023-11-14T22:13:00Z"
    [container] = pod["containers"]
    assert container["name"] == "app"
    assert container["startTime"] == "2023-11-14T22:13:10Z"


def test_memory_working_set_is_usage_less_inactive_file(node: Node) -> None:
    summary = node.provider(FakeClock()).summary([api_pod()])
    memory = only_pod(summary)["containers"][0]["memory"]
    assert memory["usageBytes"] == 48 * MI
    assert memory["workingSetBytes"] == 40 * MI
    assert memory["availableBytes"] == 128 * MI - 40 * MI  # the limit less the working set
    assert memory["rssBytes"] == 5 * MI
    assert (memory["pageFaults"], memory["majorPageFaults"]) == (77, 3)
    assert "availableBytes" not in only_pod(summary)["memory"]  # no limit on the pod cgroup
    assert summary["node"]["memory"]["workingSetBytes"] == 2 * GI
    assert summary["node"]["memory"]["availableBytes"] == 8 * GI - 2 * GI  # MemTotal - ws


def test_only_cpu_and_memory_leaves_the_rest_out(node: Node) -> None:
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    summary = node.provider(FakeClock(), runtime).summary([api_pod()], only_cpu_and_memory=True)
    assert set(summary["node"]) == {"nodeName", "systemContainers", "startTime", "cpu", "memory"}
    pod = only_pod(summary)
    assert set(pod) == {"podRef", "startTime", "containers", "cpu", "memory"}
    assert set(pod["containers"][0]) == {"name", "startTime", "cpu", "memory"}
    assert runtime.calls == []  # the runtime is not asked


def test_full_summary_node_parts(node: Node) -> None:
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    n = node.provider(FakeClock(), runtime).summary([api_pod()])["node"]
    assert [c["name"] for c in n["systemContainers"]] == ["pods"]
    assert n["systemContainers"][0]["memory"]["workingSetBytes"] == GI - 100 * MI
    network = n["network"]
    assert [i["name"] for i in network["interfaces"]] == ["eth0"]  # no lo, no veth
    assert (network["name"], network["rxBytes"], network["txBytes"]) == ("eth0", 1000, 2000)
    assert (network["rxErrors"], network["txErrors"]) == (1, 3)
    assert {"capacityBytes", "availableBytes", "usedBytes", "inodes", "inodesFree"} <= set(n["fs"])
    assert n["runtime"]["imageFs"]["usedBytes"] == 300 * MI
    assert n["runtime"]["imageFs"]["capacityBytes"] > 0
    assert n["rlimit"]["maxpid"] == 126000  # the lower of pid_max and threads-max
    assert n["rlimit"]["curproc"] == 345


def test_full_summary_pod_parts(node: Node) -> None:
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    pod = only_pod(node.provider(FakeClock(), runtime).summary([api_pod()]))
    assert (pod["network"]["rxBytes"], pod["network"]["txBytes"]) == (111, 222)  # the sandbox's
    [volume] = pod["volume"]
    assert volume["name"] == "scratch"
    assert volume["usedBytes"] >= 10000 and volume["inodesUsed"] == 2
    assert volume["capacityBytes"] > 0
    container = pod["containers"][0]
    assert container["rootfs"]["usedBytes"] == 4096
    assert container["rootfs"]["inodesUsed"] == 12
    assert container["logs"]["usedBytes"] > 0 and container["logs"]["inodesUsed"] == 2
    ephemeral = pod["ephemeral-storage"]
    parts = container["rootfs"]["usedBytes"] + container["logs"]["usedBytes"] + volume["usedBytes"]
    assert ephemeral["usedBytes"] == parts
    assert pod["process_stats"] == {"process_count": 3}  # the sandbox's and the container's


def test_a_failing_runtime_leaves_out_only_what_it_gives(node: Node) -> None:
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096}, fail=True)
    summary = node.provider(FakeClock(), runtime).summary([api_pod()])
    assert "runtime" not in summary["node"]
    assert "rootfs" not in only_pod(summary)["containers"][0]
    assert "logs" in only_pod(summary)["containers"][0]


def test_pods_without_a_cgroup_and_containers_not_running_are_left_out(node: Node) -> None:
    gone = api_pod(name="gone", uid="ffff")
    exited = api_pod()
    exited["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0}}
    summary = node.provider(FakeClock()).summary([gone, exited])
    assert only_pod(summary)["containers"] == []
    assert only_pod(summary)["cpu"]["usageCoreNanoSeconds"] == 2_000_000_000


def test_a_node_without_counters_is_unavailable(tmp_path: Path) -> None:
    node = Node(tmp_path)
    (node.proc / "meminfo").unlink()
    (node.proc / "stat").write_text("")
    with pytest.raises(StatsUnavailable):
        node.provider(FakeClock()).summary([])


def test_cgroup_v2(tmp_path: Path) -> None:
    node = Node(tmp_path, v2=True).standard()
    (node.mount / "memory.current").unlink()  # the v2 root has no memory counters
    clock = FakeClock()
    provider = node.provider(clock)
    provider.summary([api_pod()])
    clock.step(10)
    node.set_cpu(f"{POD_CGROUP}/{CID}", 1_500_000_000 + 5_000_000_000)
    summary = provider.summary([api_pod()])
    container = only_pod(summary)["containers"][0]
    assert container["cpu"]["usageNanoCores"] == 500_000_000
    assert container["memory"]["workingSetBytes"] == 40 * MI
    assert container["memory"]["availableBytes"] == 88 * MI
    # the node's memory from /proc/meminfo: MemTotal - MemFree - Inactive(file)
    assert summary["node"]["memory"]["workingSetBytes"] == 8 * GI - 1024 * 1024 - 2048 * 1024


def test_v2_reader_converts_weight_back_to_shares(tmp_path: Path) -> None:
    node = Node(tmp_path, v2=True).standard()
    sample = CgroupReader(node.mount).sample(POD_CGROUP, 0.0)
    assert sample is not None and sample.cpu_shares == weight_to_shares(100) == 2597
    assert sample.cpu is not None and sample.cpu.throttled_ns == 35_000_000


def test_system_cgroups_are_this_process_the_runtime_and_kubepods(tmp_path: Path) -> None:
    node = Node(tmp_path)
    (node.proc / "self").mkdir()
    (node.proc / "self/cgroup").write_text("4:memory:/pkletd.service\n3:cpu:/\n0::/\n")
    (node.proc / "77").mkdir()
    (node.proc / "77/cgroup").write_text("0::/system.slice/containerd.service\n")
    assert system_cgroups(node.proc, runtime_pid=77) == {
        "pods": "/kubepods",
        "kubelet": "/pkletd.service",  # v1: the memory hierarchy's
        "runtime": "/system.slice/containerd.service",  # v2: the unified one
    }
    assert system_cgroups(node.proc) == {"pods": "/kubepods", "kubelet": "/pkletd.service"}


# --- rates -------------------------------------------------------------------------------


def test_rates_hold_within_the_minimum_window_and_restart_after_a_reset() -> None:
    rates = CpuRates(min_window_s=1.0)
    assert rates.nano_cores("/a", 100.0, 1_000) is None
    assert rates.nano_cores("/a", 102.0, 1_000 + 2_000_000_000) == 1_000_000_000
    # a second scrape 0.1 s later gets the same rate rather than a rate over 0.1 s
    assert rates.nano_cores("/a", 102.1, 1_000 + 2_000_000_001) == 1_000_000_000
    assert rates.nano_cores("/a", 104.0, 5) is None  # the counter went back: a new cgroup
    assert rates.nano_cores("/a", 106.0, 5 + 1_000_000_000) == 500_000_000


def test_rates_forget_cgroups_no_longer_asked_about() -> None:
    rates = CpuRates()
    rates.nano_cores("/a", 100.0, 0)
    rates.nano_cores("/b", 100.0, 0)
    rates.keep_only(["/b"])
    assert rates.nano_cores("/a", 110.0, 10) is None
    assert rates.nano_cores("/b", 110.0, 10) == 1
