"""Volume stats end to end: a real pkletd joined to the real control plane (volume stats
every 2 s, gate CSIVolumeHealth on), a pod on a claim the PV controller bound to a volume
of the test CSI driver, and ``/stats/summary`` and ``/metrics`` read from the node's
kubelet port with the cluster admin's client certificate, as metrics-server reads them
(pkletd asks kube-apiserver whether the caller may, by SubjectAccessReview): the figures
are the driver's (statvfs of its volume directory), the claim is named, an abnormal
condition shows, and a restarted http worker still knows the driver.

Not through kube-apiserver's node proxy (``/api/v1/nodes/<node>/proxy/...``), as against
the test API server: kube-apiserver refuses to proxy to a loopback address ("address not
allowed"), and nodes here must be on 127.0.0.1."""

from __future__ import annotations

import json
import os
import ssl
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.e2e.test_storage import (
    CLAIMED,
    claim,
    claim_bound,
    csi_driver,
    pod,
    registered_driver,
    volume,
)
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.csidriver import CsiDriverProcess
from tests.harness.node import Pkletd, join, wait_for

pytestmark = pytest.mark.slow

CLAIM = {"namespace": "default", "persistentvolumeclaim": "data"}
SLACK = 256 * 2**20  # other tests write to the same disk between two readings


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane) -> Iterator[Pkletd]:
    gates = {"CSIVolumeHealth": True}
    yield join(pkletd, control_plane, volumeStatsAggPeriod="2s", featureGates=gates)


@pytest.fixture
def driver(node: Pkletd, tmp_path: Path) -> Iterator[CsiDriverProcess]:
    yield from registered_driver(node, tmp_path)


class KubeletApi:
    """GETs on a node's kubelet API as the cluster admin, its self-signed serving
    certificate (``<root-dir>/pki/kubelet.crt``, made for the node's name) trusted."""

    def __init__(self, node: Pkletd, plane: ControlPlane) -> None:
        self.url = f"https://127.0.0.1:{node.port}"
        self.context = ssl.create_default_context(cafile=str(node.root_dir / "pki/kubelet.crt"))
        self.context.check_hostname = False  # made for the node's name, reached at 127.0.0.1
        admin = plane.pki.client_cert("admin", ["system:masters"])
        self.context.load_cert_chain(*(str(p) for p in admin))

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10, context=self.context) as reply:
            return str(reply.read().decode())


@pytest.fixture
def kubelet(node: Pkletd, control_plane: ControlPlane) -> KubeletApi:
    return KubeletApi(node, control_plane)


def summary_volume(kubelet: KubeletApi) -> dict[str, Any] | None:
    for pod_stats in json.loads(kubelet.get("/stats/summary"))["pods"]:
        for found in pod_stats.get("volume", []):
            if found["name"] == "data":
                return dict(found)
    return None


def claim_metrics(kubelet: KubeletApi) -> dict[str, float]:
    """The kubelet_volume_stats_* samples of the claim, by family name."""
    text = kubelet.get("/metrics")
    return {
        sample.name: sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.startswith("kubelet_volume_stats_") and sample.labels == CLAIM
    }


def test_a_claims_volume_stats_are_its_drivers(
    node: Pkletd, kube: Kube, kubelet: KubeletApi, driver: CsiDriverProcess
) -> None:
    csi_driver(kube, attachRequired=False)
    volume(kube)
    claim(kube)  # the volume is there: the PV controller binds the claim at once
    wait_for("the claim bound", lambda: claim_bound(kube, "data"), timeout=60)
    kube.core.create_namespaced_pod("default", pod("app", CLAIMED))
    node.wait_api_pod("app", timeout=60)

    stats = wait_for("the volume in /stats/summary", lambda: summary_volume(kubelet), timeout=30)
    fs = os.statvfs(driver.config.data_dir / "vol-1")
    assert stats["pvcRef"] == {"name": "data", "namespace": "default"}
    assert stats["capacityBytes"] == fs.f_blocks * fs.f_frsize
    assert stats["inodes"] == fs.f_files
    assert abs(stats["availableBytes"] - fs.f_bavail * fs.f_frsize) < SLACK
    assert abs(stats["usedBytes"] - (fs.f_blocks - fs.f_bfree) * fs.f_frsize) < SLACK
    assert stats["inodesUsed"] + stats["inodesFree"] == stats["inodes"]
    assert stats["volumeHealthStats"] == {"abnormal": False}
    assert driver.calls("NodeGetVolumeStats")[-1]["volume_id"] == "vol-1"

    found = wait_for("the claim in /metrics", lambda: claim_metrics(kubelet), timeout=30)
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
        lambda: (summary_volume(kubelet) or {}).get("volumeHealthStats") == {"abnormal": True},
        timeout=30,
    )
    assert claim_metrics(kubelet)["kubelet_volume_stats_health_status_abnormal"] == 1.0

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
    restarted = wait_for("the claim in the new worker's /metrics", lambda: claim_metrics(kubelet))
    assert restarted["kubelet_volume_stats_health_status_abnormal"] == 1.0
