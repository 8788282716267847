"""The sync loop's routing of PLEG events (a regression: an event the parent had
already seen must neither sync nor terminate a pod a source still wants)."""

from __future__ import annotations

from typing import Any

from pkletd.ipc.messages import PodLifecycleEvent
from pkletd.supervisor.pods import admission
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.podsync import SyncResult
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.syncloop import Parts, SyncLoop

from tests.unit_helpers import UID, container, make_pod, pod_dict, runtime, sandbox


class RecordingWorkers:
    """Stands in for PodWorkers: records which pods got work, runs nothing."""

    def __init__(self) -> None:
        self.updates: list[str] = []

    def update(self, uid: str, work: Any, urgent: bool = False) -> None:
        self.updates.append(uid)

    def busy(self, uid: str) -> bool:
        return False


def loop_with_running_pod() -> tuple[SyncLoop, RecordingWorkers, str]:
    pods = Pods("10.0.0.1", ["file"], ProbeResults())
    pods.set_source("file", [pod_dict("app")])
    pods.admit(UID)
    running = container(make_pod("app"))
    pods.record(SyncResult(UID, runtime(sandbox(), running)))
    workers = RecordingWorkers()
    node = admission.Node("n", 110, {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30})
    parts = Parts(
        runtime=None,  # type: ignore[arg-type]
        syncer=None,  # type: ignore[arg-type]
        pod_workers=workers,  # type: ignore[arg-type]
        pods=pods,
        probes=ProbeResults(),
        events=EventRecorder(),
        admitter=admission.Admitter(node),
        sync_frequency=60.0,
    )
    return SyncLoop(parts, lambda message: None), workers, running.id


def test_event_already_seen_does_nothing() -> None:
    loop, workers, cid = loop_with_running_pod()
    loop.on_lifecycle_event(PodLifecycleEvent(UID, "ContainerStarted", cid, "running"))
    assert workers.updates == []
    assert loop._pods.get(UID) is not None  # still wanted: not treated as an orphan


def test_new_fact_syncs_the_pod() -> None:
    loop, workers, cid = loop_with_running_pod()
    loop.on_lifecycle_event(PodLifecycleEvent(UID, "ContainerDied", cid, "exited"))
    assert workers.updates == [UID]
    assert UID not in loop._terminating
