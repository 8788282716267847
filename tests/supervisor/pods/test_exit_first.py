"""Exit first: a container's exit PLEG reports (its exit code, finish time, OOM kill) is in
the pod's status, published, before the sync that reacts to it writes to the runtime
(the restart, the sandbox's stop); that sync's CRI read confirms it. The sync loop on
the fake runtime, its pod workers run by the test."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import (
    LifecycleEventType,
    Message,
    PodLifecycleEvent,
    PodsListed,
    PodStatusUpdated,
)
from pkletd.ipc.runtime.cri import ContainerID, ContainerState
from pkletd.supervisor.pods import admission
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podworkers import Work
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.types import SyncResult

from tests.supervisor.pods.unit_helpers import (
    SECOND,
    T0,
    UID,
    container,
    make_pod,
    pod_dict,
    runtime,
    sandbox,
    sync_loop,
)

WRITES = ("RunPodSandbox", "StopPodSandbox", "CreateContainer", "StartContainer", "StopContainer")
FINISHED = T0 + 7 * SECOND


class HeldWorkers:
    """Stands in for PodWorkers: holds each pod's latest work until the test runs it."""

    def __init__(self) -> None:
        self.held: dict[PodUID, Work] = {}

    def update(self, uid: PodUID, work: Work, urgent: bool = False) -> None:
        self.held[uid] = work

    def busy(self, uid: PodUID) -> bool:
        return uid in self.held


class Node:
    """A sync loop on the fake runtime; what it published, each with the runtime calls
    made by then."""

    def __init__(self, tmp: Path, images: tuple[str, ...] = ("busybox:1.36",)) -> None:
        self.runtime = FakeRuntime(images=images)
        self.workers = HeldWorkers()
        self.published: list[tuple[Message, int]] = []
        node = admission.Node("n", 110, {"cpu": 4000, "memory": 2**32, "ephemeral-storage": 2**32})
        pods = Pods("10.0.0.1", [PodSource.FILE], ProbeResults())
        self.loop = sync_loop(
            tmp,
            pods,
            self.workers,
            publish=self.publish,
            runtime=self.runtime,
            objects=ApiObjects(standalone=True),
            node=node,
        )

    def publish(self, message: Message) -> None:
        self.published.append((message, len(self.runtime.calls)))

    def run_syncs(self) -> None:
        while self.workers.held:
            uid, work = self.workers.held.popitem()
            self.loop.on_sync_done(uid, work())

    def statuses(self) -> list[tuple[dict[str, Any], int]]:
        """Each published container status of the pod, with the runtime calls made by then."""
        return [
            (m.pod["status"]["containerStatuses"][0], calls)
            for m, calls in self.published
            if isinstance(m, PodStatusUpdated)
        ]

    def start(self, **spec: Any) -> ContainerID:
        self.loop.on_pods_listed(PodsListed(PodSource.FILE, [pod_dict("app", **spec)]))
        self.run_syncs()
        (running,) = self.runtime.containers.values()
        return running.id


def died(cid: str, code: int, oom: bool = False) -> PodLifecycleEvent:
    return PodLifecycleEvent(
        UID, LifecycleEventType.CONTAINER_DIED, cid, "exited", code, FINISHED, oom
    )


def test_a_killed_containers_exit_is_published_before_its_restart_touches_the_runtime(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    cid = node.start()  # restartPolicy Always
    node.runtime.exit(cid, 137)
    killed_at = len(node.runtime.calls)
    node.loop.on_lifecycle_event(died(cid, 137))
    status, calls = node.statuses()[-1]
    assert status["state"] == {
        "terminated": {
            "exitCode": 137,
            "reason": "Error",
            "startedAt": status["state"]["terminated"]["startedAt"],
            "finishedAt": "2023-11-14T22:13:27Z",
            "containerID": f"containerd://{cid}",
        }
    }
    assert (status["restartCount"], status["ready"]) == (0, False)
    assert calls == killed_at  # published before the sync ran: no runtime call at all yet
    node.run_syncs()
    writes = [c.method for c in node.runtime.calls[killed_at:] if c.method in WRITES]
    assert writes == ["CreateContainer", "StartContainer"]  # the restart, after it
    restarted, _ = node.statuses()[-1]
    assert restarted["restartCount"] == 1 and "running" in restarted["state"]
    assert restarted["lastState"]["terminated"]["exitCode"] == 137


def test_under_never_the_exit_and_the_phase_come_before_the_sandbox_stops(
    tmp_path: Path,
) -> None:
    node = Node(tmp_path)
    cid = node.start(restartPolicy="Never")
    node.runtime.exit(cid, 0)
    node.loop.on_lifecycle_event(died(cid, 0))
    message, _ = node.published[-1]
    assert isinstance(message, PodStatusUpdated)
    assert message.pod["status"]["phase"] == "Succeeded"
    status = message.pod["status"]["containerStatuses"][0]
    assert status["state"]["terminated"]["reason"] == "Completed"
    assert "StopPodSandbox" not in node.runtime.methods()
    node.run_syncs()
    assert "StopPodSandbox" in node.runtime.methods()


def test_an_oom_kill_shows_as_oomkilled_at_once(tmp_path: Path) -> None:
    node = Node(tmp_path)
    cid = node.start(restartPolicy="Never")
    node.loop.on_lifecycle_event(died(cid, 137, oom=True))
    status, _ = node.statuses()[-1]
    assert status["state"]["terminated"]["reason"] == "OOMKilled"


def test_the_cri_read_that_follows_wins_where_it_differs(tmp_path: Path) -> None:
    node = Node(tmp_path)
    cid = node.start(restartPolicy="Never")
    node.runtime.exit(cid, 3)
    node.loop.on_lifecycle_event(died(cid, 2))
    shown, _ = node.statuses()[-1]
    assert shown["state"]["terminated"]["exitCode"] == 2
    node.run_syncs()
    confirmed, _ = node.statuses()[-1]
    assert confirmed["state"]["terminated"]["exitCode"] == 3


def test_a_death_with_no_exit_told_waits_for_the_sync(tmp_path: Path) -> None:
    """A container removed before PLEG could read it: nothing to show until the CRI read."""
    node = Node(tmp_path)
    cid = node.start()
    before = len(node.published)
    node.loop.on_lifecycle_event(
        PodLifecycleEvent(UID, LifecycleEventType.CONTAINER_DIED, cid, "exited")
    )
    assert len(node.published) == before and UID in node.workers.held


def test_a_read_made_before_the_exit_does_not_bring_the_container_back(tmp_path: Path) -> None:
    """A sync already under way when the exit came read the container running: the exit
    stays in the status until a read shows it."""
    pods = Pods("10.0.0.1", [PodSource.FILE], ProbeResults())
    pods.set_source(PodSource.FILE, [pod_dict("app")])
    pods.admit(UID)
    running = container(make_pod("app"))
    pods.record(SyncResult(UID, runtime(sandbox(), running)))
    assert pods.exited(UID, died(running.id, 137)) is not None
    assert pods.record(SyncResult(UID, runtime(sandbox(), running))) is None  # no change
    api = pods.api_pods()[0]
    assert api["status"]["containerStatuses"][0]["state"]["terminated"]["exitCode"] == 137
    assert pods.objects(UID)[running.id] == ContainerState.EXITED.value
