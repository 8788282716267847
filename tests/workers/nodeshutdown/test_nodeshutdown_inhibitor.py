"""The inhibitor against a fake logind: the lock taken and kept, the delay raised through
the drop-in (or the failure said), a shutdown and its release, a cancellation that takes
the lock again, a restarted session with a fresh lock, a shutdown found under way."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from pathlib import Path

import pytest
from pkletd.workers.nodeshutdown import dropin
from pkletd.workers.nodeshutdown.fakelogind import FakeLogind
from pkletd.workers.nodeshutdown.inhibitor import (
    Inhibitor,
    InhibitorOptions,
    LockState,
    Signalled,
)
from pkletd.workers.nodeshutdown.logind import Logind, LogindError

DEADLINE_S = 5.0


class Rig:
    def __init__(self, tmp_path: Path, grace_s: int = 30, *fakes: FakeLogind) -> None:
        self.fakes = list(fakes) or [FakeLogind()]
        self.connected: list[FakeLogind] = []
        self.reports: list[Signalled | LockState] = []
        self.refusals = 0
        conf = tmp_path / "logind.conf.d"
        options = InhibitorOptions(grace_s, conf, "unix:path=/nowhere", reconnect_s=0.01)
        self.inhibitor = Inhibitor(options, self.connect, self.reports.append)

    async def connect(self, address: str) -> Logind:
        if self.refusals:
            self.refusals -= 1
            raise LogindError(f"cannot connect to the system bus {address}: refused")
        fake = self.fakes[min(len(self.connected), len(self.fakes) - 1)]
        self.connected.append(fake)
        return fake

    def states(self) -> list[LockState]:
        return [r for r in self.reports if isinstance(r, LockState)]

    def signals(self) -> list[bool]:
        return [r.shutting_down for r in self.reports if isinstance(r, Signalled)]

    def close(self) -> None:
        for fake in self.fakes:
            fake.release_fds()


async def until(what: str, check: Callable[[], bool]) -> None:
    """Let the inhibitor's tasks run until ``check`` holds (a deadline, no fixed sleep)."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + DEADLINE_S
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def run(rig: Rig, scenario: Callable[[], Awaitable[None]]) -> None:
    async def main() -> None:
        task = asyncio.ensure_future(rig.inhibitor.run())
        try:
            await scenario()
        finally:
            rig.inhibitor.stop()
            await asyncio.wait_for(task, DEADLINE_S)

    try:
        asyncio.run(main())
    finally:
        rig.close()


def test_the_lock_is_held_released_after_a_shutdown_and_taken_again_on_a_cancel(
    tmp_path: Path,
) -> None:
    rig = Rig(tmp_path)
    logind = rig.fakes[0]

    async def scenario() -> None:
        await until("the lock", lambda: logind.open_locks() == 1)
        assert logind.calls[:2] == ["inhibit_delay_max_s", "inhibit shutdown kubelet delay"]
        assert rig.states()[-1] == LockState(True, 30.0)
        logind.signal(True)
        assert rig.signals() == [True]
        assert logind.open_locks() == 1  # held until the parent is done
        rig.inhibitor.release()
        assert logind.open_locks() == 0 and rig.states()[-1] == LockState(False, 30.0)
        logind.signal(False)
        await until("the lock taken again", lambda: logind.open_locks() == 1)
        assert rig.signals() == [True, False]

    run(rig, scenario)
    assert rig.fakes[0].open_locks() == 0  # stopping closes it
    assert not (tmp_path / "logind.conf.d").exists()  # the delay was long enough


def test_a_short_delay_is_raised_through_the_drop_in(tmp_path: Path) -> None:
    logind = FakeLogind(delay_max_s=5.0)
    logind.delay_after_reload = 40.0
    rig = Rig(tmp_path, 40, logind)

    async def scenario() -> None:
        await until("the lock", lambda: logind.open_locks() == 1)
        assert "reload" in logind.calls
        assert rig.states()[-1] == LockState(True, 40.0)

    run(rig, scenario)
    written = (tmp_path / "logind.conf.d" / dropin.FILE_NAME).read_text()
    assert written.endswith("[Login]\nInhibitDelayMaxSec=40\n")


def test_a_delay_that_stays_short_is_an_error_and_the_lock_is_taken_anyway(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logind = FakeLogind(delay_max_s=5.0)  # the reload changes nothing
    rig = Rig(tmp_path, 40, logind)

    async def scenario() -> None:
        await until("the lock", lambda: logind.open_locks() == 1)

    run(rig, scenario)
    state = rig.states()[0]
    assert state.held and state.delay_max_s == 5.0
    assert "unable to update logind InhibitDelayMaxSec to 40s" in state.error
    assert "current value of InhibitDelayMaxSec (5s)" in state.error
    assert "pods get at most 5s at a shutdown" in caplog.text


def test_a_drop_in_that_cannot_be_written_is_said(tmp_path: Path) -> None:
    (tmp_path / "logind.conf.d").write_text("a file, not a directory")
    logind = FakeLogind(delay_max_s=5.0)
    rig = Rig(tmp_path, 40, logind)

    async def scenario() -> None:
        await until("the lock", lambda: logind.open_locks() == 1)

    run(rig, scenario)
    assert "the logind drop-in was not written" in rig.states()[0].error
    assert "reload" not in logind.calls


def test_no_bus_is_one_error_and_a_retry_until_it_comes(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    rig = Rig(tmp_path)
    rig.refusals = 2
    logind = rig.fakes[0]

    async def scenario() -> None:
        await until("the lock after two refusals", lambda: logind.open_locks() == 1)

    run(rig, scenario)
    assert caplog.text.count("logind not usable") == 1
    assert rig.states()[0] == LockState(False, 0.0, rig.states()[0].error)
    assert "refused" in rig.states()[0].error
    assert rig.states()[-2] == LockState(True, 30.0)


def test_a_new_session_takes_a_fresh_lock_and_closes_the_old(tmp_path: Path) -> None:
    first, second = FakeLogind(), FakeLogind(preparing=True)
    rig = Rig(tmp_path, 30, first, second)

    async def scenario() -> None:
        await until("the first lock", lambda: first.open_locks() == 1)
        first.drop()  # the bus went away
        await until("the second lock", lambda: second.open_locks() == 1)
        assert first.open_locks() == 0
        await until("the shutdown under way", lambda: rig.signals() == [True])

    run(rig, scenario)


def test_released_before_connecting_takes_no_lock(tmp_path: Path) -> None:
    rig = Rig(tmp_path)
    rig.inhibitor.release()  # a restarted worker, told at once that the parent is done
    logind = rig.fakes[0]

    async def scenario() -> None:
        await until("connected", lambda: "preparing_for_shutdown" in logind.calls)

    run(rig, scenario)
    assert logind.reads == []
