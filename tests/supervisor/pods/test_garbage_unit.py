"""The parent's side of garbage collection on a fake runtime: what its book keeps of the
image-gc worker's candidates (the one-writer rule), how the remover carries the rest out,
and what the collector reports (status, the kubelet's node events, GarbageCollected)."""

from __future__ import annotations

import select
from collections.abc import Iterator
from pathlib import Path

import pytest
from pkletd.ipc.bus.messages import (
    DeadContainer,
    DeadSandbox,
    GarbageCollected,
    GarbageFound,
    GarbageKind,
    ImageFsUsage,
    Message,
    PodLogDir,
    ReclaimRequested,
    UnusedImage,
)
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.garbage import GarbageCollector, Thresholds
from pkletd.supervisor.pods.garbagecheck import GarbageCheck
from pkletd.supervisor.pods.garbageremover import GarbageRemover, Removal
from pkletd.supervisor.pods.inspector import PodInspector
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.types import SyncResult

from tests.gc_helpers import FakePod, pod_raw, run_pod

CONTAINERS, IMAGES = GarbageKind.CONTAINERS, GarbageKind.IMAGES


class Book:
    """The parent's book of pods, kept from a fake runtime as the pod workers keep it."""

    def __init__(self, runtime: FakeRuntime) -> None:
        self.runtime = runtime
        self.pods = Pods("10.0.0.1", ["file"], ProbeResults())
        self.busy: set[str] = set()
        self.check = GarbageCheck(self.pods, lambda uid: uid in self.busy)

    def source(self, *pods: FakePod) -> None:
        self.pods.set_source("file", [pod_raw(p.pod.uid, p.pod.name) for p in pods])
        for p in pods:
            self.pods.admit(p.pod.uid)
            self.synced(p)

    def synced(self, pod: FakePod) -> None:
        state = PodInspector(self.runtime).inspect(pod.pod.uid)
        self.pods.record(SyncResult(pod.pod.uid, state))


def dead(uid: str, *container_ids: str) -> list[DeadContainer]:
    return [DeadContainer(id=c, pod_uid=uid, name="app") for c in container_ids]


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime()


# --- the check ------------------------------------------------------------------------------


def test_a_live_pod_keeps_what_its_status_shows(runtime: FakeRuntime, tmp_path: Path) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    made = web.instances(4)  # three dead, the newest running
    book = Book(runtime)
    book.source(web)
    offered = dead("u1", *made)
    assert [c["id"] for c in book.check.containers(offered)] == made[:2]  # not lastState
    runtime.exit(runtime.containers[made[3]].id, 1)  # it died: now it is lastState
    book.synced(web)
    assert [c["id"] for c in book.check.containers(offered)] == made[:3]


def test_a_container_the_book_has_not_seen_stays(runtime: FakeRuntime, tmp_path: Path) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    book = Book(runtime)
    book.source(web)
    made = web.instances(3)  # after the book's last sync
    assert book.check.containers(dead("u1", *made)) == []


def test_a_pod_under_way_keeps_everything(runtime: FakeRuntime, tmp_path: Path) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    made = web.instances(3)
    book = Book(runtime)
    book.source(web)
    book.busy.add("u1")
    assert book.check.containers(dead("u1", *made)) == []
    book.busy.clear()
    book.pods.set_source("file", [])  # removed: terminating until its termination ends
    assert book.check.containers(dead("u1", *made)) == []


def test_a_gone_pod_goes_once_every_source_has_spoken(runtime: FakeRuntime, tmp_path: Path) -> None:
    gone = run_pod(runtime, tmp_path, "gone")
    made = gone.instances(2, last_runs=False)
    book = Book(runtime)
    offered = dead("gone", *made)
    directory = [PodLogDir(name="default_web_gone", pod_uid="gone")]
    assert book.check.containers(offered) == [] and book.check.log_dirs(directory) == []
    book.source()  # the file source spoke: it has no such pod
    assert book.check.containers(offered) == offered
    assert book.check.log_dirs(directory) == directory


def test_a_live_pod_keeps_its_newest_sandbox_and_any_holding_a_container(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    first = web.sandbox
    web.instances(1, last_runs=False)  # lastState, in the first sandbox
    second = web.new_sandbox(1)
    third = web.new_sandbox(2)
    web.instances(1)
    book = Book(runtime)
    book.source(web)
    offered = [DeadSandbox(id=s, pod_uid="u1") for s in (first, second, third)]
    assert [s["id"] for s in book.check.sandboxes(offered)] == [second]


def test_the_images_the_pods_name(runtime: FakeRuntime, tmp_path: Path) -> None:
    web = run_pod(runtime, tmp_path, "u1", images=("busybox:1.36",))
    web.instances(1)
    book = Book(runtime)
    book.source(web)
    assert book.check.image_users() == {"busybox:1.36", "sha256:busybox:1.36"}


# --- the remover ------------------------------------------------------------------------------


def removed(
    remover: GarbageRemover, found: GarbageFound, users: frozenset[str] = frozenset()
) -> Removal:
    remover.submit(found, users)
    assert select.select([remover.fileno()], [], [], 10)[0], "no removal within 10 s"
    (removal,) = remover.completed()
    return removal


@pytest.fixture
def remover(runtime: FakeRuntime, tmp_path: Path) -> Iterator[GarbageRemover]:
    made = GarbageRemover(runtime, tmp_path)
    yield made
    made.close()


def test_dead_containers_go_with_their_log_files(
    runtime: FakeRuntime, remover: GarbageRemover, tmp_path: Path
) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    made = web.instances(3)
    logs = [Path(runtime.log_paths[runtime.containers[c].id]) for c in made]
    rotated = logs[0].with_name(logs[0].name + ".20240101-000000.gz")
    rotated.write_text("rotated")
    found = GarbageFound(CONTAINERS, containers=dead("u1", *made, "vanished"))
    removal = removed(remover, found)
    assert removal.containers == 2 and removal.errors == []
    assert list(runtime.containers) == [made[2]]  # the running one was not what was offered
    assert [p.exists() for p in logs] == [False, False, True] and not rotated.exists()


def test_only_a_stopped_empty_sandbox_goes(
    runtime: FakeRuntime, remover: GarbageRemover, tmp_path: Path
) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    first = web.sandbox
    web.instances(1, last_runs=False)
    second = web.new_sandbox(1)
    empty = web.new_sandbox(2)
    web.new_sandbox(3)
    offered = [DeadSandbox(id=s, pod_uid="u1") for s in (first, second, empty, web.sandbox)]
    removal = removed(remover, GarbageFound(CONTAINERS, sandboxes=offered))
    assert removal.sandboxes == 2  # the second and the empty one; first holds a container
    assert set(runtime.sandboxes) == {first, web.sandbox}


def test_only_a_pods_own_log_dir_goes(remover: GarbageRemover, tmp_path: Path) -> None:
    (tmp_path / "default_web_u9" / "app").mkdir(parents=True)
    (tmp_path / "outside").mkdir()
    offered = [
        PodLogDir(name="default_web_u9", pod_uid="u9"),
        PodLogDir(name="default_web_u8", pod_uid="u9"),  # not the pod it names
        PodLogDir(name="..", pod_uid="u9"),
        PodLogDir(name="outside", pod_uid="outside"),
    ]
    removal = removed(remover, GarbageFound(CONTAINERS, log_dirs=offered))
    assert removal.log_dirs == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["outside"]


def image(name: str, size: int = 100, expired: bool = False) -> UnusedImage:
    return UnusedImage(id=f"sha256:{name}", size=size, expired=expired)


def test_images_go_until_enough_is_freed_expired_ones_whatever(
    runtime: FakeRuntime, remover: GarbageRemover, tmp_path: Path
) -> None:
    runtime.images.update({"a", "b", "c", "d", "used", "named"})
    run_pod(runtime, tmp_path, "u1", images=("used",)).instances(1, last_runs=False)
    offered = [image("used"), image("named"), image("a"), image("b"), image("c")]
    offered.append(image("d", expired=True))
    found = GarbageFound(IMAGES, images=offered, wanted_bytes=250)
    removal = removed(remover, found, frozenset({"named"}))
    assert removal.images == 3 and removal.freed_bytes == 300  # d, then a and b
    assert sorted(runtime.images) == ["c", "named", "used"]


def test_a_failed_removal_is_told(
    runtime: FakeRuntime, remover: GarbageRemover, tmp_path: Path
) -> None:
    runtime.images.update({"a", "b"})
    runtime.fail("RemoveImage", "UNKNOWN", "image is in use by a snapshot")
    found = GarbageFound(IMAGES, images=[image("a"), image("b")], wanted_bytes=1000)
    removal = removed(remover, found)
    assert removal.images == 1 and removal.errors == ["image is in use by a snapshot"]


# --- the collector -----------------------------------------------------------------------


class Collector:
    def __init__(self, runtime: FakeRuntime, tmp: Path) -> None:
        self.book = Book(runtime)
        self.events = EventRecorder()
        self.published: list[Message] = []
        self.remover = GarbageRemover(runtime, tmp)
        self.gc = GarbageCollector(
            self.book.check,
            self.remover,
            self.events,
            "node1",
            Thresholds(85, 80),
            self.published.append,
        )

    def round(self, found: GarbageFound) -> GarbageCollected:
        self.gc.on_found(found)
        assert select.select([self.gc.fileno()], [], [], 10)[0], "no removal within 10 s"
        self.gc.on_removed()
        outcome = self.published[-1]
        assert isinstance(outcome, GarbageCollected)
        return outcome

    def reasons(self) -> list[str]:
        return [e["reason"] for e in self.events.recent()]


@pytest.fixture
def collector(runtime: FakeRuntime, tmp_path: Path) -> Iterator[Collector]:
    made = Collector(runtime, tmp_path)
    yield made
    made.gc.close()


FS = ImageFsUsage(capacity_bytes=10_000, available_bytes=500, usage_percent=95)


def test_freeing_too_little_is_an_event_and_twice_an_image_gc_failure(
    runtime: FakeRuntime, collector: Collector
) -> None:
    runtime.images.update({"a"})
    found = GarbageFound(IMAGES, images=[image("a")], wanted_bytes=7500, image_fs=FS)
    outcome = collector.round(found)
    message = (
        "Failed to garbage collect required amount of images. Attempted to free 7500 bytes, "
        "but only found 100 bytes eligible to free."
    )
    assert (outcome.images, outcome.freed_bytes, outcome.error) == (1, 100, message)
    assert collector.reasons() == ["FreeDiskSpaceFailed"]  # a first failure: no ImageGCFailed
    collector.round(GarbageFound(IMAGES, wanted_bytes=7500, image_fs=FS))
    assert collector.reasons() == ["FreeDiskSpaceFailed", "FreeDiskSpaceFailed", "ImageGCFailed"]
    event = collector.events.recent()[-1]
    assert event["type"] == "Warning" and event["object"] == "node1"
    status = collector.gc.status()
    assert status["image_fs"] == {
        **FS,
        "high_threshold_percent": 85,
        "low_threshold_percent": 80,
    }
    assert status["image_gc"]["images"] == 0 and status["image_gc"]["error"].startswith("Failed")
    assert status["container_gc"] is None


def test_a_reclaim_that_frees_less_is_no_failure(
    runtime: FakeRuntime, collector: Collector
) -> None:
    found = GarbageFound(IMAGES, reclaim=True, wanted_bytes=2**63 - 1, image_fs=FS)
    for _ in range(2):
        assert collector.round(found).error == ""
    assert collector.reasons() == []
    collector.gc.reclaim("DiskPressure")
    assert collector.published[-1] == ReclaimRequested("DiskPressure")


def test_a_container_collection_that_failed_is_an_event(collector: Collector) -> None:
    outcome = collector.round(GarbageFound(CONTAINERS, error="rpc error: code = Unavailable"))
    assert outcome.error == "rpc error: code = Unavailable"
    assert collector.reasons() == ["ContainerGCFailed"]
    assert collector.gc.status()["container_gc"]["error"] == "rpc error: code = Unavailable"


def test_kept_and_removed_are_counted(
    runtime: FakeRuntime, collector: Collector, tmp_path: Path
) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    made = web.instances(3)
    collector.book.source(web)
    outcome = collector.round(GarbageFound(CONTAINERS, containers=dead("u1", *made)))
    assert (outcome.containers, outcome.error) == (1, "")  # the oldest; lastState stays
    assert set(runtime.containers) == set(made[1:])
    assert collector.gc.status()["container_gc"]["containers"] == 1


def test_an_image_gc_failure_clears_once_a_round_succeeds(
    runtime: FakeRuntime, collector: Collector
) -> None:
    failing = GarbageFound(IMAGES, error="invalid capacity 0 on image filesystem", image_fs=None)
    collector.round(failing)
    collector.round(GarbageFound(IMAGES, image_fs=FS))
    collector.round(failing)
    assert collector.reasons() == []  # never twice in a row
    collector.round(failing)
    assert collector.reasons() == ["ImageGCFailed"]


def test_an_image_filesystem_of_no_capacity_is_an_event(collector: Collector) -> None:
    empty = ImageFsUsage(capacity_bytes=0, available_bytes=0, usage_percent=0)
    collector.round(
        GarbageFound(IMAGES, error="invalid capacity 0 on image filesystem", image_fs=empty)
    )
    assert collector.reasons() == ["InvalidDiskCapacity"]
