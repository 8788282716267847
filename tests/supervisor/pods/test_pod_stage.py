"""The pod state machine, as the book drives it: admission, rejection, deadline, removal,
orphans, and a pod that comes back while it terminates."""

from __future__ import annotations

import pytest
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.clock import FakeClock
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.stage import PodLifecycle, PodStage
from pkletd.supervisor.pods.types import Failure, PodRuntime, SyncResult

from tests.supervisor.pods.unit_helpers import UID, pod_dict


def book() -> Pods:
    pods = Pods("10.0.0.1", ["file"], ProbeResults())
    pods.set_source("file", [pod_dict("app")])
    return pods


def test_a_pod_goes_new_active_terminating_terminated() -> None:
    pods = book()
    assert pods.stage(UID) is PodStage.NEW
    pods.admit(UID)
    assert pods.stage(UID) is PodStage.ACTIVE and pods.admitted(UID)
    pods.set_source("file", [])
    assert pods.stage(UID) is PodStage.TERMINATING and pods.terminating(UID)
    assert pods.forget(UID)
    assert pods.stage(UID) is None


def test_a_rejected_pod_is_failed_and_never_admitted() -> None:
    pods = book()
    api = pods.reject(UID, "OutOfcpu", "Node didn't have enough resource: cpu")
    assert pods.stage(UID) is PodStage.REJECTED and not pods.admitted(UID)
    assert api is not None and api["status"]["phase"] == "Failed"
    assert api["status"]["reason"] == "OutOfcpu"
    assert pods.active() == []


def test_deadline_fails_an_active_pod_once() -> None:
    pods = book()
    pods.admit(UID)
    assert pods.kill_grace(UID) is None
    assert pods.fail(UID, Failure("DeadlineExceeded", "too long"), 7)
    assert not pods.fail(UID, Failure("DeadlineExceeded", "too long"), 3)
    assert pods.stage(UID) is PodStage.FAILED and pods.admitted(UID)
    assert pods.kill_grace(UID) == 7


def test_a_failed_pod_is_stopped_once_a_kill_sync_is_recorded() -> None:
    pods = book()
    pods.admit(UID)
    pods.fail(UID, Failure("Terminated", "shutting down", disruption=True), 5)
    pods.record(SyncResult(UID, PodRuntime(UID)))  # a sync that began before the failure
    assert not pods.stopped(UID)
    api = pods.record(SyncResult(UID, PodRuntime(UID), killed=True))
    assert pods.stopped(UID)
    assert api is None  # the status was already Failed with its condition
    status = pods.api_pods()[0]["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Terminated")
    target = status["conditions"][-1]
    assert (target["type"], target["status"]) == ("DisruptionTarget", "True")
    assert (target["reason"], target["message"]) == ("TerminationByKubelet", "shutting down")
    pods.set_source("file", [])
    pods.forget(UID)
    assert pods.stopped(UID)  # gone


def test_an_orphan_terminates_with_no_pod() -> None:
    pods = book()
    orphan = PodUID("orphan-1")
    pods.orphaned(orphan)
    assert pods.terminating(orphan) and pods.get(orphan) is None
    assert pods.forget(orphan)
    assert not pods.terminating(orphan)


def test_a_pod_wanted_again_while_terminating_starts_over() -> None:
    pods = book()
    pods.admit(UID)
    pods.set_source("file", [])
    pods.set_source("file", [pod_dict("app")])
    assert pods.stage(UID) is PodStage.NEW
    assert not pods.forget(UID)  # the old termination ended; the new pod stays


def test_a_transition_outside_the_table_is_a_bug() -> None:
    lifecycle = PodLifecycle(UID, "default/web")
    with pytest.raises(AssertionError, match="new -> terminated"):
        lifecycle.become(PodStage.TERMINATED, "skipped a stage")


def test_each_change_is_stamped_and_logged(caplog: pytest.LogCaptureFixture) -> None:
    clock = FakeClock(wall=100.0)
    lifecycle = PodLifecycle(UID, "default/web", clock=clock)
    clock.wall = 105.0
    with caplog.at_level("INFO"):
        lifecycle.become(PodStage.ACTIVE, "admitted")
    assert lifecycle.since == 105.0
    assert "pod stage pod=default/web uid=uid-1 stage=active from=new why=admitted" in caplog.text
