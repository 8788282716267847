"""Local storage limits in the eviction worker: which pods are over an emptyDir
``sizeLimit``, their ephemeral-storage limit or a container's, with the kubelet's exact
messages; and the rounds: only pods with limits are measured, a pod over one is reported
in ``EvictionNeeded.limits`` instead of any threshold eviction, and the worker then waits
for it as for any evicted pod."""

from __future__ import annotations

import select
from collections.abc import Iterable, Iterator
from fractions import Fraction
from typing import Any

import pytest
from pkletd.ipc.apimodel.quantity import Format
from pkletd.ipc.bus.messages import EvictionNeeded, PodStatusUpdated, Snapshot
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.clock import FakeClock
from pkletd.workers.eviction.localstorage import Limit, enforced, over_limits, pod_limit
from pkletd.workers.eviction.signals import Reading
from pkletd.workers.eviction.thresholds import Amount, Observation, Signal, Threshold
from pkletd.workers.eviction.worker import BUSY, EvictionWorker, Options, Phase

from tests.workers.eviction.test_eviction_worker import Signals

MI = 2**20
GI = 2**30
MEMORY = Threshold(Signal.MEMORY, Amount("1Gi"))
CALM = Reading({Signal.MEMORY: Observation(4 * GI, 8 * GI, 0.0)})
PRESSED = Reading({Signal.MEMORY: Observation(GI // 2, 8 * GI, 0.0)})


def container(name: str, limit: str | None = None, **fields: Any) -> dict[str, Any]:
    found: dict[str, Any] = {"name": name, "image": "busybox", **fields}
    if limit is not None:
        found["resources"] = {"limits": {"ephemeral-storage": limit}}
    return found


def spec(*containers: dict[str, Any], **fields: Any) -> dict[str, Any]:
    return {"containers": list(containers), **fields}


def scratch(size: str | None = None, medium: str = "") -> dict[str, Any]:
    empty_dir: dict[str, Any] = {"medium": medium} if medium else {}
    if size is not None:
        empty_dir["sizeLimit"] = size
    return {"name": "scratch", "emptyDir": empty_dir}


def stats(
    uid: str = "p",
    volumes: dict[str, int] | None = None,
    total: int = 0,
    **containers: tuple[int, int],  # name -> (rootfs, logs) bytes
) -> dict[str, Any]:
    return {
        "podRef": {"uid": uid, "name": uid, "namespace": "default"},
        "containers": [
            {"name": name, "rootfs": {"usedBytes": rootfs}, "logs": {"usedBytes": logs}}
            for name, (rootfs, logs) in containers.items()
        ],
        "volume": [{"name": n, "usedBytes": used} for n, used in (volumes or {}).items()],
        "ephemeral-storage": {"usedBytes": total},
    }


def messages(pod_spec: dict[str, Any], pod_stats: dict[str, Any], dedicated: bool = False) -> Any:
    return [
        (e["signal"], e["message"]) for e in over_limits([pod_stats], {"p": pod_spec}, dedicated)
    ]


# --- the decisions ---------------------------------------------------------------------


def test_an_emptydir_over_its_size_limit() -> None:
    pod = spec(container("app"), volumes=[scratch("1Mi")])
    assert messages(pod, stats(volumes={"scratch": MI + 4096})) == [
        ("emptydirfs.limit", 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". ')
    ]
    assert messages(pod, stats(volumes={"scratch": MI})) == []  # at the limit is not over
    assert messages(pod, stats()) == []  # not measured: not over
    assert (
        messages(spec(container("app"), volumes=[scratch("0")]), stats(volumes={"scratch": 1}))
        == []
    )


def test_a_memory_emptydir_is_checked_too() -> None:
    pod = spec(container("app"), volumes=[scratch("1M", medium="Memory")])
    assert messages(pod, stats(volumes={"scratch": 2 * MI})) == [
        ("emptydirfs.limit", 'Usage of EmptyDir volume "scratch" exceeds the limit "1M". ')
    ]


def test_the_pod_total_against_the_sum_of_its_containers_limits() -> None:
    pod = spec(container("app", "2Mi"), container("side", "2Mi"), volumes=[scratch()])
    over = stats(total=4 * MI + 1, app=(MI, 0), side=(0, 0), volumes={"scratch": 3 * MI})
    assert messages(pod, over) == [
        (
            "ephemeralpodfs.limit",
            "Pod ephemeral local storage usage exceeds the total limit of containers 4Mi. ",
        )
    ]
    assert messages(pod, stats(total=4 * MI, app=(MI, 0))) == []


def test_a_container_over_its_own_limit() -> None:
    pod = spec(container("app", "2Mi"), container("idle", "100Mi"))
    layer = stats(total=3 * MI, app=(3 * MI, 0), idle=(0, 0))
    expected = [
        (
            "ephemeralcontainerfs.limit",
            'Container app exceeded its local ephemeral storage limit "2Mi". ',
        )
    ]
    assert messages(pod, layer) == expected
    assert messages(pod, stats(total=3 * MI, app=(0, 3 * MI), idle=(0, 0))) == expected  # logs
    # on a dedicated image filesystem the writable layer is not the node's disk
    assert messages(pod, layer, dedicated=True) == []


def test_the_first_limit_exceeded_is_the_one_reported() -> None:
    pod = spec(container("app", "1Mi"), volumes=[scratch("1Mi")])
    over_all = stats(total=9 * MI, app=(4 * MI, 0), volumes={"scratch": 5 * MI})
    assert messages(pod, over_all)[0][0] == "emptydirfs.limit"
    over_pod_and_container = stats(total=9 * MI, app=(4 * MI, 0), volumes={"scratch": MI})
    assert messages(pod, over_pod_and_container)[0][0] == "ephemeralpodfs.limit"


def test_only_regular_containers_with_a_non_zero_limit_are_checked_alone() -> None:
    pod = spec(container("app", "0"), initContainers=[container("init", "1Mi")])
    assert messages(pod, stats(total=0, app=(5 * MI, 0), init=(5 * MI, 0))) == []


def test_quantities_print_as_the_api_prints_them() -> None:
    pod = spec(container("app", "1.5Mi"), container("idle", "2M"))
    assert messages(pod, stats(total=9 * MI)) == [
        (
            "ephemeralpodfs.limit",
            # the sum keeps the first term's format
            "Pod ephemeral local storage usage exceeds the total limit of containers 3572864. ",
        )
    ]
    alone = spec(container("app", "1.5Mi"), container("idle", "100Mi"))
    assert messages(alone, stats(total=2 * MI, app=(2 * MI, 0)))[0][1] == (
        'Container app exceeded its local ephemeral storage limit "1536Ki". '
    )


def test_the_pod_limit_counts_init_containers_sidecars_and_overhead() -> None:
    def limit(pod: dict[str, Any]) -> Fraction | None:
        found = pod_limit(pod)
        return found.amount if found is not None else None

    assert limit(spec(container("app"))) is None
    assert limit(spec(container("app", "1Mi"), container("other"))) == MI
    sidecar = container("proxy", "1Mi", restartPolicy="Always")
    big_init = container("setup", "8Mi")
    assert limit(spec(container("app", "2Mi"), initContainers=[sidecar])) == 3 * MI
    assert limit(spec(container("app", "2Mi"), initContainers=[big_init])) == 8 * MI
    assert limit(spec(container("app", "2Mi"), initContainers=[sidecar, big_init])) == 9 * MI
    overhead = {"ephemeral-storage": "1Mi"}
    assert limit(spec(container("app", "2Mi"), overhead=overhead)) == 3 * MI
    assert pod_limit(spec(container("app", "2Mi"))) == Limit(Fraction(2 * MI), Format.BINARY_SI)


def test_only_pods_with_limits_are_measured() -> None:
    assert enforced(spec(container("app", "1Mi")))
    assert enforced(spec(container("app"), volumes=[scratch("1Mi")]))
    assert enforced(spec(container("app"), initContainers=[container("setup", "1Mi")]))
    assert not enforced(spec(container("app"), volumes=[scratch()]))
    assert not enforced(spec(container("app", None)))


def test_a_pod_the_worker_holds_no_spec_of_is_skipped() -> None:
    assert over_limits([stats(total=9 * MI)], {}, False) == []


# --- the rounds ------------------------------------------------------------------------


class Usage:
    """A Summary of the pods asked about, from canned stats."""

    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods = {p["podRef"]["uid"]: p for p in pods}
        self.asked: list[list[str]] = []

    def raw_summary(self, pods: Iterable[Any], only_cpu_and_memory: bool = False) -> dict[str, Any]:
        uids = [p["metadata"]["uid"] for p in pods]
        self.asked.append(uids)
        return {"node": {}, "pods": [self.pods[u] for u in uids if u in self.pods]}


def api_pod(uid: str, pod_spec: dict[str, Any], phase: str = "Running", **meta: Any) -> Any:
    running = {"name": "app", "state": {"running": {}}}
    status = {"phase": phase, "containerStatuses": [running]}
    if phase == "Failed":
        status["reason"] = "Evicted"
    return {"metadata": {"uid": uid, "name": uid, **meta}, "spec": pod_spec, "status": status}


LIMITED = spec(container("app"), volumes=[scratch("1Mi")])


@pytest.fixture
def rig() -> Iterator[Any]:
    made: list[EvictionWorker] = []

    def make(
        signals: Signals, usage: Usage, *pods: Any, local_storage: bool = True
    ) -> tuple[EvictionWorker, FakeSender, FakeClock]:
        bus, clock = FakeSender(), FakeClock(mono=1000.0)
        options = Options((MEMORY,), 300.0, 10.0, local_storage)
        worker = EvictionWorker(bus, signals, usage, options, clock)
        worker.on_snapshot(Snapshot(0, list(pods), {}))
        made.append(worker)
        return worker, bus, clock

    yield make
    for worker in made:
        worker.close()


def settle(worker: EvictionWorker, clock: FakeClock) -> None:
    for _ in range(10):
        worker.tick(clock.mono)
        if worker._phase not in BUSY:
            return
        ready, _, _ = select.select(list(worker.fds()), [], [], 5.0)
        assert ready, "the worker's thread never answered"
        worker.on_readable(ready[0])
    raise AssertionError("the worker did not settle")


def test_a_pod_over_its_limit_is_reported_instead_of_a_threshold_eviction(rig: Any) -> None:
    usage = Usage(stats("full", volumes={"scratch": 2 * MI}), stats("calm"))
    pods = [api_pod("full", LIMITED), api_pod("calm", LIMITED), api_pod("free", spec())]
    worker, bus, clock = rig(Signals(PRESSED), usage, *pods)
    settle(worker, clock)
    assert usage.asked == [["full", "calm"]]  # not the pod without limits
    assert bus.kinds() == ["SignalsObserved", "EvictionNeeded"]  # no EvictionThresholdMet
    needed = bus.sent[1]
    assert isinstance(needed, EvictionNeeded)
    assert needed.limits == [
        {
            "uid": "full",
            "signal": "emptydirfs.limit",
            "message": 'Usage of EmptyDir volume "scratch" exceeds the limit "1Mi". ',
        }
    ]
    assert needed.pods == [] and needed.hard
    # the parent evicts it; the next round waits for its containers to stop
    worker.on_broadcast(PodStatusUpdated(api_pod("full", LIMITED, "Failed")))
    assert worker._phase is Phase.EVICTING
    assert worker.tick(clock.mono) == clock.mono + 30.0


def test_within_their_limits_the_round_goes_on_to_the_thresholds(rig: Any) -> None:
    usage = Usage(stats("calm", volumes={"scratch": MI // 2}))
    worker, bus, clock = rig(Signals(PRESSED), usage, api_pod("calm", LIMITED))
    settle(worker, clock)
    assert bus.kinds() == ["SignalsObserved", "EvictionThresholdMet", "EvictionNeeded"]
    needed = bus.sent[2]
    assert isinstance(needed, EvictionNeeded) and needed.limits == []
    assert needed.resource == "memory"


def test_a_quiet_round_measures_only_pods_with_limits(rig: Any) -> None:
    usage = Usage()
    worker, bus, clock = rig(Signals(CALM), usage, api_pod("free", spec()))
    settle(worker, clock)
    assert usage.asked == [] and bus.kinds() == ["SignalsObserved"]
    assert worker.tick(clock.mono) == clock.mono + 10.0


def test_finished_and_deleted_pods_are_not_measured(rig: Any) -> None:
    usage = Usage()
    done = api_pod("done", LIMITED, "Succeeded")
    going = api_pod("going", LIMITED, deletionTimestamp="2024-01-01T00:00:00Z")
    worker, _, clock = rig(Signals(CALM), usage, done, going, api_pod("live", LIMITED))
    settle(worker, clock)
    assert usage.asked == [["live"]]


def test_without_local_storage_capacity_isolation_nothing_is_measured(rig: Any) -> None:
    usage = Usage(stats("full", volumes={"scratch": 2 * MI}))
    worker, bus, clock = rig(Signals(CALM), usage, api_pod("full", LIMITED), local_storage=False)
    settle(worker, clock)
    assert usage.asked == [] and bus.kinds() == ["SignalsObserved"]


def test_a_critical_pod_over_its_limit_leaves_the_round_to_the_thresholds(rig: Any) -> None:
    usage = Usage(stats("static", volumes={"scratch": 2 * MI}))
    static = api_pod("static", LIMITED, annotations={"kubernetes.io/config.source": "file"})
    system = api_pod("system", {**LIMITED, "priorityClassName": "system-cluster-critical"})
    worker, bus, clock = rig(Signals(PRESSED), usage, static, system)
    settle(worker, clock)
    assert len(usage.asked) == 1  # the memory threshold's Summary: no limit is checked
    assert bus.kinds() == ["SignalsObserved", "EvictionThresholdMet", "EvictionNeeded"]
    needed = bus.sent[2]
    assert isinstance(needed, EvictionNeeded) and needed.resource == "memory"
