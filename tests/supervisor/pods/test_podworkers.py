"""Pod workers: one sync at a time per pod, latest update wins, running pods first."""

from __future__ import annotations

import select
import threading

from pkletd.supervisor.pods.podworkers import PodWorkers
from pkletd.supervisor.pods.types import PodRuntime, SyncResult


def collect(workers: PodWorkers, count: int) -> list[str]:
    """Wait (on the wake fd, with a deadline) for ``count`` results; their uids in order."""
    done: list[str] = []
    while len(done) < count:
        ready, _, _ = select.select([workers], [], [], 10)
        assert ready, f"only {len(done)} of {count} syncs finished"
        done += [uid for uid, _ in workers.completed()]
    return done


class Recorder:
    """Work items that note their names as they run; ``blocker`` holds the thread."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.gate, self.started = threading.Event(), threading.Event()

    def work(self, name: str, uid: str, hold: bool = False):  # type: ignore[no-untyped-def]
        def run() -> SyncResult:
            if hold:
                self.started.set()
                self.gate.wait(10)
            self.ran.append(name)
            return SyncResult(uid, PodRuntime(uid))

        return run


def test_latest_update_wins_and_running_pods_go_first() -> None:
    workers, r = PodWorkers(parallelism=1), Recorder()
    try:
        workers.update("blocker", r.work("blocker", "blocker", hold=True))
        assert r.started.wait(10)  # the only thread is busy from here on
        workers.update("new", r.work("new-1", "new"))  # queued: a first sync ...
        workers.update("new", r.work("new-2", "new"))  # ... replaced before it ran ...
        workers.update("new", r.work("new-3", "new"))  # ... by the latest: it wins
        workers.update("old", r.work("old", "old"), urgent=True)  # a running pod's step
        r.gate.set()
        collect(workers, 3)
        assert r.ran == ["blocker", "old", "new-3"]
    finally:
        r.gate.set()
        workers.shutdown()


def test_a_queued_pod_moves_up_when_an_urgent_update_comes() -> None:
    workers, r = PodWorkers(parallelism=1), Recorder()
    try:
        workers.update("blocker", r.work("blocker", "blocker", hold=True))
        assert r.started.wait(10)
        workers.update("a", r.work("a", "a"))
        workers.update("b", r.work("b-first", "b"))
        workers.update("b", r.work("b-deleted", "b"), urgent=True)  # e.g. a termination
        r.gate.set()
        collect(workers, 3)
        assert r.ran == ["blocker", "b-deleted", "a"]
    finally:
        r.gate.set()
        workers.shutdown()


def test_an_update_during_a_sync_is_a_follow_up_ahead_of_first_syncs() -> None:
    """A PLEG event that comes while a pod's first sync runs is not a first sync."""
    workers, r = PodWorkers(parallelism=1), Recorder()
    try:
        workers.update("a", r.work("a-1", "a", hold=True))
        assert r.started.wait(10)
        workers.update("b", r.work("b", "b"))
        workers.update("a", r.work("a-2", "a"))  # not marked urgent: the pod had not run yet
        assert workers.busy("a")
        r.gate.set()
        done = collect(workers, 3)
        assert r.ran == ["a-1", "a-2", "b"]
        assert done == ["a", "a", "b"]
        assert not workers.busy("a")
    finally:
        r.gate.set()
        workers.shutdown()
