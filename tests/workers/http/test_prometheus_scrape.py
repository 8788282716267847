"""A real Prometheus scrapes a real pkletd joined to the test API server, as a cluster's
Prometheus scrapes a kubelet: ``/metrics``, ``/metrics/cadvisor``, ``/metrics/resource``
and ``/metrics/probes`` over HTTPS with a bearer token that the node has the API server
review. Every job is up, a container's CPU is there, pkletd's own numbers are there (a
killed worker's exit too), and ``promtool check metrics`` passes on every endpoint's text."""

from __future__ import annotations

import os
import signal
from pathlib import Path
from typing import Any

import pytest

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.node import BUSYBOX, Pkletd, free_port, wait_for
from tests.harness.prometheus import PATHS, Prometheus, promtool_problems, scrape

pytestmark = pytest.mark.slow

TOKEN = "prometheus-token"


def ticker_pod() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "ticker", "namespace": "default"},
        "spec": {
            "nodeName": "testnode",
            "automountServiceAccountToken": False,
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {
                    "name": "ticker",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["sleep", "3600"],
                    "readinessProbe": {"exec": {"command": ["true"]}, "periodSeconds": 1},
                }
            ],
        },
    }


def test_prometheus_scrapes_every_endpoint_and_promtool_accepts_them(
    pkletd: Pkletd, apiserver: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    apiserver.add_token(TOKEN, "prometheus")
    pkletd.join_cluster(apiserver).start()  # its config file: tokens reviewed, Webhook authz
    kube.core.create_namespaced_pod("default", ticker_pod())
    pkletd.wait_api_pod("ticker")
    target = f"127.0.0.1:{pkletd.port}"
    prometheus = Prometheus(tmp_path / "prometheus", free_port(), target, TOKEN)
    try:
        prometheus.start()

        def all_up() -> bool:
            up = {r["metric"]["job"]: r["value"][1] for r in prometheus.query("up")}
            return up == {job: "1" for job in PATHS}

        wait_for("every job up", all_up)
        for expression in (
            'container_cpu_usage_seconds_total{job="cadvisor",container="ticker",cpu="total"}',
            'container_cpu_usage_seconds_total{job="resource",container="ticker"}',
            'prober_probe_total{job="probes",container="ticker",probe_type="Readiness"}',
            'kubelet_running_pods{job="kubelet"} >= 1',
            'kubelet_pod_start_sli_duration_seconds_count{job="kubelet"} >= 1',
            'kubelet_pod_worker_duration_seconds_count{operation_type="create"} >= 1',
            'kubelet_runtime_operations_total{operation_type="run_podsandbox"} >= 1',
            'kubelet_pleg_relist_duration_seconds_count{job="kubelet"} >= 1',
            'pkletd_worker_up{worker="pleg"} == 1',
            'pkletd_process_pss_bytes{worker="supervisor"} > 0',
            'pkletd_bus_messages_received_total{worker="prober",kind="ProbeResult"} >= 1',
            'kubelet_http_requests_total{path="metrics/cadvisor",server_type="readwrite"} >= 1',
        ):
            wait_for(expression, lambda e=expression: prometheus.query(e))

        os.kill(pkletd.workers()["prober"]["pid"], signal.SIGKILL)
        for expression in (
            'pkletd_worker_last_exit_code{worker="prober"} == -9',
            'pkletd_worker_restarts_total{worker="prober"} == 1',
        ):
            wait_for(expression, lambda e=expression: prometheus.query(e))
    finally:
        prometheus.stop()

    for path in PATHS.values():
        assert promtool_problems(scrape(target, path, TOKEN)) == "", path
