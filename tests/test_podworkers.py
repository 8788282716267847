"""Pod workers: one sync at a time per pod, latest update wins, running pods first."""

from __future__ import annotations

import select
import threading

from pkletd.supervisor.podactions import PodRuntime
from pkletd.supervisor.podsync import SyncResult
from pkletd.supervisor.podworkers import PodWorkers


def collect(workers: PodWorkers, count: int) -> list[str]:
    """Wait (on the wake fd, with a deadline) for ``count`` results; their uids in order."""
    done: list[str] = []
    while len(done) < count:
        ready, _, _ = select.select([workers.wake_fd], [], [], 10)
        assert ready, f"only {len(done)} of {count} syncs finished"
        done += [uid for uid, _ in workers.completed()]
    return done


def test_latest_update_wins_and_running_pods_go_first() -> None:
    workers = PodWorkers(parallelism=1)
    gate, started = threading.Event(), threading.Event()
    ran: list[str] = []

    def work(name: str, uid: str, wait: bool = False):  # type: ignore[no-untyped-def]
        def run() -> SyncResult:
            if wait:
                started.set()
                gate.wait(10)
            ran.append(name)
            return SyncResult(uid, PodRuntime(uid))

        return run

    try:
        workers.update("blocker", work("blocker", "blocker", wait=True))
        assert started.wait(10)  # the only thread is busy from here on
        workers.update("new", work("new-1", "new"))  # queued: a first sync
        workers.update("new", work("new-2", "new"))  # waits behind new-1 ...
        workers.update("new", work("new-3", "new"))  # ... and is replaced: latest wins
        workers.update("old", work("old", "old"), urgent=True)  # a running pod's step
        gate.set()
        collect(workers, 4)
        assert ran == ["blocker", "old", "new-1", "new-3"]
    finally:
        gate.set()
        workers.shutdown()
