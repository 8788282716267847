"""The parent's node shutdown: groups by priority, each pod's grace, group after group as
pods stop or periods pass (a stepped clock), admission closed, the release asked once,
a cancellation, and the state file the kubelet keeps."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel.podspec import Pod, PodUID, parse_pod
from pkletd.ipc.apimodel.priority import SYSTEM_CRITICAL
from pkletd.ipc.clock import FakeClock
from pkletd.supervisor.cli import format_status
from pkletd.supervisor.node import shutdownplan
from pkletd.supervisor.node.shutdown import REFUSED, TERMINATED, NodeShutdown, ShutdownStage
from pkletd.supervisor.node.shutdownplan import Group
from pkletd.supervisor.node.shutdownstate import ShutdownTimes, StateFile
from pkletd.supervisor.pods.admission import Rejection
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.types import Failure


def pod(name: str, grace: int = 30, **spec: Any) -> Pod:
    return parse_pod(
        {
            "metadata": {"name": name, "uid": f"uid-{name}"},
            "spec": {
                "terminationGracePeriodSeconds": grace,
                "containers": [{"name": "c", "image": "busybox"}],
                **spec,
            },
        }
    )


class FakePods:
    """``PodStopper``: records what the shutdown asked; a test says which pods stopped."""

    def __init__(self, pods: list[Pod]) -> None:
        self.pods = pods
        self.failed: list[tuple[str, Failure, int]] = []
        self.stopped: set[PodUID] = set()
        self.refusal: Rejection | None = None

    def active_pods(self) -> list[Pod]:
        return list(self.pods)

    def fail_pod(self, pod: Pod, failure: Failure, grace_s: int) -> None:
        self.failed.append((pod.name, failure, grace_s))

    def pod_stopped(self, uid: PodUID) -> bool:
        return uid in self.stopped

    def refuse_pods(self, refusal: Rejection | None) -> None:
        self.refusal = refusal


def manager(
    tmp_path: Path, pods: FakePods, plan: tuple[Group, ...], clock: FakeClock
) -> NodeShutdown:
    return NodeShutdown(plan, pods, StateFile(tmp_path), EventRecorder(), "n1", clock)


def test_the_migrated_groups_and_who_belongs_where() -> None:
    plan = shutdownplan.groups(30, 10, ())
    assert plan == (Group(0, 20), Group(SYSTEM_CRITICAL, 10))
    assert shutdownplan.requested_s(plan) == 30
    assert shutdownplan.groups(0, 0, ()) == ()
    by = shutdownplan.groups(0, 0, ((100, 5), (-10, 3), (1000, 7)))
    assert [g.priority for g in by] == [-10, 100, 1000]
    assert [shutdownplan.group_of(by, p) for p in (-50, -10, 0, 100, 999, 5000)] == [
        0,
        0,
        0,
        1,
        1,
        2,
    ]
    regular, critical = pod("a"), pod("b", priorityClassName="system-node-critical")
    assert shutdownplan.assign(plan, [critical, regular]) == [[regular], [critical]]
    assert shutdownplan.pod_grace(pod("short", grace=3), plan[0]) == 3
    assert shutdownplan.pod_grace(pod("long", grace=60), plan[0]) == 20


def test_groups_go_in_order_as_their_pods_stop_or_their_periods_pass(tmp_path: Path) -> None:
    regular, quick = pod("regular"), pod("quick", grace=2)
    critical = pod("critical", priority=SYSTEM_CRITICAL)
    pods = FakePods([critical, regular, quick])
    clock = FakeClock(mono=100.0, wall=1_700_000_000)
    shutdown = manager(tmp_path, pods, shutdownplan.groups(30, 10, ()), clock)
    shutdown.started()
    assert shutdown.stage is ShutdownStage.STOPPING and pods.refusal is REFUSED
    assert pods.failed == [("regular", TERMINATED, 20), ("quick", TERMINATED, 2)]
    assert shutdown.tick(clock.mono) == 120.0  # waiting for the regular group
    pods.stopped = {regular.uid, quick.uid}
    clock.mono = 105.0
    assert shutdown.tick(clock.mono) == 115.0  # the critical group began, with its 10 s
    assert pods.failed[-1] == ("critical", TERMINATED, 10)
    assert not shutdown.take_release()
    clock.mono = 115.0  # the critical pod never stopped: its period is over
    assert shutdown.tick(clock.mono) == float("inf")
    assert shutdown.done and shutdown.take_release() and not shutdown.take_release()
    assert pods.refusal is REFUSED  # the node stays shut to new pods
    assert TERMINATED.reason == "Terminated" and TERMINATED.disruption
    assert TERMINATED.message == "Pod was terminated in response to imminent node shutdown."
    assert REFUSED.message == "Pod was rejected as the node is shutting down."


def test_empty_groups_are_skipped_and_no_pods_release_at_once(tmp_path: Path) -> None:
    pods = FakePods([])
    shutdown = manager(
        tmp_path, pods, shutdownplan.groups(30, 10, ()), FakeClock(mono=100.0, wall=1_700_000_000)
    )
    shutdown.started()
    assert shutdown.done and shutdown.take_release()


def test_a_cancellation_admits_again_and_stops_no_further_group(tmp_path: Path) -> None:
    regular, critical = pod("regular"), pod("critical", priority=SYSTEM_CRITICAL)
    pods = FakePods([regular, critical])
    clock = FakeClock(mono=100.0, wall=1_700_000_000)
    shutdown = manager(tmp_path, pods, shutdownplan.groups(30, 10, ()), clock)
    shutdown.started()
    shutdown.started()  # said twice (a restarted worker): one shutdown
    shutdown.cancelled()
    assert shutdown.stage is ShutdownStage.IDLE and pods.refusal is None
    clock.mono = 200.0
    shutdown.tick(clock.mono)
    assert [name for name, _, _ in pods.failed] == ["regular"]
    assert not shutdown.take_release()


def test_the_state_file_says_when_the_last_shutdown_started_and_ended(tmp_path: Path) -> None:
    shutdown = manager(
        tmp_path,
        FakePods([]),
        shutdownplan.groups(30, 10, ()),
        FakeClock(mono=100.0, wall=1_700_000_000),
    )
    shutdown.started()
    doc = json.loads((tmp_path / "graceful_node_shutdown_state").read_text())
    assert doc == {"startTime": "2023-11-14T22:13:20Z", "endTime": "2023-11-14T22:13:20Z"}
    again = StateFile(tmp_path).load()
    assert again == ShutdownTimes(1_700_000_000, 1_700_000_000)
    gauges = {f["name"]: f["series"][0]["value"] for f in shutdown.families()}
    assert gauges["kubelet_graceful_shutdown_start_time_seconds"] == 1_700_000_000


def test_a_file_the_kubelet_wrote_is_read_and_a_bad_one_is_nothing(tmp_path: Path) -> None:
    path = tmp_path / "graceful_node_shutdown_state"
    path.write_text(
        '{"startTime":"2024-05-01T12:00:00.123456789+02:00","endTime":"0001-01-01T00:00:00Z"}'
    )
    times = StateFile(tmp_path).load()
    assert times.end == 0.0 and abs(times.start - 1714557600.123456) < 1e-3
    path.write_text("not json")
    assert StateFile(tmp_path).load() == ShutdownTimes()


def test_pkletd_status_shows_the_shutdown_line() -> None:
    node = {"name": "n1", "joined": False}
    assert format_status({"node": node, "workers": [], "pods": []}).splitlines()[1] == ""
    node["shutdown"] = {
        "stage": "stopping",
        "grace_period_s": 30,
        "inhibitor_held": True,
        "inhibit_delay_max_s": 5.0,
        "error": "InhibitDelayMaxSec too short",
    }
    line = format_status({"node": node, "workers": [], "pods": []}).splitlines()[1]
    assert line == (
        "shutdown: stopping, delay lock held (logind allows 5s of the 30s grace period), "
        "error: InhibitDelayMaxSec too short"
    )
