"""Blocking calls run off the worker's loop: ``ThreadJobs`` runs them on daemon threads
and hands each outcome back through an ``Inbox``; ``InlineJobs`` (for unit tests) runs
them at once and hands the outcomes back on the next ``deliver``.

A job has a key (the object it is about); a key stays ``busy`` from ``submit`` until its
outcome is delivered, so the loop never runs two calls about one object at once. The
outcome is the call's result or the exception it raised; ``done`` runs on the loop.
"""

from __future__ import annotations

import logging
import queue
import threading
from collections.abc import Callable, Hashable
from typing import Any, Protocol

from pkletd.ipc.wakeup import Inbox

log = logging.getLogger(__name__)

Done = Callable[[Any], None]
Job = tuple[Hashable, Callable[[], Any], Done]


class Jobs(Protocol):
    def busy(self, key: Hashable) -> bool: ...

    def submit(self, key: Hashable, call: Callable[[], Any], done: Done) -> None: ...

    def fileno(self) -> int: ...

    def deliver(self) -> None:
        """Run ``done`` for every outcome that came back (on the loop)."""
        ...

    def close(self) -> None: ...


def _run(call: Callable[[], Any]) -> Any:
    try:
        return call()
    except Exception as exc:  # the outcome: the loop decides what a failure means
        return exc


class ThreadJobs:
    def __init__(self, threads: int, name: str) -> None:
        self._queue: queue.SimpleQueue[Job | None] = queue.SimpleQueue()
        self._outcomes: Inbox[tuple[Hashable, Any, Done]] = Inbox()
        self._busy: set[Hashable] = set()
        self._threads = threads
        for i in range(threads):
            threading.Thread(target=self._serve, name=f"{name}-{i}", daemon=True).start()

    def busy(self, key: Hashable) -> bool:
        return key in self._busy

    def submit(self, key: Hashable, call: Callable[[], Any], done: Done) -> None:
        self._busy.add(key)
        self._queue.put((key, call, done))

    def fileno(self) -> int:
        return self._outcomes.fileno()

    def deliver(self) -> None:
        for key, outcome, done in self._outcomes.take():
            self._busy.discard(key)
            done(outcome)

    def close(self) -> None:
        """Drop the calls not started; the threads end once their call returns (its
        outcome is dropped)."""
        try:
            while True:
                self._queue.get_nowait()
        except queue.Empty:
            pass
        for _ in range(self._threads):
            self._queue.put(None)
        self._outcomes.close()

    def _serve(self) -> None:
        while True:
            job = self._queue.get()
            if job is None:
                return
            key, call, done = job
            self._outcomes.put((key, _run(call), done))


class InlineJobs:
    """Calls run inside ``submit``; ``deliver`` hands their outcomes back, oldest first."""

    def __init__(self) -> None:
        self._outcomes: list[tuple[Hashable, Any, Done]] = []
        self._busy: set[Hashable] = set()
        self._wakeup = Inbox[None]()

    def busy(self, key: Hashable) -> bool:
        return key in self._busy

    def submit(self, key: Hashable, call: Callable[[], Any], done: Done) -> None:
        self._busy.add(key)
        self._outcomes.append((key, _run(call), done))

    def pending(self) -> int:
        return len(self._outcomes)

    def fileno(self) -> int:
        return self._wakeup.fileno()

    def deliver(self) -> None:
        outcomes, self._outcomes = self._outcomes, []
        for key, outcome, done in outcomes:
            self._busy.discard(key)
            done(outcome)

    def close(self) -> None:
        self._wakeup.close()
