"""CrashLoopBackOff: immediate first restart, then 10 s doubling to 5 min, forgotten when quiet."""

from __future__ import annotations

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.supervisor.pods import backoff
from pkletd.supervisor.pods.backoff import CrashBackoff

KEY = backoff.key("uid-1", "app", "abcd1234")


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock(wall=1_700_000_000.0)


@pytest.fixture
def crash(clock: FakeClock) -> CrashBackoff:
    return CrashBackoff(clock=clock)


def restart_when_allowed(crash: CrashBackoff, clock: FakeClock) -> float:
    """The container dies now; wait out its backoff, restart it; return the wait."""
    finished_at = clock.wall
    wait = crash.remaining(KEY, finished_at)
    clock.wall += wait
    assert crash.remaining(KEY, finished_at) == 0
    crash.restarted(KEY)
    return wait


def test_waits_double_from_immediate_to_the_cap(crash: CrashBackoff, clock: FakeClock) -> None:
    waits = [restart_when_allowed(crash, clock) for _ in range(8)]
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300]
    assert crash.current(KEY) == 300


def test_wait_counts_from_when_the_container_finished(
    crash: CrashBackoff, clock: FakeClock
) -> None:
    crash.restarted(KEY)
    crash.restarted(KEY)
    assert crash.remaining(KEY, clock.wall - 4) == 16


def test_unknown_container_starts_at_once_with_the_initial_delay(crash: CrashBackoff) -> None:
    assert crash.remaining(KEY, 0) == 0
    assert crash.current(KEY) == backoff.INITIAL_S


def test_quiet_for_twice_the_cap_starts_over(crash: CrashBackoff, clock: FakeClock) -> None:
    for _ in range(5):
        restart_when_allowed(crash, clock)
    clock.wall += 2 * backoff.CAP_S - 1
    assert crash.remaining(KEY, clock.wall) > 0  # still remembered

    clock.wall += 2
    assert crash.remaining(KEY, clock.wall) == 0
    assert crash.restarted(KEY) == backoff.INITIAL_S


def test_forget_pod_drops_only_that_pods_containers(crash: CrashBackoff, clock: FakeClock) -> None:
    others = [backoff.key("uid-1", "sidecar", "x"), backoff.key("uid-10", "app", "x")]
    for key in (KEY, *others):
        crash.restarted(key)
        crash.restarted(key)

    crash.forget_pod("uid-1")

    assert crash.remaining(KEY, clock.wall) == 0
    assert crash.remaining(others[0], clock.wall) == 0
    assert crash.remaining(others[1], clock.wall) == 20


def test_a_new_spec_hash_has_its_own_backoff(crash: CrashBackoff, clock: FakeClock) -> None:
    crash.restarted(KEY)
    assert crash.remaining(backoff.key("uid-1", "app", "new-hash"), clock.wall) == 0
