"""Time as a seam: what pkletd's code asks of the clock, the real one, and a stepped fake.

``Clock`` has the two readings pkletd uses, ``time()`` (wall-clock seconds: what the
API's and the runtime's timestamps say) and ``monotonic()`` (for intervals and
deadlines), and the two ways it waits: ``sleep`` and ``wait`` (on a stop event, so a
thread that is closing never sleeps on). ``SystemClock`` is the real one
(``SYSTEM_CLOCK``, what every constructor takes by default). ``FakeClock`` moves only
when the test moves it, so unit tests step time instead of sleeping.
"""

from __future__ import annotations

import threading
import time
from typing import Protocol


class Clock(Protocol):
    def time(self) -> float:
        """Wall-clock seconds, as ``time.time``."""
        ...

    def monotonic(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        """Wait ``seconds`` or until ``stop`` is set; True if it was set."""
        ...


class SystemClock(Clock):
    def time(self) -> float:
        return time.time()

    def monotonic(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        return stop.wait(max(0.0, seconds))


SYSTEM_CLOCK = SystemClock()


class FakeClock(Clock):  # declared, so the type checker proves it fits
    """Both readings are fields the test sets (``mono``, ``wall``) or moves together
    (``step``); a sleep or a wait returns at once, having moved both by its length,
    and is recorded in ``waits``."""

    def __init__(self, mono: float = 1000.0, wall: float = 1_700_000_000.0) -> None:
        self.mono = mono
        self.wall = wall
        self.waits: list[float] = []

    def time(self) -> float:
        return self.wall

    def monotonic(self) -> float:
        return self.mono

    def step(self, seconds: float) -> None:
        self.mono += seconds
        self.wall += seconds

    def step_to(self, mono: float) -> None:
        """Step until the monotonic reading is ``mono``."""
        self.step(mono - self.mono)

    def sleep(self, seconds: float) -> None:
        self.waits.append(seconds)
        self.step(seconds)

    def wait(self, stop: threading.Event, seconds: float) -> bool:
        if stop.is_set():
            return True
        self.sleep(seconds)
        return stop.is_set()
