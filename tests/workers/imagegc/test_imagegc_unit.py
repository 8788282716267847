"""The image-gc worker's decisions on a fake runtime: which dead containers, sandboxes,
pod log dirs and images it proposes, and when it collects."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import (
    GarbageFound,
    GarbageKind,
    PodForgotten,
    PodStatusUpdated,
    ReclaimRequested,
    Snapshot,
)
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.nodestats.fsusage import FsCapacity
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.workers.imagegc.containers import ContainerCollector, pod_uid_of
from pkletd.workers.imagegc.images import INVALID_CAPACITY, RECLAIM_ALL, ImageCollector
from pkletd.workers.imagegc.options import ContainerPolicy, ImagePolicy, Options
from pkletd.workers.imagegc.worker import GarbageWorker

from tests.gc_helpers import IMAGE, run_pod

HOUR_NS = 3600 * 10**9
LATER_NS = 1_800_000_000 * 10**9  # well after every fake creation time


def disk(capacity: int, available: int) -> Any:
    return lambda path: FsCapacity(capacity, available, capacity - available, 100, 50)


def containers_of(found: GarbageFound) -> list[str]:
    return [c["id"] for c in found.containers]


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime()


def collect(runtime: FakeRuntime, logs: Path, known: set[str], **policy: Any) -> GarbageFound:
    collector = ContainerCollector(
        runtime, ContainerPolicy(**policy), logs, FakeClock(wall=LATER_NS / 10**9)
    )
    return collector.collect(known)


# --- dead containers ----------------------------------------------------------------------


def test_dead_instances_beyond_max_per_pod_container_go_oldest_first(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    made = web.instances(5)  # four dead, the newest running
    assert containers_of(collect(runtime, tmp_path, {"u1"}, max_per_pod_container=2)) == made[:2]
    assert containers_of(collect(runtime, tmp_path, {"u1"}, max_per_pod_container=1)) == made[:3]
    assert containers_of(collect(runtime, tmp_path, {"u1"}, max_per_pod_container=-1)) == []


def test_young_dead_containers_stay_under_a_minimum_age(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    web.instances(3)
    collector = ContainerCollector(
        runtime, ContainerPolicy(min_age_s=3600), tmp_path, FakeClock(wall=LATER_NS / 10**9)
    )
    assert len(collector.collect({"u1"}).containers) == 1
    young = ContainerCollector(
        runtime,
        ContainerPolicy(min_age_s=3600),
        tmp_path,
        FakeClock(wall=(LATER_NS - 10**18) / 10**9),
    )
    assert young.collect({"u1"}).containers == []


def test_a_gone_pod_loses_every_dead_container(runtime: FakeRuntime, tmp_path: Path) -> None:
    web = run_pod(runtime, tmp_path, "gone")
    made = web.instances(3, last_runs=False)
    found = collect(runtime, tmp_path, known=set())
    assert containers_of(found) == made
    assert {c["pod_uid"] for c in found.containers} == {"gone"}
    assert {c["name"] for c in found.containers} == {"app"}


def test_max_containers_cuts_every_unit_to_a_share_then_the_oldest(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    first = run_pod(runtime, tmp_path, "u1", "first").instances(4, last_runs=False)
    second = run_pod(runtime, tmp_path, "u2", "second").instances(1, last_runs=False)
    known = {"u1", "u2"}
    found = collect(runtime, tmp_path, known, max_per_pod_container=-1, max_containers=2)
    assert containers_of(found) == first[:3]  # a share of 1 each: 2 left, within the limit
    found = collect(runtime, tmp_path, known, max_per_pod_container=-1, max_containers=1)
    assert containers_of(found) == first  # the share leaves 2; then the older of those goes
    assert second[0] not in containers_of(found)  # the newest of all stays


# --- sandboxes and log dirs --------------------------------------------------------------


def test_the_newest_sandbox_of_a_live_pod_stays(runtime: FakeRuntime, tmp_path: Path) -> None:
    web = run_pod(runtime, tmp_path, "u1")
    old = web.sandbox
    web.instances(2, last_runs=False)  # in the old sandbox: its dead instances
    new = web.new_sandbox(1)
    web.instances(1)
    found = collect(runtime, tmp_path, {"u1"}, max_per_pod_container=0)
    assert [s["id"] for s in found.sandboxes] == [old]  # emptied by this collection
    kept = collect(runtime, tmp_path, {"u1"}, max_per_pod_container=5)
    assert kept.sandboxes == []  # its dead containers stay, so does the sandbox
    runtime.stop_sandbox(new)
    gone = collect(runtime, tmp_path, set(), max_per_pod_container=5)
    assert {s["id"] for s in gone.sandboxes} == {old, new}


def test_log_dirs_of_gone_pods_with_nothing_running(runtime: FakeRuntime, tmp_path: Path) -> None:
    live = run_pod(runtime, tmp_path, "u1", "live")
    live.instances(1)
    orphan = run_pod(runtime, tmp_path, "u2", "orphan")  # no pod, but a ready sandbox
    orphan.instances(1)
    (tmp_path / "default_dead_u3" / "app").mkdir(parents=True)
    (tmp_path / "not-a-pod-dir").mkdir()
    (tmp_path / "default_stray_u4").write_text("a file, not a dir")
    found = collect(runtime, tmp_path, {"u1"})
    assert found.log_dirs == [{"name": "default_dead_u3", "pod_uid": "u3"}]
    runtime.stop_sandbox(orphan.sandbox)
    found = collect(runtime, tmp_path, {"u1"})
    assert [d["name"] for d in found.log_dirs] == ["default_dead_u3", "default_orphan_u2"]


def test_pod_uid_of_a_log_dir_name() -> None:
    assert pod_uid_of("default_web-node-a_0123abcd") == "0123abcd"
    assert pod_uid_of("kube-system_x_6c1b2f0e-1d2c-4e5f-8a9b-0c1d2e3f4a5b") == (
        "6c1b2f0e-1d2c-4e5f-8a9b-0c1d2e3f4a5b"
    )
    for name in ("lost+found", "a_b", "a__c", "a_b_c_d", "_b_c"):
        assert pod_uid_of(name) == ""


def test_a_runtime_that_cannot_list_is_the_collections_error(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    runtime.fail("ListPodSandbox", "UNAVAILABLE", "connection refused")
    found = collect(runtime, tmp_path, set())
    assert found.error == "rpc error: code = Unavailable desc = connection refused"
    assert found.containers == found.sandboxes == found.log_dirs == []


# --- images ------------------------------------------------------------------------------


def images_runtime(tmp_path: Path) -> FakeRuntime:
    """Images: two unused, one a running container uses, one a dead container uses, the
    sandbox image and a pinned one."""
    runtime = FakeRuntime(images={"old:1", "older:1", "pause:1", "pinned:1"})
    runtime.sandbox_image_name = "pause:1"
    runtime.pinned = {"pinned:1"}
    run_pod(runtime, tmp_path, "u1", "running", images=("running:1",)).instances(1)
    run_pod(runtime, tmp_path, "u2", "dead", images=("dead:1",)).instances(1, last_runs=False)
    return runtime


def image_ids(found: GarbageFound) -> list[str]:
    return [i["id"] for i in found.images]


def test_over_the_high_threshold_unused_images_are_proposed(tmp_path: Path) -> None:
    runtime = images_runtime(tmp_path)
    policy = ImagePolicy(high_threshold_percent=85, low_threshold_percent=80, min_age_s=0)
    found = ImageCollector(runtime, policy, disk(1000, 100), FakeClock(mono=1000.0)).collect()
    assert found.collection is GarbageKind.IMAGES and found.error == ""
    assert sorted(image_ids(found)) == ["sha256:old:1", "sha256:older:1"]
    assert found.wanted_bytes == 1000 * 20 // 100 - 100  # down to 80%
    assert found.image_fs == {"capacity_bytes": 1000, "available_bytes": 100, "usage_percent": 90}
    under = ImageCollector(runtime, policy, disk(1000, 200), FakeClock(mono=1000.0)).collect()
    assert under.images == [] and under.wanted_bytes == 0  # 80% used: under 85%


def remove_containers(runtime: FakeRuntime, uid: str) -> None:
    for container in [c for c in runtime.containers.values() if c.pod_uid == uid]:
        runtime.remove_container(container.id)


def test_least_recently_used_first_never_used_before_all(tmp_path: Path) -> None:
    runtime = images_runtime(tmp_path)
    clock = FakeClock(mono=1000.0)
    collector = ImageCollector(runtime, ImagePolicy(min_age_s=0), disk(100, 1), clock)
    collector.collect()  # dead:1 and running:1 in use
    remove_containers(runtime, "u2")
    clock.mono += 60
    collector.collect()  # running:1 still in use, a minute later
    remove_containers(runtime, "u1")
    clock.mono += 60
    found = image_ids(collector.collect())
    assert set(found[:2]) == {"sha256:old:1", "sha256:older:1"}  # never used
    assert found[2:] == ["sha256:dead:1", "sha256:running:1"]


def test_images_younger_than_the_minimum_age_stay(tmp_path: Path) -> None:
    runtime = images_runtime(tmp_path)
    clock = FakeClock(mono=1000.0)
    collector = ImageCollector(runtime, ImagePolicy(min_age_s=120), disk(100, 1), clock)
    assert collector.collect().images == []  # first detected now
    clock.mono += 119
    assert collector.collect().images == []
    clock.mono += 1
    assert sorted(image_ids(collector.collect())) == ["sha256:old:1", "sha256:older:1"]


def test_images_unused_past_the_maximum_age_expire_whatever_the_usage(tmp_path: Path) -> None:
    runtime = images_runtime(tmp_path)
    clock = FakeClock(mono=1000.0)
    policy = ImagePolicy(min_age_s=10, max_age_s=100)
    collector = ImageCollector(runtime, policy, disk(100, 90), clock)  # 10% used
    assert collector.collect().images == []
    clock.mono += 100
    assert collector.collect().images == []  # not yet running for longer than the max age
    clock.mono += 1
    found = collector.collect()
    assert found.wanted_bytes == 0
    assert all(i["expired"] for i in found.images)
    assert sorted(image_ids(found)) == ["sha256:old:1", "sha256:older:1"]


def test_a_reclaim_asks_for_every_unused_image_old_enough(tmp_path: Path) -> None:
    runtime = images_runtime(tmp_path)
    collector = ImageCollector(
        runtime, ImagePolicy(min_age_s=0), disk(100, 90), FakeClock(mono=1000.0)
    )
    found = collector.collect(reclaim=True)
    assert found.reclaim and found.wanted_bytes == RECLAIM_ALL
    assert sorted(image_ids(found)) == ["sha256:old:1", "sha256:older:1"]


def test_an_image_filesystem_of_no_capacity_is_an_error(tmp_path: Path) -> None:
    runtime = images_runtime(tmp_path)
    found = ImageCollector(
        runtime, ImagePolicy(min_age_s=0), disk(0, 0), FakeClock(mono=1000.0)
    ).collect()
    assert found.error == INVALID_CAPACITY and found.images == []


# --- the worker's loop -------------------------------------------------------------------


def found(bus: FakeSender) -> list[GarbageFound]:
    """What the worker sent: GarbageFound, and nothing else."""
    assert all(isinstance(m, GarbageFound) for m in bus.sent), bus.kinds()
    return bus.of_type(GarbageFound)


def worker(tmp_path: Path, **images: Any) -> tuple[GarbageWorker, FakeSender, FakeRuntime]:
    runtime = FakeRuntime(images={IMAGE})
    options = Options("unix:///fake", 1.0, tmp_path, ImagePolicy(**images))
    bus = FakeSender()
    collectors = (
        ImageCollector(runtime, options.images, disk(100, 50)),
        ContainerCollector(runtime, options.containers, tmp_path),
    )
    return GarbageWorker(bus, *collectors, options), bus, runtime


def api_pod(uid: str) -> dict[str, Any]:
    return {"metadata": {"uid": uid, "name": "p", "namespace": "default"}}


def test_the_worker_collects_at_once_then_each_period(tmp_path: Path) -> None:
    gc, bus, _ = worker(tmp_path)
    gc.on_snapshot(Snapshot(0, [], {}))
    due = gc.tick(100.0)
    assert [f.collection for f in found(bus)] == [GarbageKind.CONTAINERS, GarbageKind.IMAGES]
    assert due == 160.0  # the container GC's minute comes first
    gc.tick(159.0)
    assert len(found(bus)) == 2
    gc.tick(160.0)
    assert [f.collection for f in found(bus)[2:]] == [GarbageKind.CONTAINERS]
    gc.tick(400.0)
    assert [f.collection for f in found(bus)[3:]] == [GarbageKind.CONTAINERS, GarbageKind.IMAGES]


def test_a_reclaim_collects_both_at_once(tmp_path: Path) -> None:
    gc, bus, _ = worker(tmp_path)
    gc.on_snapshot(Snapshot(0, [], {}))
    gc.tick(100.0)
    gc.on_broadcast(ReclaimRequested("DiskPressure"))
    gc.tick(101.0)
    assert [(f.collection, f.reclaim) for f in found(bus)[2:]] == [
        (GarbageKind.CONTAINERS, True),
        (GarbageKind.IMAGES, True),
    ]


def test_no_image_gc_at_a_high_threshold_of_100(tmp_path: Path) -> None:
    gc, bus, _ = worker(tmp_path, high_threshold_percent=100, low_threshold_percent=80)
    gc.on_snapshot(Snapshot(0, [], {}))
    assert gc.tick(100.0) == 160.0
    assert [f.collection for f in found(bus)] == [GarbageKind.CONTAINERS]


def test_the_pods_the_parent_has_are_not_gone(tmp_path: Path) -> None:
    gc, bus, runtime = worker(tmp_path)
    kept = run_pod(runtime, tmp_path, "u1")
    kept.instances(1, last_runs=False)
    added = run_pod(runtime, tmp_path, "u2", "added")
    added.instances(1, last_runs=False)
    gc.on_snapshot(Snapshot(0, [api_pod("u1")], {}))
    gc.on_broadcast(PodStatusUpdated(api_pod("u2")))
    gc.tick(0.0)
    assert found(bus)[0].containers == []  # both known: their one dead instance stays
    gc.on_broadcast(PodForgotten(PodUID("u2")))
    gc.tick(60.0)
    assert [c["pod_uid"] for c in found(bus)[-1].containers] == ["u2"]
