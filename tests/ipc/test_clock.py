"""The one clock: the real one waits on its stop event, the fake moves only when told."""

from __future__ import annotations

import threading
import time

from pkletd.ipc.clock import SYSTEM_CLOCK, FakeClock


def test_the_system_clock_reads_the_system_and_a_set_stop_ends_a_wait_at_once() -> None:
    assert abs(SYSTEM_CLOCK.time() - time.time()) < 5
    assert abs(SYSTEM_CLOCK.monotonic() - time.monotonic()) < 5
    stop = threading.Event()
    stop.set()
    began = time.monotonic()
    assert SYSTEM_CLOCK.wait(stop, 30.0)
    assert time.monotonic() - began < 5
    assert not SYSTEM_CLOCK.wait(threading.Event(), -1.0)  # a deadline passed: no wait


def test_the_fake_steps_both_readings_and_records_each_wait() -> None:
    clock = FakeClock(mono=10.0, wall=1000.0)
    clock.step(5)
    assert (clock.monotonic(), clock.time()) == (15.0, 1005.0)
    clock.sleep(1.5)
    assert not clock.wait(threading.Event(), 2.0)
    assert clock.waits == [1.5, 2.0]
    assert (clock.monotonic(), clock.time()) == (18.5, 1008.5)
    clock.step_to(20.0)
    assert (clock.monotonic(), clock.time()) == (20.0, 1010.0)


def test_the_fake_does_not_wait_on_a_set_stop() -> None:
    clock, stop = FakeClock(), threading.Event()
    stop.set()
    assert clock.wait(stop, 60.0)
    assert clock.waits == [] and clock.monotonic() == 1000.0
