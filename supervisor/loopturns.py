"""How long the parent's loop turns take, and what took them.

A turn (the timers, then every handler the poll woke) that takes longer than
``SLOW_TURN_S`` is logged with its slowest parts, as the kubelet logs a sync loop
iteration or housekeeping that "took longer than expected": a stalled loop names
its cause (a message kind, the control socket, the timers) in the supervisor's log.
"""

from __future__ import annotations

import logging
import time
from collections import Counter, defaultdict

log = logging.getLogger(__name__)

SLOW_TURN_S = 1.0
NAMED = 3  # the slowest parts named in the warning


class LoopTurns:
    def __init__(self) -> None:
        self._started = 0.0
        self._took: defaultdict[str, float] = defaultdict(float)
        self._count: Counter[str] = Counter()

    def begin(self) -> None:
        self._started = time.monotonic()
        self._took.clear()
        self._count.clear()

    def add(self, part: str, started: float) -> None:
        """``part`` ran from ``started`` (time.monotonic) until now."""
        self._took[part] += time.monotonic() - started
        self._count[part] += 1

    def end(self) -> None:
        took = time.monotonic() - self._started
        if took <= SLOW_TURN_S:
            return
        slowest = ",".join(
            f"{part}:{seconds:.3f}s/{self._count[part]}"
            for part, seconds in sorted(self._took.items(), key=lambda i: -i[1])[:NAMED]
        )
        log.warning(
            "supervisor loop turn took longer than expected took=%.3fs expected=%.1fs slowest=%s",
            took,
            SLOW_TURN_S,
            slowest or "-",
        )
