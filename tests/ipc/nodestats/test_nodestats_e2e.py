"""The node stats on a real pod: pkletd runs it on the test containerd, and the nodestats
functions read its real cgroups (and the runtime's CRI stats) and see its CPU time grow."""

from __future__ import annotations

import json
import urllib.request
from typing import Any

import pytest
from pkletd.ipc.nodestats import resource
from pkletd.ipc.nodestats.cadvisor import CadvisorSource, cadvisor_metrics
from pkletd.ipc.nodestats.cgroupstats import CgroupReader
from pkletd.ipc.nodestats.summary import NodePaths, SummaryProvider
from pkletd.ipc.runtime.cri import CriRuntime
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.node import NODE, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

BUSY = "trap 'exit 0' TERM; while true; do :; done"


def pod_dict(agent: Pkletd, name: str) -> dict[str, Any]:
    """The pod as the http worker holds it, from what ``pkletd status`` shows of it."""
    pod = agent.wait_running(name)
    return {
        "metadata": {"name": pod["name"], "namespace": pod["namespace"], "uid": pod["uid"]},
        "spec": {"containers": [{"name": c["name"]} for c in pod["containers"]]},
        "status": {
            "phase": pod["phase"],
            "containerStatuses": [
                {
                    "name": c["name"],
                    "containerID": f"containerd://{c['container_id']}",
                    "state": {"running": {}},
                }
                for c in pod["containers"]
            ],
        },
    }


def container_stats(summary: dict[str, Any], uid: str) -> dict[str, Any] | None:
    pods = [p for p in summary["pods"] if p["podRef"]["uid"] == uid]
    return pods[0]["containers"][0] if pods and pods[0]["containers"] else None


def test_real_cgroups_of_a_running_pod(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("busy", pod_manifest("busy", BUSY))
    pod = pod_dict(pkletd, "busy")
    uid = pod["metadata"]["uid"]
    runtime = CriRuntime(pkletd.endpoint, 10.0)
    try:
        paths = NodePaths(NODE, pkletd.root_dir, pkletd.pod_logs)
        provider = SummaryProvider(paths, CgroupReader(), runtime=runtime)
        first = wait_for("the pod's cgroups", lambda: container_stats(provider.summary([pod]), uid))
        start_ns = first["cpu"]["usageCoreNanoSeconds"]

        def busier() -> dict[str, Any] | None:
            stats = container_stats(provider.summary([pod]), uid)
            grew = stats is not None and stats["cpu"]["usageCoreNanoSeconds"] > start_ns + 5e8
            return stats if grew and "usageNanoCores" in stats["cpu"] else None

        later = wait_for("the container's cpu time to grow", busier, timeout=20)
        assert later["cpu"]["usageNanoCores"] > 100_000_000  # a busy loop: well over 0.1 core
        assert later["memory"]["workingSetBytes"] > 0
        assert later["rootfs"]["usedBytes"] >= 0  # the writable layer, from CRI
        assert later["logs"]["usedBytes"] >= 0

        text = resource.resource_metrics(provider.raw_summary([pod], only_cpu_and_memory=True))
        cpu = [
            s
            for f in text_string_to_metric_families(text)
            for s in f.samples
            if s.name == "container_cpu_usage_seconds_total" and s.labels["pod"] == f"busy-{NODE}"
        ]
        assert cpu and cpu[0].value * 1e9 > start_ns

        source = CadvisorSource(CgroupReader(), runtime)
        cadvisor = cadvisor_metrics(source.rows([pod]), source.machine())
        container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://")[1]
        assert f"/pod{uid}/{container_id}" in cadvisor
    finally:
        runtime.close()


def test_the_read_only_port_serves_the_stats_of_a_running_pod(pkletd: Pkletd) -> None:
    pkletd.put("busy", pod_manifest("busy", BUSY))
    pkletd.start()
    name = pod_dict(pkletd, "busy")["metadata"]["name"]
    base = f"http://127.0.0.1:{pkletd.read_only_port}"

    def pod_cpu() -> float | None:
        with urllib.request.urlopen(f"{base}/stats/summary", timeout=10) as reply:
            summary = json.load(reply)
        pod = next((p for p in summary["pods"] if p["podRef"]["name"] == name), None)
        return pod["cpu"].get("usageNanoCores") if pod is not None else None

    assert wait_for("the pod's CPU rate in /stats/summary", pod_cpu, timeout=30) > 0
    for path, family in (
        ("/metrics/resource", "container_cpu_usage_seconds"),
        ("/metrics/cadvisor", "container_cpu_usage_seconds"),
    ):
        with urllib.request.urlopen(base + path, timeout=10) as reply:
            text = reply.read().decode()
        families = {f.name: f for f in text_string_to_metric_families(text)}
        pods = {s.labels.get("pod") for s in families[family].samples}
        assert name in pods, (path, sorted(families))
