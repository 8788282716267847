"""Pod workers: one serialized line of syncs per pod, latest update wins.

Each pod UID has at most one sync running, on one of ``pod_sync_parallelism``
threads, and at most one waiting: a newer update replaces the waiting one, as the
kubelet's podWorkers coalesce updates. Results come back to the loop thread
through ``completed()``; the loop is woken through ``wake_fd``.

Work is taken in priority order, then first come first served: a pod that already
runs (its next init container, a restart, a termination) goes before the first
sync of a pod that has nothing yet. When a hundred pods arrive at once, a pod's
second step would otherwise wait behind every other pod's first one.
"""

from __future__ import annotations

import itertools
import logging
import os
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from pkletd.supervisor.podsync import SyncResult

log = logging.getLogger(__name__)

Work = Callable[[], SyncResult]
URGENT, FIRST = 0, 1
_STOP = 2


@dataclass
class _Line:
    busy: bool = False
    waiting: Work | None = None
    urgent: bool = False


class PodWorkers:
    def __init__(self, parallelism: int) -> None:
        self._lines: dict[str, _Line] = {}
        self._todo: queue.PriorityQueue[tuple[int, int, str, Work | None]] = queue.PriorityQueue()
        self._order = itertools.count()
        self._done: queue.SimpleQueue[tuple[str, SyncResult | BaseException]] = queue.SimpleQueue()
        self.wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)
        self._threads = [
            threading.Thread(target=self._serve, name=f"podworker-{i}", daemon=True)
            for i in range(parallelism)
        ]
        for thread in self._threads:
            thread.start()

    def update(self, uid: str, work: Work, urgent: bool = False) -> None:
        line = self._lines.setdefault(uid, _Line())
        line.waiting = work
        line.urgent = line.urgent or urgent
        if not line.busy:
            self._dispatch(uid, line)

    def busy(self, uid: str) -> bool:
        line = self._lines.get(uid)
        return line is not None and (line.busy or line.waiting is not None)

    def _dispatch(self, uid: str, line: _Line) -> None:
        work, line.waiting, line.busy = line.waiting, None, True
        assert work is not None
        self._todo.put((URGENT if line.urgent else FIRST, next(self._order), uid, work))
        line.urgent = False

    def _serve(self) -> None:
        while True:
            _, _, uid, work = self._todo.get()
            if work is None:
                return
            self._run(uid, work)

    def _run(self, uid: str, work: Work) -> None:
        try:
            outcome: SyncResult | BaseException = work()
        except BaseException as exc:  # reported to the loop, which logs and retries
            outcome = exc
        self._done.put((uid, outcome))
        os.eventfd_write(self.wake_fd, 1)

    def completed(self) -> list[tuple[str, SyncResult | BaseException]]:
        try:
            os.eventfd_read(self.wake_fd)
        except BlockingIOError:
            pass
        results = []
        while True:
            try:
                uid, outcome = self._done.get_nowait()
            except queue.Empty:
                break
            results.append((uid, outcome))
            line = self._lines[uid]
            line.busy = False
            if line.waiting is not None:
                self._dispatch(uid, line)
            else:
                del self._lines[uid]
        return results

    def shutdown(self) -> None:
        """Drop work not yet started, let running syncs finish, stop the threads."""
        while True:
            try:
                self._todo.get_nowait()
            except queue.Empty:
                break
        for _ in self._threads:
            self._todo.put((_STOP, next(self._order), "", None))
        for thread in self._threads:
            thread.join()
        os.close(self.wake_fd)
