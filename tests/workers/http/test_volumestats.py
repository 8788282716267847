"""The claims' volume stats in ``/metrics`` (``kubelet_volume_stats_*``, the kubelet's
names, help and labels, once per claim, parsed by the Prometheus parser), and an http worker
in the test process that learns the CSI drivers from its snapshot (a restarted worker) and
from ``CsiDriversChanged``, and asks the real test driver on its own thread."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from pkletd.ipc.bus.messages import CsiDriversChanged, Snapshot
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.csi.client import VolumeStats
from pkletd.ipc.nodestats.csivolumes import CsiVolumeStats
from pkletd.workers.http.volumemetrics import VolumeStatsCollector
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families
from prometheus_client.registry import CollectorRegistry

from tests.harness.csidriver import CsiDriverProcess, DriverConfig
from tests.harness.node import wait_for
from tests.ipc.nodestats.nodestats_helpers import DRIVER, SOCKET, UID, FakeDriver, api_pod, write
from tests.workers.http.kubeletapi_helpers import serve

GAUGES = {
    "kubelet_volume_stats_capacity_bytes": "Capacity in bytes of the volume",
    "kubelet_volume_stats_available_bytes": "Number of available bytes in the volume",
    "kubelet_volume_stats_used_bytes": "Number of used bytes in the volume",
    "kubelet_volume_stats_inodes": "Maximum number of inodes in the volume",
    "kubelet_volume_stats_inodes_free": "Number of free inodes in the volume",
    "kubelet_volume_stats_inodes_used": "Number of used inodes in the volume",
    "kubelet_volume_stats_health_status_abnormal": (
        "Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume "
        "is unhealthy, 0 indicates volume is healthy"
    ),
}


def publish(root: Path, uid: str, name: str, handle: str) -> Path:
    volume = root / "pods" / uid / "volumes" / "kubernetes.io~csi" / name
    (volume / "mount").mkdir(parents=True)
    data = {"specVolID": name, "volumeHandle": handle, "driverName": DRIVER}
    write(volume / "vol_data.json", json.dumps(data))
    return volume / "mount"


def families(text: str) -> dict[str, tuple[str, dict[tuple[str, str], float]]]:
    """name -> (help, {(namespace, claim): value}) of the kubelet_volume_stats_ families."""
    found = {}
    for family in text_string_to_metric_families(text):
        if family.name.startswith("kubelet_volume_stats_"):
            values = {
                (s.labels["namespace"], s.labels["persistentvolumeclaim"]): s.value
                for s in family.samples
            }
            assert all(
                set(s.labels) == {"namespace", "persistentvolumeclaim"} for s in family.samples
            )
            found[family.name] = (family.documentation, values)
    return found


def test_each_claim_once_with_the_kubelets_names(tmp_path: Path) -> None:
    driver = FakeDriver()
    driver.stats["vol-2"] = VolumeStats(
        available_bytes=1, capacity_bytes=2, used_bytes=3, inodes_free=4, inodes=5,
        inodes_used=6, abnormal=True, message="disk is failing",
    )  # fmt: skip
    first, second = api_pod(uid="u1"), api_pod(name="other", uid="u2")
    for pod in (first, second):
        pod["spec"]["volumes"] += [
            {"name": "data", "persistentVolumeClaim": {"claimName": "shared"}},
            {"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "inline", "csi": {"driver": DRIVER}},
        ]
    for uid in ("u1", "u2"):
        publish(tmp_path, uid, "data", "vol-1")
        publish(tmp_path, uid, "inline", f"csi-{uid}")
    publish(tmp_path, "u1", "cache", "vol-2")
    stats = CsiVolumeStats(tmp_path, lambda: {DRIVER: SOCKET}, 60.0, True, lambda _: driver)
    stats.refresh([first, second])
    registry = CollectorRegistry()
    registry.register(VolumeStatsCollector(stats))

    found = families(generate_latest(registry).decode())
    assert {name: help_text for name, (help_text, _) in found.items()} == GAUGES
    shared, cache = ("default", "shared"), ("default", "web-cache")
    assert found["kubelet_volume_stats_capacity_bytes"][1] == {shared: 1000.0, cache: 2.0}
    assert found["kubelet_volume_stats_inodes_used"][1] == {shared: 10.0, cache: 6.0}
    assert found["kubelet_volume_stats_health_status_abnormal"][1] == {shared: 0.0, cache: 1.0}


def test_no_families_without_a_claims_volume(tmp_path: Path) -> None:
    stats = CsiVolumeStats(tmp_path, dict, 60.0, True, lambda _: FakeDriver(), FakeClock())
    stats.refresh([api_pod()])
    registry = CollectorRegistry()
    registry.register(VolumeStatsCollector(stats))
    assert families(generate_latest(registry).decode()) == {}


@pytest.fixture
def short_dir() -> Iterator[Path]:
    base = Path(tempfile.mkdtemp(prefix="vs-", dir="/tmp"))  # sockets want short paths
    yield base
    shutil.rmtree(base)


def test_the_worker_learns_the_drivers_and_asks_them_on_its_thread(short_dir: Path) -> None:
    root = short_dir / "root"
    config = DriverConfig.for_kubelet(
        root, DRIVER, "n1", short_dir / "data", short_dir / "calls.jsonl"
    )
    pod = api_pod()
    pod["spec"]["volumes"].append({"name": "data", "persistentVolumeClaim": {"claimName": "c"}})
    target = publish(root, UID, "data", "vol-1")
    endpoint = {DRIVER: str(config.endpoint)}
    with (
        CsiDriverProcess(config) as driver,
        serve(
            short_dir, root_dir=str(root), volume_stats_period=3600.0, volume_health=True
        ) as served,
    ):
        # a (re)started worker: the drivers come with its snapshot
        served.worker.on_snapshot(Snapshot(1, [pod], {}, csi_drivers=endpoint))

        def capacity() -> dict[tuple[str, str], float]:
            found = families(served.plain("/metrics").text)
            return found.get("kubelet_volume_stats_capacity_bytes", ("", {}))[1]

        measured = wait_for("the claim's volume measured", capacity, timeout=20)
        assert measured[("default", "c")] > 0
        assert driver.calls("NodeGetVolumeStats")[0]["volume_path"] == str(target)

        served.worker.on_broadcast(CsiDriversChanged({}))  # the driver went
        wait_for("the claim's stats gone", lambda: capacity() == {}, timeout=20)
        served.worker.on_broadcast(CsiDriversChanged(endpoint))  # and came back
        wait_for("the claim's stats back", capacity, timeout=20)
        assert len(driver.calls("NodeGetVolumeStats")) == 2  # the period is an hour
