"""The CSI volumes in /stats/summary: their drivers' NodeGetVolumeStats (a fake driver
client), never a walk of what they mount; pvcRef for claims and generic ephemeral
volumes; volumeHealthStats with gate CSIVolumeHealth; measured once per period (a fake
clock), again at once when the driver's socket changes; no stats without a registered
driver with GET_VOLUME_STATS; none at all when volume stats are off."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.csi.client import CsiError, VolumeStats
from pkletd.ipc.nodestats.csivolumes import CsiVolumeStats, VolumeStatsOff, claim_of
from pkletd.ipc.nodestats.summary import SummaryProvider

from tests.ipc.nodestats.nodestats_helpers import (
    DRIVER,
    SOCKET,
    UID,
    FakeDriver,
    Node,
    api_pod,
    write,
)


class Bench:
    """A node with one pod, its CSI volumes' directories, a fake driver and a fake clock."""

    def __init__(self, tmp_path: Path, period: float = 60.0, health: bool = True) -> None:
        self.node = Node(tmp_path).standard()
        self.clock = FakeClock()
        self.driver = FakeDriver()
        self.drivers = {DRIVER: SOCKET}
        self.connected: list[str] = []
        self.pod = api_pod()
        self.pod["spec"]["volumes"] += [
            {"name": "data", "persistentVolumeClaim": {"claimName": "claim-1"}},
            {"name": "cache", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}},
            {"name": "inline", "csi": {"driver": DRIVER}},
        ]
        self.stats = CsiVolumeStats(
            self.node.root_dir, lambda: self.drivers, period, health, self.connect, self.clock
        )

    def connect(self, endpoint: str) -> FakeDriver:
        self.connected.append(endpoint)
        return self.driver

    def publish(self, name: str, handle: str, driver: str = DRIVER) -> Path:
        volume = self.node.root_dir / "pods" / UID / "volumes" / "kubernetes.io~csi" / name
        write(volume / "mount" / "big", "x" * 100_000)  # what a walk would count
        data = {"specVolID": name, "volumeHandle": handle, "driverName": driver}
        write(volume / "vol_data.json", json.dumps(data))
        return volume / "mount"

    def refresh(self) -> float:
        return self.stats.refresh([self.pod])

    def summary_volumes(self) -> dict[str, dict[str, Any]]:
        paths = self.node.provider(self.clock).paths
        provider = SummaryProvider(paths, self.node.reader(), clock=self.clock, csi=self.stats)
        [pod] = provider.raw_summary([self.pod])["pods"]
        return {v["name"]: v for v in pod.get("volume", [])}


@pytest.fixture
def bench(tmp_path: Path) -> Bench:
    return Bench(tmp_path)


def test_a_csi_volume_has_its_drivers_figures_never_a_walk(bench: Bench) -> None:
    target = bench.publish("data", "vol-1")
    bench.refresh()
    volumes = bench.summary_volumes()
    assert volumes["data"] == {
        "time": bench.clock.time(),
        "availableBytes": 700,
        "capacityBytes": 1000,
        "usedBytes": 300,
        "inodesFree": 90,
        "inodes": 100,
        "inodesUsed": 10,
        "name": "data",
        "pvcRef": {"name": "claim-1", "namespace": "default"},
        "volumeHealthStats": {"abnormal": False},
    }
    assert bench.driver.stats_calls() == [("NodeGetVolumeStats", "vol-1", str(target))]
    assert volumes["scratch"]["usedBytes"] >= 10000  # an emptyDir is still walked
    assert bench.connected == [SOCKET]


def test_pvc_ref_for_claims_and_generic_ephemeral_volumes_not_inline_ones(bench: Bench) -> None:
    bench.publish("data", "vol-1")
    bench.publish("cache", "vol-2")
    bench.publish("inline", "csi-abc")
    bench.refresh()
    volumes = bench.summary_volumes()
    assert volumes["data"]["pvcRef"] == {"name": "claim-1", "namespace": "default"}
    assert volumes["cache"]["pvcRef"] == {"name": "web-cache", "namespace": "default"}
    assert "pvcRef" not in volumes["inline"]
    assert claim_of(bench.pod, "scratch") is None


def test_measured_once_per_period_and_at_once_when_the_driver_changes(bench: Bench) -> None:
    bench.publish("data", "vol-1")
    due = bench.refresh()
    assert due == bench.clock.monotonic() + 60.0
    bench.clock.step(59)
    bench.driver.stats["vol-1"] = VolumeStats(capacity_bytes=2000)
    bench.refresh()
    assert len(bench.driver.stats_calls()) == 1
    assert bench.summary_volumes()["data"]["capacityBytes"] == 1000  # a minute's freshness
    bench.clock.step(1)
    bench.refresh()
    assert len(bench.driver.stats_calls()) == 2
    assert bench.summary_volumes()["data"]["capacityBytes"] == 2000
    assert bench.summary_volumes()["data"]["time"] == bench.clock.time()
    bench.drivers = {DRIVER: "/plugins/hostpath/csi-2.sock"}  # registered anew
    bench.refresh()
    assert len(bench.driver.stats_calls()) == 3
    assert bench.connected == [SOCKET, "/plugins/hostpath/csi-2.sock"]
    assert bench.driver.closed  # the old socket's client


def test_no_stats_without_a_registered_driver_with_get_volume_stats(bench: Bench) -> None:
    bench.publish("data", "vol-1")
    bench.publish("other", "vol-9", driver="other.csi.test")
    bench.drivers = {}
    bench.refresh()
    assert set(bench.summary_volumes()) == {"scratch"}
    assert bench.connected == []
    bench.drivers = {DRIVER: SOCKET}
    bench.driver.capabilities = frozenset({"STAGE_UNSTAGE_VOLUME"})
    bench.refresh()  # the driver came: measured at once, but it has no stats to give
    assert set(bench.summary_volumes()) == {"scratch"}
    assert bench.driver.calls == [("NodeGetCapabilities",)]


def test_a_volume_condition_only_with_the_gate_and_volume_condition(tmp_path: Path) -> None:
    bench = Bench(tmp_path, health=True)
    bench.publish("data", "vol-1")
    bench.driver.stats["vol-1"] = VolumeStats(abnormal=True, message="disk is failing")
    bench.refresh()
    assert bench.summary_volumes()["data"]["volumeHealthStats"] == {"abnormal": True}

    off = Bench(tmp_path / "off", health=False)  # gate CSIVolumeHealth off
    off.publish("data", "vol-1")
    off.refresh()
    assert "volumeHealthStats" not in off.summary_volumes()["data"]

    mute = Bench(tmp_path / "mute", health=True)
    mute.driver.capabilities = frozenset({"GET_VOLUME_STATS"})
    mute.publish("data", "vol-1")
    mute.refresh()
    assert "volumeHealthStats" not in mute.summary_volumes()["data"]


def test_a_failed_call_gives_no_stats_and_a_warning(
    bench: Bench, caplog: pytest.LogCaptureFixture
) -> None:
    bench.publish("data", "vol-1")
    bench.driver.fail = CsiError("NodeGetVolumeStats", "NOT_FOUND", "no volume vol-1")
    with caplog.at_level(logging.WARNING):
        bench.refresh()
    assert "data" not in bench.summary_volumes()
    assert "volume stats failed volume=data driver=hostpath.csi.pkletd.test" in caplog.text


def test_a_volume_gone_is_forgotten(bench: Bench) -> None:
    target = bench.publish("data", "vol-1")
    bench.refresh()
    (target.parent / "vol_data.json").unlink()
    bench.refresh()
    assert "data" not in bench.summary_volumes()
    assert bench.stats.claims() == []


def test_volume_stats_off_leaves_every_volume_out(bench: Bench) -> None:
    bench.publish("data", "vol-1")
    paths = bench.node.provider(bench.clock).paths
    provider = SummaryProvider(paths, bench.node.reader(), clock=bench.clock, csi=VolumeStatsOff())
    [pod] = provider.raw_summary([bench.pod])["pods"]
    assert "volume" not in pod
    assert bench.driver.calls == []


def test_without_a_source_csi_volumes_are_left_out_not_walked(bench: Bench) -> None:
    bench.publish("data", "vol-1")
    [pod] = bench.node.provider(bench.clock).raw_summary([bench.pod])["pods"]
    assert [v["name"] for v in pod["volume"]] == ["scratch"]
