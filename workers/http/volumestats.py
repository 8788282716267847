"""The CSI volumes' stats measured off the request path: a thread of this worker's asks
the drivers (``CsiVolumeStats.refresh``) when a volume's figures are a period old, and
when woken (``poke``: the pods or the drivers changed, so a new volume is measured at
once); ``/stats/summary`` and ``/metrics`` only read what it last measured.

A driver's call can take long (its deadline is the CSI client's); it holds this thread
only, never the servers' loop nor the lifecycle's heartbeats.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats.csivolumes import CsiVolumeStats
from pkletd.ipc.nodestats.podrefs import PodDict
from pkletd.workers.http.passthread import PassThread

RETRY_S = 1.0  # after a failed refresh


class VolumeStatsRefresher:
    def __init__(
        self,
        stats: CsiVolumeStats,
        pods: Callable[[], Iterable[PodDict]],
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.stats = stats
        self._pods = pods
        self._thread = PassThread(
            "volume-stats", self._refresh, clock, RETRY_S, on_stop=stats.close
        )

    def start(self) -> VolumeStatsRefresher:
        self._thread.start()
        return self

    def poke(self) -> None:
        """Measure what is due now (new volumes, volumes of a driver that changed)."""
        self._thread.poke()

    def _refresh(self) -> float:
        return self.stats.refresh(list(self._pods()))

    def close(self) -> None:
        self._thread.close()
