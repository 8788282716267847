"""Pod workers: one serialized line of syncs per pod, latest update wins.

Each pod UID has at most one sync running, on one of ``pod_sync_parallelism``
threads, and at most one waiting: a newer update replaces the waiting one, as the
kubelet's podWorkers coalesce updates. A thread takes a pod's latest update when
it starts the sync, so a pod queued behind others runs what is wanted by then.
Results come back to the loop thread, in order, through ``completed()``; the loop
is woken through an ``Inbox`` (``fileno()``).

Work is taken in priority order, then first come first served: a pod that already
runs (its next init container, a restart, a termination) goes before the first
sync of a pod that has nothing yet. When a hundred pods arrive at once, a pod's
second step would otherwise wait behind every other pod's first one. An update
that arrives while the pod's sync runs is such a second step.
"""

from __future__ import annotations

import itertools
import logging
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.wakeup import Inbox
from pkletd.supervisor.pods.types import SyncResult

log = logging.getLogger(__name__)

Work = Callable[[], SyncResult]
URGENT, FIRST = 0, 1
_STOP = 2
Done = tuple[PodUID, SyncResult | BaseException]  # a pod sync ended: its result or error


@dataclass
class _Line:
    waiting: Work | None = None
    urgent: bool = False
    running: bool = False
    ticket: int | None = None  # the queue entry that stands for this line now


class PodWorkers:
    def __init__(self, parallelism: int) -> None:
        self._lines: dict[PodUID, _Line] = {}
        self._lock = threading.Lock()  # the lines: the loop thread and the pod workers
        self._todo: queue.PriorityQueue[tuple[int, int, PodUID]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._done: Inbox[Done] = Inbox()
        self._threads = [
            threading.Thread(target=self._serve, name=f"podworker-{i}", daemon=True)
            for i in range(parallelism)
        ]
        for thread in self._threads:
            thread.start()

    def update(self, uid: PodUID, work: Work, urgent: bool = False) -> None:
        with self._lock:
            line = self._lines.setdefault(uid, _Line())
            line.waiting = work
            self._queue(uid, line, urgent)

    def busy(self, uid: PodUID) -> bool:
        with self._lock:
            line = self._lines.get(uid)
            return line is not None and (line.running or line.waiting is not None)

    def _queue(self, uid: PodUID, line: _Line, urgent: bool) -> None:
        """Put the line in the queue, or move it up to urgent (lock held)."""
        if line.running or (line.ticket is not None and (line.urgent or not urgent)):
            return  # running: queued again when done; or already queued high enough
        line.urgent = line.urgent or urgent
        line.ticket = next(self._order)
        self._todo.put((URGENT if line.urgent else FIRST, line.ticket, uid))

    def _serve(self) -> None:
        while True:
            priority, ticket, uid = self._todo.get()
            if priority == _STOP:
                return
            work = self._take(uid, ticket)
            if work is not None:
                self._run(uid, work)

    def _take(self, uid: PodUID, ticket: int) -> Work | None:
        """The line's latest update, if this queue entry still stands for the line."""
        with self._lock:
            line = self._lines.get(uid)
            if line is None or line.ticket != ticket:
                return None  # moved up: a newer entry stands for it
            work, line.waiting = line.waiting, None
            line.running, line.urgent, line.ticket = True, False, None
            return work

    def _run(self, uid: PodUID, work: Work) -> None:
        try:
            outcome: SyncResult | BaseException = work()
        except BaseException as exc:  # reported to the loop, which logs and retries
            outcome = exc
        self._done.put((uid, outcome))  # before a follow-up can run and report
        self._finished(uid)

    def fileno(self) -> int:
        return self._done.fileno()

    def completed(self) -> list[Done]:
        return self._done.take()

    def _finished(self, uid: PodUID) -> None:
        with self._lock:
            line = self._lines[uid]
            line.running = False
            if line.waiting is None:
                del self._lines[uid]
            else:
                self._queue(uid, line, urgent=True)  # a follow-up of a pod synced already

    def shutdown(self) -> None:
        """Drop work not yet started, let running syncs finish, stop the threads."""
        while True:
            try:
                self._todo.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._todo.put((_STOP, next(self._order), PodUID("")))
        for thread in self._threads:
            thread.join()
        self._done.close()
