"""The wake-up fd every loop polls: any thread (or a signal) sets it, the loop clears it.

A loop registers ``fileno()`` with its poller or selector; another thread calls
``set()`` after putting work where the loop finds it; the loop calls ``clear()``
before it takes the work, so a ``set()`` that races it wakes the loop again
rather than being lost. ``on_signals()`` makes the Python signal machinery write
to it (``signal.set_wakeup_fd``), so a signal wakes a loop blocked in a poll.

A non-blocking pipe rather than an eventfd: ``set_wakeup_fd`` writes one byte,
which an eventfd refuses. A full pipe is already set, so ``set()`` never blocks,
and a ``set()`` after ``close()`` (a late thread) does nothing.
"""

from __future__ import annotations

import os
import queue
import signal
import threading
from typing import Generic, TypeVar

DRAIN_CHUNK = 4096

T = TypeVar("T")


class Wakeup:
    def __init__(self) -> None:
        self._read, self._write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._lock = threading.Lock()  # close() against a late set() from another thread
        self._closed = False

    def fileno(self) -> int:
        return self._read

    def set(self) -> None:
        with self._lock:
            if self._closed:
                return
            try:
                os.write(self._write, b"\0")
            except BlockingIOError:
                pass  # the pipe is full: the loop will wake anyway

    def clear(self) -> None:
        try:
            while os.read(self._read, DRAIN_CHUNK):
                pass
        except BlockingIOError:
            pass

    def on_signals(self) -> None:
        """Wake on every signal with a Python handler (main thread only)."""
        signal.set_wakeup_fd(self._write)

    def close(self) -> None:
        """Close both ends; in a forked child, close the copies it inherited."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            os.close(self._read)
            os.close(self._write)


class Inbox(Generic[T]):
    """Items other threads hand to a loop: ``put`` queues one and wakes the loop,
    ``take`` (on the loop) returns every item queued so far, oldest first."""

    def __init__(self) -> None:
        self._items: queue.SimpleQueue[T] = queue.SimpleQueue()
        self._wakeup = Wakeup()

    def fileno(self) -> int:
        return self._wakeup.fileno()

    def put(self, item: T) -> None:
        self._items.put(item)
        self._wakeup.set()

    def take(self) -> list[T]:
        self._wakeup.clear()
        taken = []
        while True:
            try:
                taken.append(self._items.get_nowait())
            except queue.Empty:
                return taken

    def close(self) -> None:
        self._wakeup.close()
