"""A housekeeping pass: the figures of every stats endpoint read at once, usageNanoCores
between two passes, the runtime asked once, the volumes and logs walked once a minute."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.nodestats.summary import format_times, rfc3339

from tests.ipc.nodestats.nodestats_helpers import (
    CID,
    POD_CGROUP,
    UID,
    FakeStatsRuntime,
    Node,
    api_pod,
    write,
)


@pytest.fixture
def node(tmp_path: Path) -> Node:
    return Node(tmp_path).standard()


def only_pod(summary: dict[str, Any] | None) -> dict[str, Any]:
    assert summary is not None
    [pod] = summary["pods"]
    return pod


def scratch(pod: dict[str, Any]) -> dict[str, Any]:
    [volume] = [v for v in pod["volume"] if v["name"] == "scratch"]
    return volume


def test_usage_nano_cores_is_the_rate_between_two_housekeeping_samples(node: Node) -> None:
    clock = FakeClock()
    housekeeping = node.housekeeping(clock)
    first = housekeeping.gather([api_pod()])
    assert "usageNanoCores" not in only_pod(first.summary)["cpu"]
    clock.step(10)
    node.set_cpu(POD_CGROUP, 2_000_000_000 + 5_000_000_000)  # half a core for 10 s
    second = housekeeping.gather([api_pod()])
    cpu = only_pod(second.summary)["cpu"]
    assert cpu["usageNanoCores"] == 500_000_000
    assert cpu["time"] == second.time == first.time + 10  # the sample's own time


def test_one_pass_asks_the_runtime_once_for_the_summary_and_cadvisors_rows(node: Node) -> None:
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    gathered = node.housekeeping(FakeClock(), runtime).gather([api_pod()])
    assert sorted(runtime.calls) == ["ImageFsInfo", "ListContainerStats"]
    assert only_pod(gathered.summary)["containers"][0]["rootfs"]["usedBytes"] == 4096
    assert gathered.rows is not None
    [container] = [r for r in gathered.rows if r.labels[0] == "app"]
    assert container.layer is not None and container.layer.used_bytes == 4096


def test_volumes_and_logs_are_walked_once_a_minute_with_the_walks_time(node: Node) -> None:
    clock = FakeClock()
    housekeeping = node.housekeeping(clock, du_period_s=60.0)
    walked = scratch(only_pod(housekeeping.gather([api_pod()]).summary))
    volume = node.root_dir / "pods" / UID / "volumes" / "kubernetes.io~empty-dir" / "scratch"
    write(volume / "more", "y" * 100_000)
    clock.step(30)
    later = only_pod(housekeeping.gather([api_pod()]).summary)
    kept = ("usedBytes", "inodesUsed", "time")  # the walk's, with its time, not the pass's
    assert [scratch(later)[k] for k in kept] == [walked[k] for k in kept]
    assert later["cpu"]["time"] == walked["time"] + 30
    clock.step(30)
    again = scratch(only_pod(housekeeping.gather([api_pod()]).summary))
    assert again["usedBytes"] >= walked["usedBytes"] + 100_000
    assert format_times(again)["time"] == rfc3339(walked["time"] + 60)


def test_a_pod_gone_is_left_out_of_the_next_pass(node: Node) -> None:
    housekeeping = node.housekeeping(FakeClock())
    assert only_pod(housekeeping.gather([api_pod()]).summary)["podRef"]["uid"] == UID
    gathered = housekeeping.gather([])
    assert gathered.summary is not None and gathered.summary["pods"] == []


def test_a_failing_runtime_is_one_warning_not_one_per_pass(
    node: Node, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="pkletd.ipc.nodestats.housekeeping")
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    housekeeping = node.housekeeping(FakeClock(), runtime)
    runtime.fail = True  # ImageFsInfo fails, ListContainerStats answers
    failed = housekeeping.gather([api_pod()])
    assert failed.summary is not None and "runtime" not in failed.summary["node"]
    assert only_pod(failed.summary)["containers"][0]["rootfs"]["usedBytes"] == 4096
    runtime.fail = True
    housekeeping.gather([api_pod()])
    answered = housekeeping.gather([api_pod()])
    assert answered.summary is not None and "imageFs" in answered.summary["node"]["runtime"]
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("housekeeping")]
    assert len(lines) == 2
    assert lines[0].startswith("runtime stats failed error=ImageFsInfo")
    assert lines[1] == "runtime stats answered again"
