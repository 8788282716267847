"""The node stats gathered off the request path, as the kubelet's cAdvisor housekeeping:
a thread of this worker's runs a pass (``nodestats.housekeeping``) every
``HOUSEKEEPING_S`` and at once when poked (the parent's snapshot: the pods are known);
``/stats/summary``, ``/metrics/resource`` and ``/metrics/cadvisor`` serve bodies rendered
from the last pass.

Each body is rendered at most once per pass (``Pass.body``): on the housekeeping thread
right after the pass for the bodies asked for within ``ASKED_S`` (a scraper's interval is
up to a minute), at the first request for the others. A request that comes before the
first pass waits for it, at most ``FIRST_WAIT_S``. A figure is thus at most one interval,
plus the time a pass takes, old.
"""

from __future__ import annotations

import enum
import json
import threading
from collections.abc import Callable, Iterable
from typing import Protocol

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats import cadvisor, resource
from pkletd.ipc.nodestats.housekeeping import Gathered
from pkletd.ipc.nodestats.podrefs import PodDict
from pkletd.ipc.nodestats.summary import cpu_and_memory, format_times
from pkletd.workers.http.passthread import PassThread

HOUSEKEEPING_S = 10.0  # the kubelet's cAdvisor housekeeping interval
FIRST_WAIT_S = 10.0
ASKED_S = 120.0


class Gatherer(Protocol):
    """One housekeeping pass over the pods (``nodestats.housekeeping.Housekeeping``)."""

    def gather(self, pods: Iterable[PodDict]) -> Gathered: ...


class Body(enum.Enum):
    SUMMARY = "summary"
    SUMMARY_CPU_AND_MEMORY = "summary?only_cpu_and_memory=true"
    RESOURCE = "metrics/resource"
    CADVISOR = "metrics/cadvisor"


def _summary(gathered: Gathered, cut: bool) -> bytes | None:
    raw = gathered.summary
    if raw is None:
        return None
    return json.dumps(format_times(cpu_and_memory(raw) if cut else raw)).encode()


def _resource(gathered: Gathered) -> bytes:
    raw = gathered.summary
    return resource.resource_metrics(cpu_and_memory(raw) if raw is not None else None).encode()


RENDER: dict[Body, Callable[[Gathered], bytes | None]] = {
    Body.SUMMARY: lambda g: _summary(g, cut=False),
    Body.SUMMARY_CPU_AND_MEMORY: lambda g: _summary(g, cut=True),
    Body.RESOURCE: _resource,
    Body.CADVISOR: lambda g: cadvisor.cadvisor_metrics(g.rows, g.machine).encode(),
}


class Pass:
    """One pass and the bodies rendered from it; None: the node's stats were unreadable."""

    def __init__(self, gathered: Gathered) -> None:
        self.gathered = gathered
        self._bodies: dict[Body, bytes | None] = {}
        self._locks = {kind: threading.Lock() for kind in Body}

    def rendered(self, kind: Body) -> bool:
        return kind in self._bodies

    def body(self, kind: Body) -> bytes | None:
        with self._locks[kind]:
            if kind not in self._bodies:
                self._bodies[kind] = RENDER[kind](self.gathered)
            return self._bodies[kind]


class StatsCache:
    def __init__(
        self,
        housekeeping: Gatherer,
        pods: Callable[[], Iterable[PodDict]],
        clock: Clock = SYSTEM_CLOCK,
        interval_s: float = HOUSEKEEPING_S,
        first_wait_s: float = FIRST_WAIT_S,
    ) -> None:
        self.interval_s = interval_s
        self.first_wait_s = first_wait_s
        self._housekeeping = housekeeping
        self._pods = pods
        self._clock = clock
        self._latest: Pass | None = None
        self._first = threading.Event()
        self._asked: dict[Body, float] = {}  # the last request for each, monotonic
        self._thread = PassThread("housekeeping", self.housekeep, clock, interval_s)

    @property
    def latest(self) -> Pass | None:
        return self._latest

    def first(self) -> Pass | None:
        """The last pass, waiting for the first one at most ``first_wait_s`` (blocks)."""
        self._first.wait(self.first_wait_s)
        return self._latest

    def asked(self, kind: Body) -> None:
        """A request wanted this body: the passes of the next ``ASKED_S`` render it."""
        self._asked[kind] = self._clock.monotonic()

    def start(self) -> StatsCache:
        self._thread.start()
        return self

    def poke(self) -> None:
        """Run a pass now (the pods became known)."""
        self._thread.poke()

    def housekeep(self) -> float:
        """One pass, and the bodies asked for rendered; the monotonic time the next is due."""
        start = self._clock.monotonic()
        latest = Pass(self._housekeeping.gather(list(self._pods())))
        for kind, when in list(self._asked.items()):
            if self._clock.monotonic() - when < ASKED_S:
                latest.body(kind)
        self._latest = latest  # rendered first: a request never waits for its rendering
        self._first.set()
        return start + self.interval_s

    def close(self) -> None:
        self._thread.close()
