"""A thread of the http worker that runs passes off the request path: the stats
housekeeping (``statscache``) and the CSI volumes' stats (``volumestats``).

``step`` runs a pass and returns the monotonic time the next one is due; ``poke`` runs
one at once. A pass that raises is logged and tried again ``retry_s`` later: a bug
must not end the stats. ``on_stop`` runs on the thread once it stops, so what the
passes use is closed only after the last one ended.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from pkletd.ipc.clock import Clock

log = logging.getLogger(__name__)

JOIN_S = 5.0


class PassThread:
    def __init__(
        self,
        name: str,
        step: Callable[[], float],
        clock: Clock,
        retry_s: float,
        on_stop: Callable[[], None] = lambda: None,
    ) -> None:
        self._step = step
        self._clock = clock
        self._retry_s = retry_s
        self._on_stop = on_stop
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def poke(self) -> None:
        self._wake.set()

    def close(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_S)

    def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            try:
                due = self._step()
            except Exception:  # noqa: BLE001 (this thread's top level)
                log.exception("pass failed thread=%s", self._thread.name)
                due = self._clock.monotonic() + self._retry_s
            self._clock.wait(self._wake, due - self._clock.monotonic())
        self._on_stop()
