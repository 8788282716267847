"""CrashLoopBackOff: how long a container that keeps dying waits before its next start.

The kubelet's rule: the first restart is immediate; after that a container that
died less than ``delay`` ago waits, and each restart doubles ``delay`` from 10 s
up to 5 min. An entry untouched for twice the cap is forgotten (the container
ran cleanly for a while). Times are wall-clock seconds, as the runtime reports
when a container finished.
"""

from __future__ import annotations

from dataclasses import dataclass

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock

INITIAL_S = 10.0
CAP_S = 300.0


@dataclass
class _Entry:
    delay: float
    updated: float


class CrashBackoff:
    def __init__(
        self,
        initial: float = INITIAL_S,
        cap: float = CAP_S,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._initial = initial
        self._cap = cap
        self._clock = clock
        self._entries: dict[str, _Entry] = {}

    def remaining(self, key: str, finished_at: float) -> float:
        """Seconds the container under ``key`` must still wait; 0 if it may start."""
        entry = self._entries.get(key)
        if entry is None:
            return 0.0
        now = self._clock.time()
        if now - entry.updated > 2 * self._cap:
            del self._entries[key]
            return 0.0
        return max(0.0, entry.delay - (now - finished_at))

    def restarted(self, key: str) -> float:
        """Record a restart; returns the delay the next one will have to wait."""
        entry = self._entries.get(key)
        delay = self._initial if entry is None else min(entry.delay * 2, self._cap)
        self._entries[key] = _Entry(delay, self._clock.time())
        return delay

    def current(self, key: str) -> float:
        """The delay the container under ``key`` is waiting out now."""
        entry = self._entries.get(key)
        return entry.delay if entry is not None else self._initial

    def forget_pod(self, uid: str) -> None:
        for key in [k for k in self._entries if k.startswith(f"{uid}/")]:
            del self._entries[key]


def key(pod_uid: str, container: str, spec_hash: str) -> str:
    return f"{pod_uid}/{container}/{spec_hash}"
