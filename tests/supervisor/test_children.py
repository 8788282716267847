"""The worker state machine and restart policy, with a fake fork server and a fake clock."""

from __future__ import annotations

import itertools
import logging
import signal
from dataclasses import dataclass, field

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.supervisor import children
from pkletd.supervisor.children import Children, State, WorkerProcess

TIMEOUT = 5.0


@dataclass
class FakeSpawner:
    spawned: list[str] = field(default_factory=list)
    signals: list[tuple[int, int]] = field(default_factory=list)

    def spawn(self, name: str) -> None:
        self.spawned.append(name)

    def signal(self, pid: int, sig: int) -> None:
        self.signals.append((pid, sig))


@dataclass
class Fixture:
    kids: Children
    spawner: FakeSpawner
    clock: FakeClock
    ready: list[str]
    pids: itertools.count[int] = field(default_factory=lambda: itertools.count(100))

    def up(self, name: str) -> int:
        """The fork server reports the pending spawn of ``name``, and the worker says ready."""
        pid = next(self.pids)
        self.kids.spawned(name, pid)
        self.kids.ready(name, pid)
        return pid

    def advance(self, seconds: float) -> None:
        self.clock.mono += seconds
        self.kids.tick()

    def worker(self, name: str = "pleg") -> WorkerProcess:
        return self.kids.workers[name]

    def die_quickly(self, code: int = 1) -> float:
        """``pleg`` exits a second after it started; returns how long it must wait."""
        self.clock.mono += 1
        self.kids.exited(self.worker().pid, code)
        return self.worker().restart_at - self.clock.mono

    def respawn(self) -> int:
        """Let ``pleg``'s backoff run out exactly, and bring the new process up."""
        self.clock.mono = max(self.clock.mono, self.worker().restart_at)
        self.kids.tick()
        assert self.worker().state is State.STARTING
        return self.up("pleg")


def make(*names: str) -> Fixture:
    spawner, clock, ready = FakeSpawner(), FakeClock(mono=1000.0), list[str]()
    kids = Children(names, spawner, TIMEOUT, clock=clock, on_ready=ready.append)
    return Fixture(kids, spawner, clock, ready)


@pytest.fixture
def f() -> Fixture:
    return make("pleg", "http")


@pytest.fixture
def running() -> Fixture:
    """One worker, ``pleg``, started and ready."""
    f = make("pleg")
    f.kids.start_all()
    f.up("pleg")
    return f


def test_start_all_then_ready(f: Fixture) -> None:
    f.kids.start_all()
    assert f.spawner.spawned == ["pleg", "http"]
    assert {w.state for w in f.kids.workers.values()} == {State.STARTING}

    pid = f.up("pleg")
    assert (f.worker().state, f.worker().pid) == (State.RUNNING, pid)
    assert f.worker("http").state is State.STARTING
    assert f.ready == ["pleg"]


def test_ready_from_a_stale_pid_is_ignored(f: Fixture) -> None:
    f.kids.start_all()
    f.kids.spawned("pleg", 100)
    f.kids.ready("pleg", 99)
    assert f.worker().state is State.STARTING


def test_running_worker_that_dies_is_restarted_at_once(running: Fixture) -> None:
    f = running
    f.clock.mono += 60
    f.kids.exited(f.worker().pid, -signal.SIGKILL)
    assert f.worker().state is State.BACKOFF
    assert f.worker().last_exit == "killed by SIGKILL; not expected"

    f.kids.tick()
    assert f.worker().state is State.STARTING
    assert f.worker().restarts == 1
    assert f.spawner.spawned == ["pleg", "pleg"]


def test_quick_deaths_back_off_exponentially_and_flapping_is_reported(
    running: Fixture, caplog: pytest.LogCaptureFixture
) -> None:
    f = running
    delays = []
    for death in range(1, 13):
        delay = f.die_quickly()
        delays.append(round(delay, 3))
        flapping = [r for r in caplog.records if "worker flapping" in r.getMessage()]
        assert bool(flapping) == (death >= children.FLAP_COUNT)
        assert all(r.levelno == logging.ERROR for r in flapping)
        if delay:
            f.advance(delay / 2)
            assert f.worker().state is State.BACKOFF  # not before its time
        f.respawn()

    assert delays == [0, 0.1, 0.2, 0.4, 0.8, 1.6, 3.2, 6.4, 12.8, 25.6, 30, 30]
    assert f.worker().restarts == 12
    assert f.worker().last_exit == "exit status 1; not expected"


def test_a_stable_run_resets_the_backoff(running: Fixture) -> None:
    f = running
    for _ in range(3):
        f.die_quickly()
        f.respawn()
    f.clock.mono += children.STABLE_S
    f.kids.exited(f.worker().pid, 1)
    assert f.worker().restart_at == f.clock.mono


def test_silent_worker_is_killed_as_hung(running: Fixture) -> None:
    f = running
    pid = f.worker().pid
    f.advance(TIMEOUT - 1)
    f.kids.heartbeat("pleg", pid)
    f.advance(TIMEOUT - 1)
    assert f.spawner.signals == []
    assert f.kids.heartbeats_fresh()

    f.advance(1)
    assert f.spawner.signals == [(pid, signal.SIGKILL)]
    assert not f.kids.heartbeats_fresh()  # pleg is still RUNNING until it exits
    f.kids.exited(pid, -signal.SIGKILL)
    assert f.worker().last_exit == "killed by SIGKILL; not expected (heartbeat timeout)"
    f.kids.tick()
    assert f.worker().state is State.STARTING


def test_restart_terms_then_kills_after_grace_then_starts_again(running: Fixture) -> None:
    f = running
    pid = f.worker().pid
    f.kids.restart("pleg")
    assert f.spawner.signals == [(pid, signal.SIGTERM)]

    f.kids.heartbeat("pleg", pid)
    f.advance(children.STOP_GRACE_S - 0.5)
    assert f.spawner.signals == [(pid, signal.SIGTERM)]
    f.advance(0.5)
    assert f.spawner.signals == [(pid, signal.SIGTERM), (pid, signal.SIGKILL)]

    f.kids.exited(pid, -signal.SIGKILL)
    assert f.worker().last_exit == "killed by SIGKILL; expected (restart requested)"
    f.kids.tick()
    assert (f.worker().state, f.worker().restarts) == (State.STARTING, 1)
    assert f.spawner.spawned.count("pleg") == 2


def test_restart_of_a_worker_in_backoff_cuts_the_wait(running: Fixture) -> None:
    f = running
    f.die_quickly()
    f.respawn()
    assert f.die_quickly() > 0
    f.kids.restart("pleg")
    f.kids.tick()
    assert f.worker().state is State.STARTING


def test_stop_all_stops_everything_without_restarting(f: Fixture) -> None:
    f.kids.start_all()
    f.up("pleg")
    f.up("http")
    pids = [w.pid for w in f.kids.workers.values()]
    f.kids.stop_all()
    assert f.spawner.signals == [(pid, signal.SIGTERM) for pid in pids]
    assert not f.kids.all_stopped()

    for pid in pids:
        f.kids.exited(pid, 0)
    f.advance(60)
    assert f.kids.all_stopped()
    assert f.worker().last_exit == "exit status 0; expected (shutdown)"
    assert f.spawner.spawned == ["pleg", "http"]


def test_stop_all_while_a_worker_is_being_forked_stops_it_once_its_pid_is_known(
    f: Fixture,
) -> None:
    f.kids.start_all()
    f.up("pleg")
    f.kids.stop_all()
    f.kids.exited(f.worker().pid, 0)
    assert not f.kids.all_stopped()  # http is still being forked

    f.kids.spawned("http", 555)
    assert f.spawner.signals[-1] == (555, signal.SIGTERM)
    f.kids.exited(555, 0)
    assert f.kids.all_stopped()


def test_stop_all_stops_a_worker_waiting_in_backoff(running: Fixture) -> None:
    f = running
    f.die_quickly()
    f.respawn()
    assert f.die_quickly() > 0
    f.kids.stop_all()
    assert f.kids.all_stopped()
    f.advance(60)
    assert f.spawner.spawned == ["pleg", "pleg"]


def test_as_dict(running: Fixture) -> None:
    f = running
    f.clock.mono += 12.3456
    pid = f.worker().pid
    assert f.worker().as_dict(f.clock.mono) == {
        "name": "pleg",
        "pid": pid,
        "state": "running",
        "restarts": 0,
        "uptime_s": 12.346,
        "last_exit": "",
    }
    f.kids.exited(pid, 2)
    assert f.worker().as_dict(f.clock.mono) == {
        "name": "pleg",
        "pid": 0,
        "state": "backoff",
        "restarts": 0,
        "uptime_s": 0.0,
        "last_exit": "exit status 2; not expected",
    }


DISALLOWED = [(a, b) for a in State for b in State if b not in children._ALLOWED[a]]


@pytest.mark.parametrize(("before", "after"), DISALLOWED, ids=lambda s: s.value)
def test_transitions_not_in_the_table_raise(before: State, after: State) -> None:
    worker = WorkerProcess("pleg", state=before)
    with pytest.raises(AssertionError, match=f"{before.value} -> {after.value}"):
        worker._become(after, 0.0, "test")
