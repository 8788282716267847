"""CrashLoopBackOff: immediate first restart, then 10 s doubling to 5 min, forgotten when quiet."""

from __future__ import annotations

import pytest
from pkletd.supervisor.pods import backoff
from pkletd.supervisor.pods.backoff import CrashBackoff

KEY = backoff.key("uid-1", "app", "abcd1234")


class Clock:
    def __init__(self) -> None:
        self.now = 1_700_000_000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def crash(clock: Clock) -> CrashBackoff:
    return CrashBackoff(clock=clock)


def restart_when_allowed(crash: CrashBackoff, clock: Clock) -> float:
    """The container dies now; wait out its backoff, restart it; return the wait."""
    finished_at = clock.now
    wait = crash.remaining(KEY, finished_at)
    clock.now += wait
    assert crash.remaining(KEY, finished_at) == 0
    crash.restarted(KEY)
    return wait


def test_waits_double_from_immediate_to_the_cap(crash: CrashBackoff, clock: Clock) -> None:
    waits = [restart_when_allowed(crash, clock) for _ in range(8)]
    assert waits == [0, 10, 20, 40, 80, 160, 300, 300]
    assert crash.current(KEY) == 300


def test_wait_counts_from_when_the_container_finished(crash: CrashBackoff, clock: Clock) -> None:
    crash.restarted(KEY)
    crash.restarted(KEY)
    assert crash.remaining(KEY, clock.now - 4) == 16


def test_unknown_container_starts_at_once_with_the_initial_delay(crash: CrashBackoff) -> None:
    assert crash.remaining(KEY, 0) == 0
    assert crash.current(KEY) == backoff.INITIAL_S


def test_quiet_for_twice_the_cap_starts_over(crash: CrashBackoff, clock: Clock) -> None:
    for _ in range(5):
        restart_when_allowed(crash, clock)
    clock.now += 2 * backoff.CAP_S - 1
    assert crash.remaining(KEY, clock.now) > 0  # still remembered

    clock.now += 2
    assert crash.remaining(KEY, clock.now) == 0
    assert crash.restarted(KEY) == backoff.INITIAL_S


def test_forget_pod_drops_only_that_pods_containers(crash: CrashBackoff, clock: Clock) -> None:
    others = [backoff.key("uid-1", "sidecar", "x"), backoff.key("uid-10", "app", "x")]
    for key in (KEY, *others):
        crash.restarted(key)
        crash.restarted(key)

    crash.forget_pod("uid-1")

    assert crash.remaining(KEY, clock.now) == 0
    assert crash.remaining(others[0], clock.now) == 0
    assert crash.remaining(others[1], clock.now) == 20


def test_a_new_spec_hash_has_its_own_backoff(crash: CrashBackoff, clock: Clock) -> None:
    crash.restarted(KEY)
    assert crash.remaining(backoff.key("uid-1", "app", "new-hash"), clock.now) == 0
