"""Pod workers: one serialized line of syncs per pod, latest update wins.

Each pod UID has at most one sync running, on a thread of a bounded pool
(``pod_sync_parallelism``), and at most one waiting: a newer update replaces the
waiting one, as the kubelet's podWorkers coalesce updates. Results come back to
the loop thread through ``completed()``; the loop is woken through ``wake_fd``.
"""

from __future__ import annotations

import logging
import os
import queue
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pkletd.supervisor.podsync import SyncResult

log = logging.getLogger(__name__)

Work = Callable[[], SyncResult]


@dataclass
class _Line:
    busy: bool = False
    waiting: Work | None = None


class PodWorkers:
    def __init__(self, parallelism: int) -> None:
        self._pool = ThreadPoolExecutor(parallelism, thread_name_prefix="podworker")
        self._lines: dict[str, _Line] = {}
        self._done: queue.SimpleQueue[tuple[str, SyncResult | BaseException]] = queue.SimpleQueue()
        self.wake_fd = os.eventfd(0, os.EFD_NONBLOCK | os.EFD_CLOEXEC)

    def update(self, uid: str, work: Work) -> None:
        line = self._lines.setdefault(uid, _Line())
        line.waiting = work
        if not line.busy:
            self._dispatch(uid, line)

    def busy(self, uid: str) -> bool:
        line = self._lines.get(uid)
        return line is not None and (line.busy or line.waiting is not None)

    def _dispatch(self, uid: str, line: _Line) -> None:
        work, line.waiting, line.busy = line.waiting, None, True
        assert work is not None
        self._pool.submit(self._run, uid, work)

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
        self._pool.shutdown(wait=True, cancel_futures=True)
        os.close(self.wake_fd)
