"""PLEG's modes with fake streams, a fake runtime and a stepped clock: a subscription
proven by a relist, events read until the CRI shows them, the fallback to relisting and
the way back, back-off, and a runtime with no events API."""

from __future__ import annotations

import logging
import select
import time
from collections.abc import Iterator

import pytest
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import (
    SANDBOX_PREFIX,
    LifecycleEventType,
    Message,
    PlegMode,
    PlegModeChanged,
    PodForgotten,
    PodLifecycleEvent,
    PodStatusUpdated,
    RelistCompleted,
    Snapshot,
)
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.runtime.events import RuntimeEvent, Topic
from pkletd.ipc.wakeup import Inbox
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.workers.pleg import mode, settle
from pkletd.workers.pleg.subscriber import Item, Lost, Subscriber
from pkletd.workers.pleg.worker import Pleg

from tests.workers.pleg.pleg_fakes import (
    FakeSource,
    container,
    relists,
    sandbox,
    take_inbox,
)

PERIOD = 1.0
EXIT = Topic.TASK_EXIT
DELETE = Topic.CONTAINER_DELETE


class Rig:
    """A Pleg on fakes, past its first snapshot."""

    def __init__(self, events: bool = True, refusing: str = "") -> None:
        self.clock = FakeClock()
        self.runtime = FakeRuntime()
        self.runtime.sandboxes["s1"] = sandbox("s1", "ready", "uid-1")
        self.runtime.containers["c1"] = container("c1", "running", "uid-1")
        self.source = FakeSource()
        self.source.refusing = refusing
        self.bus = FakeSender()
        source = self.source if events else None
        self.pleg = Pleg(self.runtime, self.bus, PERIOD, source, self.clock)
        self.pleg.on_snapshot(Snapshot(0, [], {"c1": "running", SANDBOX_PREFIX + "s1": "ready"}))

    def tick(self) -> float:
        return self.pleg.tick(self.clock.mono)

    def step(self, seconds: float) -> float:
        self.clock.mono += seconds
        return self.tick()

    def evented(self) -> None:
        self.tick()
        assert self.modes() == [PlegMode.RELISTING, PlegMode.EVENTED]

    def modes(self) -> list[PlegMode]:
        return [m.mode for m in self.bus.sent if isinstance(m, PlegModeChanged)]

    def lifecycle(self) -> list[tuple[str, str, str, str]]:
        return [
            (m.pod_uid, m.event, m.object_id, m.state)
            for m in self.bus.sent
            if isinstance(m, PodLifecycleEvent)
        ]

    def wait_sent(self, wanted: type[Message], count: int = 1) -> None:
        deadline = time.monotonic() + 10
        while sum(isinstance(m, wanted) for m in self.bus.sent) < count:
            if time.monotonic() > deadline:
                raise AssertionError(f"no {wanted.__name__} sent: {self.bus.sent}")
            take_inbox(self.pleg)

    def close(self) -> None:
        self.pleg.close()


@pytest.fixture
def rig() -> Iterator[Rig]:
    made = Rig()
    yield made
    made.close()


def test_the_snapshot_tells_the_parent_pleg_relists_until_events_are_proven(rig: Rig) -> None:
    assert rig.bus.sent == [PlegModeChanged(PlegMode.RELISTING, mode.NOT_YET)]


def test_a_subscription_proven_by_a_relist_makes_pleg_evented(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    due = rig.tick()
    assert len(rig.source.streams) == 1
    kinds = [type(m) for m in rig.bus.sent]
    assert kinds == [PlegModeChanged, RelistCompleted, PlegModeChanged]
    assert rig.bus.sent[-1] == PlegModeChanged(PlegMode.EVENTED, "")
    assert due == pytest.approx(rig.clock.mono + mode.EVENTED_RELIST_S)
    assert "runtime events subscribed relist_period=300s" in caplog.text


def test_evented_pleg_relists_every_five_minutes_only(rig: Rig) -> None:
    rig.evented()
    lists = relists(rig.runtime)
    for _ in range(299):
        rig.step(1.0)
    assert relists(rig.runtime) == lists
    rig.step(1.0)
    assert relists(rig.runtime) == lists + 1


def test_an_exit_is_reported_once_the_cri_shows_it(rig: Rig) -> None:
    rig.evented()
    rig.source.streams[0].push(RuntimeEvent(EXIT, "c1"))
    take_inbox(rig.pleg)  # the CRI has not folded the exit in yet: still running
    assert rig.lifecycle() == []
    rig.runtime.containers["c1"] = container("c1", "exited", "uid-1")
    rig.step(settle.FIRST_DELAY_S)
    assert rig.lifecycle() == [("uid-1", LifecycleEventType.CONTAINER_DIED, "c1", "exited")]
    rig.step(1.0)
    assert len(rig.lifecycle()) == 1  # settled: not read again


def test_the_tasks_delete_reads_the_exit_again_at_once(rig: Rig) -> None:
    """containerd's CRI plugin deletes the task, then shows the exit: no delay waited."""
    rig.evented()
    rig.source.streams[0].push(RuntimeEvent(EXIT, "c1"))
    take_inbox(rig.pleg)
    rig.runtime.containers["c1"] = container("c1", "exited", "uid-1")
    rig.source.streams[0].push(RuntimeEvent(Topic.TASK_DELETE, "c1"))
    take_inbox(rig.pleg)
    assert rig.lifecycle() == [("uid-1", LifecycleEventType.CONTAINER_DIED, "c1", "exited")]


def test_an_outside_removal_is_reported_as_the_relist_would(rig: Rig) -> None:
    rig.evented()
    del rig.runtime.containers["c1"]
    rig.source.streams[0].push(RuntimeEvent(DELETE, "c1"))
    take_inbox(rig.pleg)
    assert rig.lifecycle() == [
        ("uid-1", LifecycleEventType.CONTAINER_DIED, "c1", "exited"),
        ("uid-1", LifecycleEventType.CONTAINER_REMOVED, "c1", ""),
    ]


def test_a_sandbox_exit_is_a_sandbox_change(rig: Rig) -> None:
    rig.evented()
    rig.runtime.sandboxes["s1"] = sandbox("s1", "notready", "uid-1")
    rig.source.streams[0].push(RuntimeEvent(EXIT, "s1"))
    take_inbox(rig.pleg)
    assert rig.lifecycle() == [("uid-1", LifecycleEventType.SANDBOX_CHANGED, "s1", "notready")]


def test_a_container_started_since_the_last_relist_is_read_with_its_pod(rig: Rig) -> None:
    rig.evented()
    rig.pleg.on_broadcast(PodStatusUpdated({}, {"c2": "running"}))
    rig.runtime.containers["c2"] = container("c2", "exited", "uid-2")
    rig.source.streams[0].push(RuntimeEvent(EXIT, "c2"))
    take_inbox(rig.pleg)
    assert rig.lifecycle() == [("uid-2", LifecycleEventType.CONTAINER_DIED, "c2", "exited")]


def test_a_forgotten_pods_removals_are_no_news(rig: Rig) -> None:
    """Reported after the parent forgot the pod, they would make an orphan of it again."""
    rig.evented()
    known = {"c1": "exited", SANDBOX_PREFIX + "s1": "notready"}
    rig.pleg.on_broadcast(PodStatusUpdated({"metadata": {"uid": "uid-1"}}, known))
    rig.pleg.on_broadcast(PodForgotten(PodUID("uid-1")))
    rig.runtime.containers.clear()
    rig.runtime.sandboxes.clear()
    rig.source.streams[0].push(RuntimeEvent(DELETE, "s1"))
    take_inbox(rig.pleg)
    rig.step(mode.EVENTED_RELIST_S)
    assert rig.lifecycle() == []


def test_an_object_that_never_shows_the_change_is_left_to_the_relist(rig: Rig) -> None:
    rig.evented()
    rig.source.streams[0].push(RuntimeEvent(EXIT, "c1"))
    take_inbox(rig.pleg)
    due = rig.step(settle.SETTLE_S + 1)
    assert rig.lifecycle() == []
    assert due == pytest.approx(rig.clock.mono - settle.SETTLE_S - 1 + mode.EVENTED_RELIST_S)


def test_a_lost_stream_falls_back_at_once_and_comes_back(
    rig: Rig, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO)
    rig.evented()
    rig.bus.take()
    rig.runtime.containers["c1"] = container("c1", "exited", "uid-1")  # while the stream broke
    rig.source.streams[0].end("UNAVAILABLE", "connection reset")
    rig.wait_sent(PlegModeChanged)
    assert [type(m) for m in rig.bus.sent] == [PodLifecycleEvent, RelistCompleted, PlegModeChanged]
    assert rig.bus.sent[-1] == PlegModeChanged(PlegMode.RELISTING, "UNAVAILABLE: connection reset")
    assert "falling back to relisting period=1s reason=UNAVAILABLE" in caplog.text
    assert rig.step(0.5) == pytest.approx(rig.clock.mono + 0.5)  # the next relist, at 1 s
    rig.step(mode.RESUBSCRIBE_MIN_S - 0.5)
    assert len(rig.source.streams) == 2
    assert rig.modes()[-1] is PlegMode.EVENTED
    assert "runtime events back relist_period=300s" in caplog.text


def test_a_runtime_without_events_is_relisted_every_period_and_asked_again_later(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO)
    rig = Rig(refusing="UNIMPLEMENTED")
    try:
        rig.tick()
        rig.wait_sent(RelistCompleted)
        take_inbox(rig.pleg)
        assert rig.modes() == [PlegMode.RELISTING]
        attempts = [rig.clock.mono]
        for _ in range(40):
            rig.step(0.5)
            if len(rig.source.streams) > len(attempts):
                attempts.append(rig.clock.mono)
                take_inbox(rig.pleg)
        gaps = [b - a for a, b in zip(attempts, attempts[1:], strict=False)]
        assert gaps == [1.0, 2.0, 4.0, 8.0]
        relists = sum(isinstance(m, RelistCompleted) for m in rig.bus.sent)
        assert relists == 21  # one a second, and the first
        assert caplog.text.count("falling back to relisting") == 1
        assert "reason=UNIMPLEMENTED: unknown service" in caplog.text
        assert rig.modes() == [PlegMode.RELISTING]
    finally:
        rig.close()


def test_the_back_off_starts_over_after_a_subscription_that_lasted(rig: Rig) -> None:
    rig.evented()
    rig.step(mode.STABLE_S)
    rig.source.streams[0].end("UNAVAILABLE", "gone")
    rig.wait_sent(PlegModeChanged, 3)
    rig.step(mode.RESUBSCRIBE_MIN_S)
    assert len(rig.source.streams) == 2
    rig.source.streams[1].end("UNAVAILABLE", "gone again")  # a short-lived one: it doubles
    rig.wait_sent(PlegModeChanged, 5)
    rig.step(mode.RESUBSCRIBE_MIN_S)
    assert len(rig.source.streams) == 2
    rig.step(mode.RESUBSCRIBE_MIN_S)
    assert len(rig.source.streams) == 3


def test_a_stopped_streams_end_is_old_news() -> None:
    inbox: Inbox[Item] = Inbox()
    source = FakeSource()
    subscriber = Subscriber(source, inbox)
    try:
        subscriber.start()
        assert subscriber.open()
        subscriber.stop()  # cancelled: its thread still says it ended
        lost = wait_lost(inbox)
        assert lost.why == "CANCELLED: Locally cancelled by application!"
        assert not subscriber.current(lost) and not subscriber.open()
        subscriber.start()
        source.streams[1].end("UNAVAILABLE", "gone")
        assert subscriber.current(wait_lost(inbox))
    finally:
        subscriber.close()
        inbox.close()
    assert source.closed


def wait_lost(inbox: Inbox[Item]) -> Lost:
    readable, _, _ = select.select([inbox.fileno()], [], [], 10)
    assert readable, "the stream's end never reached the inbox"
    (lost,) = inbox.take()
    assert isinstance(lost, Lost)
    return lost


def test_closing_pleg_ends_its_stream_and_clients(rig: Rig) -> None:
    rig.evented()
    rig.pleg.close()
    assert rig.source.closed and rig.runtime.closed


def test_with_events_off_pleg_only_relists(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.INFO)
    rig = Rig(events=False)
    try:
        assert rig.bus.sent == [PlegModeChanged(PlegMode.RELISTING, mode.OFF)]
        assert rig.tick() == pytest.approx(rig.clock.mono + PERIOD)
        assert rig.step(PERIOD) == pytest.approx(rig.clock.mono + PERIOD)
        assert relists(rig.runtime) == 2 and rig.source.streams == []
        assert "runtime events off; relisting period=1s" in caplog.text
    finally:
        rig.close()
