"""Volume stats end to end: a real pkletd joined to the test API server (volume stats every
2 s, gate CSIVolumeHealth on), a pod on a claim bound to a volume of the test CSI driver,
and ``/stats/summary`` and ``/metrics`` read through the API server's node proxy, as
metrics-server and Prometheus read them: the figures are the driver's (statvfs of its
volume directory), the claim is named, an abnormal condition shows, and a restarted http
worker still knows the driver."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_storage import CLAIMED, claim, csi_driver, pod, registered_driver, volume
from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.csidriver import CsiDriverProcess
from tests.harness.node import NODE, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

CLAIM = {"namespace": "default", "persistentvolumeclaim": "data"}
SLACK = 256 * 2**20  # other tests write to the same disk between two readings


@pytest.fixture
def node(pkletd: Pkletd, apiserver: ApiServer) -> Iterator[Pkletd]:
    yield join(pkletd, apiserver, volumeStatsAggPeriod="2s", featureGates={"CSIVolumeHealth": True})


@pytest.fixture
def driver(node: Pkletd, tmp_path: Path) -> Iterator[CsiDriverProcess]:
    yield from registered_driver(node, tmp_path)


def summary_volume(kube: Kube) -> dict[str, Any] | None:
    raw = kube.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/stats/summary").stdout
    for pod_stats in json.loads(raw)["pods"]:
        for found in pod_stats.get("volume", []):
            if found["name"] == "data":
                return dict(found)
    return None


def claim_metrics(kube: Kube) -> dict[str, float]:
    """The kubelet_volume_stats_* samples of the claim, by family name."""
    text = kube.kubectl("get", "--raw", f"/api/v1/nodes/{NODE}/proxy/metrics").stdout
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("kubelet_volume_stats_") and sample.labels == CLAIM
    }


def test_a_claims_volume_stats_are_its_drivers(
    node: Pkletd, kube: Kube, driver: CsiDriverProcess
) -> None:
    csi_driver(kube, attachRequired=False)
    volume(kube)
    claim(kube)
    kube.bind("default/data", "pv-1")
    kube.core.create_namespaced_pod("default", pod("app", CLAIMED))
    node.wait_api_pod("app", timeout=60)

    stats = wait_for("the volume in /stats/summary", lambda: summary_volume(kube), timeout=30)
    fs = os.statvfs(driver.config.data_dir / "vol-1")
    assert stats["pvcRef"] == {"name": "data", "namespace": "default"}
    assert stats["capacityBytes"] == fs.f_blocks * fs.f_frsize
    assert stats["inodes"] == fs.f_files
    assert abs(stats["availableBytes"] - fs.f_bavail * fs.f_frsize) < SLACK
    assert abs(stats["usedBytes"] - (fs.f_blocks - fs.f_bfree) * fs.f_frsize) < SLACK
    assert stats["inodesUsed"] + stats["inodesFree"] == stats["inodes"]
    assert stats["volumeHealthStats"] == {"abnormal": False}
    assert driver.calls("NodeGetVolumeStats")[-1]["volume_id"] == "vol-1"

    found = wait_for("the claim in /metrics", lambda: claim_metrics(kube), timeout=30)
    assert found["kubelet_volume_stats_capacity_bytes"] == fs.f_blocks * fs.f_frsize
    assert found["kubelet_volume_stats_inodes"] == fs.f_files
    assert abs(found["kubelet_volume_stats_available_bytes"] - fs.f_bavail * fs.f_frsize) < SLACK
    assert set(found) == {
        "kubelet_volume_stats_capacity_bytes",
        "kubelet_volume_stats_available_bytes",
        "kubelet_volume_stats_used_bytes",
        "kubelet_volume_stats_inodes",
        "kubelet_volume_stats_inodes_free",
        "kubelet_volume_stats_inodes_used",
        "kubelet_volume_stats_health_status_abnormal",
    }
    assert found["kubelet_volume_stats_health_status_abnormal"] == 0.0

    (driver.config.data_dir / "vol-1.abnormal").write_text("disk is failing\n")
    wait_for(
        "the abnormal condition in /stats/summary",
        lambda: (summary_volume(kube) or {}).get("volumeHealthStats") == {"abnormal": True},
        timeout=30,
    )
    assert claim_metrics(kube)["kubelet_volume_stats_health_status_abnormal"] == 1.0

    old = node.workers()["http"]["pid"]
    assert node.cli("restart-worker", "http").returncode == 0
    wait_for(
        "a new http worker",
        lambda: (
            node.workers()["http"]["state"] == "running"
            and node.workers()["http"]["pid"] not in (0, old)
        ),
        timeout=30,
    )
    restarted = wait_for("the claim in the new worker's /metrics", lambda: claim_metrics(kube))
    assert restarted["kubelet_volume_stats_health_status_abnormal"] == 1.0
