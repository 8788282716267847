"""Pod start-up latency as the kubelet's metrics report it: from first seen to Running,
from creation to every container running with and without the image pulls, and no
figure for a pod that was running before the parent saw it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, PodUID
from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.clock import FakeClock
from pkletd.supervisor.pods.podstartup import PodStartup
from pkletd.supervisor.pods.types import PodRuntime

from tests.supervisor.pods.unit_helpers import SECOND, UID, make_pod, sandbox

CREATED = 1_700_000_000.0  # the pod's creationTimestamp, 2023-11-14T22:13:20Z


def api_pod(phase: str, *states: str) -> dict[str, Any]:
    statuses = [{"name": f"c{i}", "state": {s: {}}} for i, s in enumerate(states)]
    return {"status": {"phase": phase, "containerStatuses": statuses}}


def created_pod(host_network: bool = False) -> Pod:
    pod = make_pod("app", hostNetwork=host_network)
    pod.raw["metadata"]["creationTimestamp"] = "2023-11-14T22:13:20Z"
    return pod


def with_sandbox_at(seconds: float) -> PodRuntime:
    made = dataclasses.replace(sandbox(), created_at=int(seconds * SECOND))
    return PodRuntime(PodUID(UID), (made,))


def observed(families: list[MetricFamily], name: str) -> dict[tuple[str, ...], float]:
    """Sum of observations by label values, of the histogram ``name``."""
    found = next(f for f in families if f["name"] == name)
    return {tuple(s["labels"]): s["value"] for s in found["series"]}


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=CREATED)


def test_the_sli_leaves_the_pulls_out_and_the_total_keeps_them(clock: FakeClock) -> None:
    startup = PodStartup(clock)
    clock.wall += 2.0  # the node sees the pod 2 s after it was created
    startup.seen(created_pod())
    uid = PodUID(UID)
    clock.wall += 1.0
    startup.pull_started(uid)
    clock.wall += 10.0
    startup.pull_finished(uid)
    clock.wall += 0.5
    startup.status(uid, api_pod("Pending", "waiting"), with_sandbox_at(clock.wall - 11))
    clock.wall += 0.5
    startup.status(uid, api_pod("Running", "running"), with_sandbox_at(clock.wall - 11.5))
    families = startup.families()
    assert observed(families, "kubelet_pod_start_duration_seconds") == {(): 12.0}
    assert observed(families, "kubelet_pod_start_total_duration_seconds") == {("true",): 14.0}
    assert observed(families, "kubelet_pod_start_sli_duration_seconds") == {("true",): 4.0}


def test_running_is_recorded_once_and_all_running_when_every_container_runs(
    clock: FakeClock,
) -> None:
    startup = PodStartup(clock)
    startup.seen(created_pod(host_network=True))
    uid = PodUID(UID)
    runtime = with_sandbox_at(clock.wall + 0.1)
    clock.wall += 1.0
    startup.status(uid, api_pod("Running", "running", "waiting"), runtime)
    clock.wall += 1.0
    startup.status(uid, api_pod("Running", "running", "waiting"), runtime)
    assert observed(startup.families(), "kubelet_pod_start_sli_duration_seconds") == {}
    clock.wall += 1.0
    startup.status(uid, api_pod("Running", "running", "running"), runtime)
    clock.wall += 1.0
    startup.status(uid, api_pod("Running", "running", "running"), runtime)
    families = startup.families()
    assert observed(families, "kubelet_pod_start_duration_seconds") == {(): 1.0}
    # on the host's network: not the first pod with a network of its own
    assert observed(families, "kubelet_pod_start_sli_duration_seconds") == {("",): 3.0}


def test_a_pod_running_before_the_parent_saw_it_is_not_a_start(clock: FakeClock) -> None:
    startup = PodStartup(clock)
    startup.seen(created_pod())
    clock.wall += 1.0
    startup.status(PodUID(UID), api_pod("Running", "running"), with_sandbox_at(CREATED - 60))
    families = startup.families()
    assert observed(families, "kubelet_pod_start_duration_seconds") == {}
    assert observed(families, "kubelet_pod_start_sli_duration_seconds") == {}


def test_a_static_pod_starts_when_first_seen(clock: FakeClock) -> None:
    startup = PodStartup(clock)
    clock.wall += 30.0
    startup.seen(make_pod("app"))  # no creationTimestamp
    clock.wall += 2.0
    startup.status(PodUID(UID), api_pod("Running", "running"), with_sandbox_at(clock.wall - 1))
    assert observed(startup.families(), "kubelet_pod_start_total_duration_seconds") == {
        ("true",): 2.0
    }


def test_a_pod_that_finished_or_was_forgotten_records_nothing(clock: FakeClock) -> None:
    startup = PodStartup(clock)
    uid = PodUID(UID)
    startup.seen(created_pod())
    startup.status(uid, api_pod("Failed", "terminated"), with_sandbox_at(clock.wall + 1))
    startup.status(uid, api_pod("Running", "running"), with_sandbox_at(clock.wall + 1))
    startup.seen(created_pod())
    startup.forget(uid)
    startup.status(uid, api_pod("Running", "running"), with_sandbox_at(clock.wall + 1))
    assert observed(startup.families(), "kubelet_pod_start_duration_seconds") == {}
