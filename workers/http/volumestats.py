"""The CSI volumes' stats measured off the request path: a thread of this worker's asks
the drivers (``CsiVolumeStats.refresh``) when a volume's figures are a period old, and
when woken (``poke``: the pods or the drivers changed, so a new volume is measured at
once); ``/stats/summary`` and ``/metrics`` only read what it last measured.

A driver's call can take long (its deadline is the CSI client's); it holds this thread
only, never the servers' loop nor the lifecycle's heartbeats.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats.csivolumes import CsiVolumeStats
from pkletd.ipc.nodestats.podrefs import PodDict

log = logging.getLogger(__name__)

JOIN_S = 5.0


class VolumeStatsRefresher:
    def __init__(
        self,
        stats: CsiVolumeStats,
        pods: Callable[[], Iterable[PodDict]],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.stats = stats
        self._pods = pods
        self._clock = clock
        self._wake = threading.Event()
        self._stopping = False
        self._thread = threading.Thread(target=self._run, name="volume-stats", daemon=True)

    def start(self) -> VolumeStatsRefresher:
        self._thread.start()
        return self

    def poke(self) -> None:
        """Measure what is due now (new volumes, volumes of a driver that changed)."""
        self._wake.set()

    def _run(self) -> None:
        while not self._stopping:
            self._wake.clear()
            due = self._refresh()
            self._clock.wait(self._wake, due - self._clock.monotonic())
        self.stats.close()

    def _refresh(self) -> float:
        try:
            return self.stats.refresh(list(self._pods()))
        except Exception:  # noqa: BLE001 (this thread's top level: a bug must not end stats)
            log.exception("volume stats refresh failed")
            return self._clock.monotonic() + 1.0

    def close(self) -> None:
        self._stopping = True
        self._wake.set()
        if self._thread.is_alive():
            self._thread.join(JOIN_S)
