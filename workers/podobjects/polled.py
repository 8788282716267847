"""The ``Cache`` and ``Get`` strategies: a GET of each referenced ConfigMap or Secret
when a pod first references it (and again whenever another pod does: the kubelet's
``AddReference`` invalidates the cached copy), then again every ``period``.

The kubelet re-reads an object when a pod sync asks for it and its cached copy is
older than the TTL (``Cache``), or on every ask (``Get``); a pod syncs every
``syncFrequency``. So ``Get`` re-reads every ``syncFrequency``, and ``Cache`` every
``max(TTL, syncFrequency)``: a TTL of 0 (what the API server's TTL controller gives a
small cluster) still reads once per pod sync, not in a loop.

The storage objects (claims, volumes, CSIDrivers, VolumeAttachments) are polled the
same way, with a period of their own (``storage_period``): a reading that is not final
yet (an unbound claim, a volume not attached: ``persistentvolumes.settled``) is read
again after ``UNSETTLED_S``, a final one only after ``SETTLED_S``, as the kubelet reads a
pod's claim and volume once and retries what it waits for.

The GETs run on a few job threads; a GET that failed is tried again after 1 s doubling
to 30 s, unless it says the object is not there (``reading.absent``: a 404, or the node
authorizer's 403 for a VolumeAttachment not made yet), which is a reading like any other.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass, field

from pkletd.ipc.apiclient.jobs import Jobs
from pkletd.ipc.apiclient.reflector import Obj
from pkletd.ipc.apiclient.retry import Retry
from pkletd.ipc.apimodel import persistentvolumes
from pkletd.ipc.apimodel.references import ObjectKey
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.podobjects.parts import IDLE_S, Report
from pkletd.workers.podobjects.reading import absent, failed, reading

Read = Callable[[ObjectKey], Obj]
Period = Callable[[ObjectKey], float]  # how long a key's last answer stays fresh
Latest = Callable[[ObjectKey], ObjectFetched | None]
UNSETTLED_S = 2.0
SETTLED_S = 3600.0


def storage_period(latest: Latest) -> Period:
    """A storage object's period: short until its reading is final."""

    def period(key: ObjectKey) -> float:
        fetched = latest(key)
        body = None if fetched is None else fetched.known_body
        if body is None:
            return UNSETTLED_S
        return SETTLED_S if persistentvolumes.settled(key, body) else UNSETTLED_S

    return period


@dataclass(slots=True)
class Polling:
    read_at: float | None = None  # monotonic, of the last answer; None: read at once
    retry: Retry = field(default_factory=Retry)

    def due(self, period: float) -> float:
        """When to read next: ``period`` after the last answer (taken when asked, so a
        new TTL counts at once), or the failed read's retry."""
        fresh_until = 0.0 if self.read_at is None else self.read_at + period
        return max(fresh_until, self.retry.due)


class Polled:
    def __init__(
        self,
        read: Read,
        jobs: Jobs,
        period: Period,
        report: Report,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._read = read
        self._jobs = jobs
        self._period = period
        self._report = report
        self._clock = clock
        self._polls: dict[ObjectKey, Polling] = {}

    def add(self, key: ObjectKey) -> None:
        self._polls[key] = Polling()

    def renew(self, key: ObjectKey) -> None:
        polling = self._polls.get(key)
        if polling is not None:
            polling.read_at = None

    def drop(self, key: ObjectKey) -> None:
        self._polls.pop(key, None)

    def fileno(self) -> int:
        return self._jobs.fileno()

    def on_readable(self) -> None:
        self._jobs.deliver()

    def tick(self, now: float) -> float:
        wake = now + IDLE_S
        for key, polling in self._polls.items():
            if self._jobs.busy(key):
                continue
            due = polling.due(self._period(key))
            if due <= now:
                self._jobs.submit(key, functools.partial(self._read, key), self._done(key))
            else:
                wake = min(wake, due)
        return wake

    def close(self) -> None:
        self._jobs.close()

    def _done(self, key: ObjectKey) -> Callable[[object], None]:
        def done(outcome: object) -> None:
            polling = self._polls.get(key)
            if polling is None:  # no pod references it any more
                return
            now = self._clock.monotonic()
            if isinstance(outcome, Exception) and not absent(key, outcome):
                polling.retry.failed(now)
                self._report(key, failed(key, outcome))
                return
            polling.retry.succeeded()
            polling.read_at = now
            if isinstance(outcome, dict):
                self._report(key, reading(key, outcome))
            elif isinstance(outcome, Exception):
                self._report(key, failed(key, outcome))

        return done
