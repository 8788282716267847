"""A container's death carries its exit, the same on containerd's events (the task's exit
event, ``/tasks/oom``) as relisting (CRI ContainerStatus): exit code, finish time, OOM
kill. Fakes for the stream and the runtime, a stepped clock."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from pkletd.ipc.bus.messages import SANDBOX_PREFIX, LifecycleEventType, PodLifecycleEvent, Snapshot
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.runtime.events import RuntimeEvent, TaskExited, Topic
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.workers.pleg.worker import Pleg

from tests.workers.pleg.pleg_fakes import FakeSource, container, sandbox, take_inbox

FINISHED = 1_700_000_123_456_789_012  # ns since the epoch
DIED = LifecycleEventType.CONTAINER_DIED


class ExitRig:
    """A Pleg past its first snapshot, one pod with container c1 running; on events
    (``evented``) or relisting every second."""

    def __init__(self, evented: bool) -> None:
        self.clock = FakeClock()
        self.runtime = FakeRuntime()
        self.runtime.sandboxes["s1"] = sandbox("s1", "ready", "uid-1")
        self.runtime.containers["c1"] = container("c1", "running", "uid-1")
        self.source = FakeSource()
        self.bus = FakeSender()
        self.pleg = Pleg(self.runtime, self.bus, 1.0, self.source if evented else None, self.clock)
        self.pleg.on_snapshot(Snapshot(0, [], {"c1": "running", SANDBOX_PREFIX + "s1": "ready"}))
        self.pleg.tick(self.clock.mono)  # evented: the subscription proven by a relist

    def push(self, topic: Topic, exited: TaskExited | None = None) -> None:
        self.source.streams[-1].push(RuntimeEvent(topic, "c1", exited))
        take_inbox(self.pleg)

    def cri_shows_exit(self, code: int, reason: str) -> None:
        self.runtime.containers["c1"] = container(
            "c1", "exited", "uid-1", exit_code=code, finished_at=FINISHED, reason=reason
        )

    def step(self, seconds: float) -> None:
        self.clock.mono += seconds
        self.pleg.tick(self.clock.mono)

    def died(self) -> list[PodLifecycleEvent]:
        return [m for m in self.bus.sent if isinstance(m, PodLifecycleEvent) and m.event is DIED]


@pytest.fixture
def evented() -> Iterator[ExitRig]:
    rig = ExitRig(evented=True)
    yield rig
    rig.pleg.close()


@pytest.fixture
def relisting() -> Iterator[ExitRig]:
    rig = ExitRig(evented=False)
    yield rig
    rig.pleg.close()


def expected(code: int, oom: bool = False) -> PodLifecycleEvent:
    return PodLifecycleEvent("uid-1", DIED, "c1", "exited", code, FINISHED, oom)


def kill_evented(rig: ExitRig, code: int, reason: str, oom: bool = False) -> None:
    """The events containerd sends for an exit, the CRI showing it before the task's
    delete; after ``/tasks/oom`` for an OOM kill."""
    if oom:
        rig.push(Topic.TASK_OOM)
    rig.push(Topic.TASK_EXIT, TaskExited(code, FINISHED))
    rig.cri_shows_exit(code, reason)
    rig.push(Topic.TASK_DELETE, TaskExited(code, FINISHED))


def kill_relisted(rig: ExitRig, code: int, reason: str) -> None:
    rig.cri_shows_exit(code, reason)
    rig.step(1.0)


@pytest.mark.parametrize(
    ("code", "reason", "oom"),
    [(137, "Error", False), (0, "Completed", False), (137, "OOMKilled", True)],
)
def test_both_ways_a_death_carries_the_same_exit(
    evented: ExitRig, relisting: ExitRig, code: int, reason: str, oom: bool
) -> None:
    kill_evented(evented, code, reason, oom)
    kill_relisted(relisting, code, reason)
    assert evented.died() == relisting.died() == [expected(code, oom)]


def test_on_events_the_exit_is_the_events_not_a_status_read(evented: ExitRig) -> None:
    kill_evented(evented, 137, "Error")
    assert evented.died() == [expected(137)]
    assert "ContainerStatus" not in evented.runtime.methods()


def test_an_exit_told_before_the_cri_shows_it_waits_for_the_read_that_does(
    evented: ExitRig,
) -> None:
    evented.push(Topic.TASK_EXIT, TaskExited(2, FINISHED))
    assert evented.died() == []  # the CRI still shows it running
    evented.cri_shows_exit(2, "Error")
    evented.step(0.005)
    assert evented.died() == [expected(2)]


def test_an_exit_whose_event_was_missed_is_read_from_the_cri(evented: ExitRig) -> None:
    """The 5-minute relist catches it: ContainerStatus tells its exit."""
    evented.cri_shows_exit(1, "Error")
    evented.step(300.0)
    assert evented.died() == [expected(1)]


def test_a_container_gone_before_it_was_read_dies_with_no_exit(relisting: ExitRig) -> None:
    del relisting.runtime.containers["c1"]
    relisting.step(1.0)
    assert relisting.died() == [PodLifecycleEvent("uid-1", DIED, "c1", "exited")]


def test_an_oom_kill_of_a_process_that_leaves_the_container_running_is_no_event(
    evented: ExitRig,
) -> None:
    evented.push(Topic.TASK_OOM)
    evented.step(1.0)
    assert evented.died() == []
    assert evented.runtime.methods().count("ListContainers") == 1  # the proving relist only


def test_after_the_tasks_delete_the_exit_is_read_soon_after_the_cri_shows_it(
    evented: ExitRig,
) -> None:
    """The CRI plugin records the exit after it deleted the task, 80 ms later on a loaded
    machine: read every 20 ms at most meanwhile, not after a doubling delay."""
    evented.push(Topic.TASK_EXIT, TaskExited(137, FINISHED))
    start = evented.clock.mono
    evented.push(Topic.TASK_DELETE, TaskExited(137, FINISHED))
    shown_at = start + 0.16  # doubling delays would read at 0.155 s, then 0.315 s
    due = evented.pleg.tick(evented.clock.mono)
    while not evented.died() and evented.clock.mono < start + 1.0:
        evented.clock.mono = due  # the next read
        if evented.clock.mono >= shown_at:
            evented.cri_shows_exit(137, "Error")
        due = evented.pleg.tick(evented.clock.mono)
    assert evented.died() == [expected(137)]
    assert evented.clock.mono - shown_at <= 0.020 + 1e-9
