"""The worker object the lifecycle serves: the inhibitor on an asyncio loop in a thread of
its own, the bus on the lifecycle's loop.

What the inhibitor reports comes back through an ``Inbox``: a shutdown announced or
cancelled goes to the parent at once (``NodeShutdownStarted``, ``NodeShutdownCancelled``);
the lock's state (``InhibitorReported``) when it changes. The parent's
``ReleaseShutdownInhibitor`` is handed to the loop. Closing the worker closes the lock:
a worker that is gone holds nothing back.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Sequence
from dataclasses import dataclass

from pkletd.ipc.bus.messages import (
    InhibitorReported,
    Message,
    NodeShutdownCancelled,
    NodeShutdownStarted,
    ReleaseShutdownInhibitor,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.nodeshutdown.inhibitor import (
    Connect,
    Inhibitor,
    InhibitorOptions,
    LockState,
    Signalled,
)

log = logging.getLogger(__name__)

IDLE_S = 3600.0  # nothing timed on the lifecycle's loop
JOIN_S = 5.0


@dataclass(frozen=True, slots=True)
class ThreadDied:
    error: str


class NodeShutdownWorker:
    def __init__(self, bus: Sender, options: InhibitorOptions, connect: Connect) -> None:
        self._bus = bus
        self._inbox: Inbox[Signalled | LockState | ThreadDied] = Inbox()
        self._loop = asyncio.new_event_loop()
        self._inhibitor = Inhibitor(options, connect, self._inbox.put)
        self._thread = threading.Thread(target=self._run, name="logind", daemon=True)
        self._sent: InhibitorReported | None = None

    # --- the Worker protocol ------------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if not self._thread.is_alive():
            self._thread.start()

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, ReleaseShutdownInhibitor):
            self._loop.call_soon_threadsafe(self._inhibitor.release)

    def fds(self) -> Sequence[int]:
        return (self._inbox.fileno(),)

    def on_readable(self, fd: int) -> None:
        for item in self._inbox.take():
            if isinstance(item, ThreadDied):
                raise RuntimeError(f"the logind thread died: {item.error}")
            if isinstance(item, Signalled):
                started = item.shutting_down
                self._bus.send(NodeShutdownStarted() if started else NodeShutdownCancelled())
            else:
                self._report(item)

    def tick(self, now: float) -> float:
        return now + IDLE_S

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._inhibitor.stop)
            self._thread.join(JOIN_S)
        elif self._thread.ident is None:  # never started: the loop was never run
            self._loop.close()
        self._inbox.close()

    # --- inside ---------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            self._loop.run_until_complete(self._inhibitor.run())
        except Exception as exc:  # a bug: the worker goes down and is restarted
            log.exception("logind thread died")
            self._inbox.put(ThreadDied(f"{type(exc).__name__}: {exc}"))
        finally:
            self._loop.close()

    def _report(self, state: LockState) -> None:
        message = InhibitorReported(state.held, state.delay_max_s, state.error)
        if message != self._sent:
            self._bus.send(message)
            self._sent = message
