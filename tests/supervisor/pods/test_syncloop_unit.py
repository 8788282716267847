"""The sync loop's routing of PLEG events (a regression: an event the parent had
already seen must neither sync nor terminate a pod a source still wants)."""

from __future__ import annotations

import time
from pathlib import Path

from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.bus.messages import (
    LifecycleEventType,
    Message,
    PodLifecycleEvent,
    PodsListed,
    PodStatusUpdated,
)
from pkletd.ipc.runtime.cri import ContainerState, CriError, SandboxState
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.podsync import FAILED_STEP_RETRY_S
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.syncloop import SyncLoop
from pkletd.supervisor.pods.types import SyncResult

from tests.supervisor.pods.unit_helpers import (
    UID,
    RecordingWorkers,
    container,
    make_pod,
    pod_dict,
    runtime,
    sandbox,
    sync_loop,
)


def loop_with_running_pod(tmp: Path) -> tuple[SyncLoop, RecordingWorkers, str]:
    pods = Pods("10.0.0.1", ["file"], ProbeResults())
    pods.set_source("file", [pod_dict("app")])
    pods.admit(UID)
    running = container(make_pod("app"))
    pods.record(SyncResult(UID, runtime(sandbox(), running)))
    workers = RecordingWorkers()
    return sync_loop(tmp, pods, workers), workers, running.id


def test_event_already_seen_does_nothing(tmp_path: Path) -> None:
    loop, workers, cid = loop_with_running_pod(tmp_path)
    loop.on_lifecycle_event(
        PodLifecycleEvent(UID, LifecycleEventType.CONTAINER_STARTED, cid, "running")
    )
    assert workers.updates == []
    assert loop._pods.get(UID) is not None  # still wanted: not treated as an orphan


def test_new_fact_syncs_the_pod(tmp_path: Path) -> None:
    loop, workers, cid = loop_with_running_pod(tmp_path)
    loop.on_lifecycle_event(
        PodLifecycleEvent(UID, LifecycleEventType.CONTAINER_DIED, cid, "exited")
    )
    assert workers.updates == [UID]
    assert not loop._pods.terminating(UID)


def test_a_removal_of_an_unwanted_pods_object_is_no_orphan(tmp_path: Path) -> None:
    """The last object of a pod just stopped and forgotten: a late event says it is gone,
    and nothing is left to terminate."""
    loop, workers, _ = loop_with_running_pod(tmp_path)
    loop.on_lifecycle_event(
        PodLifecycleEvent("gone-uid", LifecycleEventType.SANDBOX_CHANGED, "sb9", "")
    )
    assert workers.updates == [] and not loop._pods.terminating("gone-uid")


def test_a_live_object_of_an_unwanted_pod_is_an_orphan(tmp_path: Path) -> None:
    loop, workers, _ = loop_with_running_pod(tmp_path)
    loop.on_lifecycle_event(
        PodLifecycleEvent("gone-uid", LifecycleEventType.CONTAINER_DIED, "c9", "exited")
    )
    assert workers.updates == ["gone-uid"] and loop._pods.terminating("gone-uid")


def test_a_failed_termination_is_tried_again_after_the_back_off(tmp_path: Path) -> None:
    """A removed pod whose StopContainer failed (a shim that went away, say) is not left
    running: its termination runs again after the pod worker's back-off, as the
    kubelet's pod worker retries a failed syncTerminatingPod."""
    loop, workers, _ = loop_with_running_pod(tmp_path)
    loop.on_pods_listed(PodsListed(PodSource.FILE, []))
    assert workers.updates == [UID] and loop._pods.terminating(UID)
    loop.on_sync_done(UID, CriError("StopContainer", "c1", "UNKNOWN", "ttrpc: closed"))
    loop.run_requeues(time.monotonic() + FAILED_STEP_RETRY_S / 2)
    assert workers.updates == [UID]
    loop.run_requeues(time.monotonic() + FAILED_STEP_RETRY_S + 1)
    assert workers.updates == [UID, UID]


def test_a_pod_dir_left_with_no_pod_is_torn_down_on_the_second_pass(tmp_path: Path) -> None:
    """A pod deleted while pkletd was away left its dir (and maybe CSI volumes): found
    twice in a row with no pod and no sandbox, it is terminated, as an orphan."""
    loop, workers, _ = loop_with_running_pod(tmp_path)
    loop.on_pods_listed(PodsListed(PodSource.FILE, [pod_dict("app")]))
    left = tmp_path / "root" / "pods" / "gone-uid"
    left.mkdir(parents=True)
    (tmp_path / "root" / "pods" / UID).mkdir()
    workers.updates.clear()
    loop.housekeeping()
    assert workers.updates == []  # once could be a pod being made
    loop.housekeeping()
    assert workers.updates == ["gone-uid"] and loop._pods.terminating("gone-uid")


def test_a_pod_deleted_in_the_api_publishes_its_last_status_before_its_final_delete(
    tmp_path: Path,
) -> None:
    """As the kubelet's syncTerminatingPod and syncTerminatedPod set the status before the
    status manager may delete the pod: its stopped containers, and a terminal phase
    (every container succeeded: Succeeded, whatever the restart policy)."""
    published: list[Message] = []
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    pods.set_source("api", [pod_dict("app")])
    pods.admit(UID)
    pod = make_pod("app")
    pods.record(SyncResult(UID, runtime(sandbox(), container(pod))))
    loop = sync_loop(tmp_path, pods, RecordingWorkers(), publish=published.append)
    deleted = pod_dict("app")
    deleted["metadata"]["deletionTimestamp"] = "2026-12-07T10:00:00Z"
    loop.on_pods_listed(PodsListed(PodSource.API, [deleted]))
    stopped = container(pod, state=ContainerState.EXITED, exit_code=0)
    gone = runtime(sandbox(SandboxState.NOTREADY), stopped)
    loop.on_sync_done(UID, SyncResult(UID, gone, terminated=True))

    kinds = [type(m).__name__ for m in published]
    assert kinds == ["PodStatusUpdated", "PodForgotten", "PodTerminated"]
    last = published[0]
    assert isinstance(last, PodStatusUpdated)
    status = last.pod["status"]
    assert status["phase"] == "Succeeded"
    (app,) = status["containerStatuses"]
    assert app["state"]["terminated"]["exitCode"] == 0 and app["ready"] is False
