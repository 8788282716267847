"""Liveness, readiness and startup probes, each handler, on the real containerd."""

from __future__ import annotations

import os
import signal
import time
import urllib.request
from collections.abc import Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from pkletd.workers.prober import THREADS
from prometheus_client.parser import text_string_to_metric_families

from tests.harness.node import Pkletd, api_pod, condition, free_port, pod_manifest, wait_for

pytestmark = pytest.mark.slow

SLEEP = "trap 'exit 0' TERM; while true; do sleep 1; done"
HTTPD = "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"


def probed(name: str, command: str, host_network: bool = False, **probes: Any) -> dict[str, Any]:
    manifest = pod_manifest(name, command, host_network=host_network)
    container = manifest["spec"]["containers"][0]
    container["ports"] = [{"name": "http", "containerPort": 8080}]
    for kind, probe in probes.items():
        container[f"{kind}Probe"] = {"periodSeconds": 1, "failureThreshold": 1, **probe}
    return manifest


def exec_probe(*command: str) -> dict[str, Any]:
    return {"exec": {"command": list(command)}}


def container_status(agent: Pkletd, name: str) -> dict[str, Any] | None:
    pod = api_pod(agent, name)
    statuses = pod["status"].get("containerStatuses", []) if pod else []
    return statuses[0] if statuses else None


def wait_ready(agent: Pkletd, name: str, want: str, timeout: float = 20) -> None:
    wait_for(
        f"{name} Ready={want}", lambda: condition(api_pod(agent, name), "Ready") == want, timeout
    )


def test_readiness_flips_ready_both_ways(pkletd: Pkletd) -> None:
    pkletd.start()
    command = "touch /tmp/ready; sleep 4; rm /tmp/ready; " + SLEEP
    pkletd.put("flip", probed("flip", command, readiness=exec_probe("cat", "/tmp/ready")))
    wait_ready(pkletd, "flip", "True")
    assert condition(api_pod(pkletd, "flip"), "ContainersReady") == "True"
    wait_ready(pkletd, "flip", "False")
    status = container_status(pkletd, "flip")
    assert status is not None and status["ready"] is False and "running" in status["state"]
    assert status["restartCount"] == 0  # readiness never restarts


def test_new_container_is_not_ready_until_its_probe_passes(pkletd: Pkletd) -> None:
    pkletd.start()
    slow = {"initialDelaySeconds": 3, **exec_probe("true")}
    pkletd.put("slow", probed("slow", SLEEP, readiness=slow))
    wait_for("running", lambda: (s := container_status(pkletd, "slow")) and "running" in s["state"])
    assert condition(api_pod(pkletd, "slow"), "Ready") == "False"
    wait_ready(pkletd, "slow", "True")


def test_liveness_failure_restarts_with_events(pkletd: Pkletd) -> None:
    pkletd.start()
    command = "touch /tmp/alive; sleep 2; rm /tmp/alive; " + SLEEP
    liveness = exec_probe("sh", "-c", "cat /tmp/alive || (echo no-alive-file; exit 1)")
    pkletd.put("sick", probed("sick", command, liveness=liveness))
    wait_for(
        "restarted once",
        lambda: (s := container_status(pkletd, "sick")) and s["restartCount"] >= 1,
        30,
    )
    # the container's events (the node has no clusterDNS: the pod's MissingClusterDNS too)
    events = [
        e
        for e in pkletd.events()
        if e["object"] == "default/sick-testnode" and e["reason"] != "MissingClusterDNS"
    ]
    reasons = [e["reason"] for e in events]
    started = ["Pulled", "Created", "Started"]
    assert reasons[:8] == [
        *started,
        "Unhealthy",
        "Killing",
        *started,
    ]  # one Killing, as the kubelet
    assert events[3]["message"].startswith("Liveness probe failed: ")
    assert "no-alive-file" in events[3]["message"]
    assert events[4]["message"] == "Container c0 failed liveness probe, will be restarted"


@pytest.mark.parametrize(
    ("handler", "ready"),
    [
        ({"httpGet": {"path": "/healthz", "port": "http"}}, "True"),
        ({"httpGet": {"path": "/missing", "port": 8080}}, "False"),
        ({"tcpSocket": {"port": 8080}}, "True"),
        ({"tcpSocket": {"port": 8081}}, "False"),
    ],
    ids=["http-ok", "http-404", "tcp-open", "tcp-closed"],
)
def test_network_handlers_against_the_pod_ip(
    pkletd: Pkletd, handler: dict[str, Any], ready: str
) -> None:
    pkletd.start()
    pkletd.put("web", probed("web", HTTPD, readiness=handler))
    wait_for("running", lambda: (s := container_status(pkletd, "web")) and "running" in s["state"])
    wait_ready(pkletd, "web", ready)


@pytest.fixture
def grpc_health() -> Iterator[tuple[int, health.HealthServicer]]:
    """A gRPC health server on 127.0.0.1 (a hostNetwork pod's address)."""
    port = free_port()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(servicer, server)
    server.add_insecure_port(f"127.0.0.1:{port}")
    server.start()
    try:
        yield port, servicer
    finally:
        server.stop(0)


def test_grpc_handler_follows_the_serving_status(
    pkletd: Pkletd, grpc_health: tuple[int, health.HealthServicer]
) -> None:
    port, servicer = grpc_health
    servicer.set("pkletd.test", health_pb2.HealthCheckResponse.SERVING)
    pkletd.start()
    grpc_probe = {"grpc": {"port": port, "service": "pkletd.test"}}
    pkletd.put("rpc", probed("rpc", SLEEP, host_network=True, readiness=grpc_probe))
    wait_ready(pkletd, "rpc", "True")
    servicer.set("pkletd.test", health_pb2.HealthCheckResponse.NOT_SERVING)
    wait_ready(pkletd, "rpc", "False")


def test_startup_probe_gates_liveness_then_lets_it_run(pkletd: Pkletd) -> None:
    pkletd.start()
    # Not started for ~3s; the liveness probe would fail during that time if it ran.
    command = "sleep 3; touch /tmp/up; " + SLEEP
    pkletd.put(
        "boot",
        probed(
            "boot",
            command,
            startup={**exec_probe("cat", "/tmp/up"), "failureThreshold": 30},
            liveness=exec_probe("cat", "/tmp/up"),
        ),
    )
    wait_for("running", lambda: (s := container_status(pkletd, "boot")) and "running" in s["state"])
    assert container_status(pkletd, "boot")["started"] is False
    wait_for("started", lambda: container_status(pkletd, "boot")["started"] is True, 20)
    assert container_status(pkletd, "boot")["restartCount"] == 0


def test_failed_startup_probe_restarts(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put(
        "never", probed("never", SLEEP, startup={**exec_probe("false"), "failureThreshold": 2})
    )
    wait_for(
        "restarted", lambda: (s := container_status(pkletd, "never")) and s["restartCount"] >= 1, 30
    )


def probe_totals(agent: Pkletd) -> dict[tuple[str, str, str], float]:
    url = f"http://127.0.0.1:{agent.read_only_port}/metrics/probes"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    totals = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == "prober_probe_total":
                labels = sample.labels
                totals[(labels["pod"], labels["probe_type"], labels["result"])] = sample.value
    return totals


def test_probe_metrics_count_by_type_and_result(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put(
        "counted",
        probed("counted", SLEEP, readiness=exec_probe("false"), liveness=exec_probe("true")),
    )

    def counted() -> dict[tuple[str, str, str], float] | None:
        totals = probe_totals(pkletd)
        ok = totals.get(("counted-testnode", "Liveness", "successful"), 0) >= 2
        return (
            totals
            if ok and totals.get(("counted-testnode", "Readiness", "failed"), 0) >= 2
            else None
        )

    totals = wait_for("probe counters", counted)
    assert ("counted-testnode", "Liveness", "failed") not in totals
    probes = pkletd.pod("counted")["containers"][0]["probes"]
    assert probes == {"liveness": "success", "readiness": "failure"}


def test_prober_sigkill_causes_no_restart_and_no_ready_flap(pkletd: Pkletd) -> None:
    pkletd.start()
    count = 20
    for i in range(count):
        # successThreshold 3: a prober that forgot its counters would report not-ready.
        readiness = {**exec_probe("true"), "successThreshold": 3}
        pkletd.put(
            f"p{i}", probed(f"p{i}", SLEEP, liveness=exec_probe("true"), readiness=readiness)
        )
    for i in range(count):
        wait_ready(pkletd, f"p{i}", "True", timeout=60)
    before = {name: p["containers"][0]["container_id"] for name, p in pkletd.pods().items()}
    old = pkletd.workers()["prober"]["pid"]
    os.kill(old, signal.SIGKILL)
    wait_for(
        "prober back",
        lambda: (w := pkletd.workers()["prober"])["state"] == "running" and w["pid"] != old,
    )
    deadline = time.monotonic() + 5  # watch a few probe periods with the new prober
    while time.monotonic() < deadline:
        pods = pkletd.pods()
        assert all(p["containers"][0]["ready"] for p in pods.values()), "a Ready flap"
        assert {n: p["containers"][0]["container_id"] for n, p in pods.items()} == before
    assert all(p["containers"][0]["restart_count"] == 0 for p in pkletd.pods().values())


def test_slow_exec_probes_do_not_hold_up_http_probes(pkletd: Pkletd) -> None:
    """More exec probes in flight than the prober has exec threads: an HTTP probe
    still runs every period (the kubelet gives each probe a goroutine of its own)."""
    pkletd.start()
    slow = exec_probe("sleep", "9") | {"timeoutSeconds": 20}
    crowd = probed("crowd", SLEEP, readiness=slow, liveness=slow)
    app = crowd["spec"]["containers"][0]
    crowd["spec"]["containers"] = [app | {"name": f"c{i}"} for i in range(THREADS + 2)]
    pkletd.put("crowd", crowd)
    wait_for("the crowd running", lambda: (p := pkletd.pod("crowd")) and p["phase"] == "Running")
    http = {"httpGet": {"path": "/healthz", "port": "http"}}
    pkletd.put("web", probed("web", HTTPD, readiness=http))
    wait_ready(pkletd, "web", "True", timeout=30)

    def runs() -> float:
        return probe_totals(pkletd).get(("web-testnode", "Readiness", "successful"), 0)

    before = runs()
    wait_for("4 HTTP probe runs in 8 s", lambda: runs() >= before + 4, timeout=8)
    assert probe_totals(pkletd).get(("crowd-testnode", "Liveness", "failed"), 0) == 0
