"""The cert-manager worker object: the manager's steps on a thread, its reports carried to
the parent over the bus by the lifecycle loop (a pipe wakes it)."""

from __future__ import annotations

import os
import queue
import threading
from collections.abc import Callable, Sequence

from pkletd.ipc.bus.messages import ClientCertificateReported, Message, Snapshot
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.workers.certmanager.manager import CertManager

STOP_WAIT_S = 4.0  # the parent SIGKILLs after 5 s
IDLE_S = 3600.0


class CertManagerWorker:
    def __init__(self, bus: WorkerBus) -> None:
        self._bus = bus
        self._reports: queue.SimpleQueue[ClientCertificateReported] = queue.SimpleQueue()
        self._read_fd, self._write_fd = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []

    def report(self, message: ClientCertificateReported) -> None:
        """Called on the manager's thread."""
        self._reports.put(message)
        os.write(self._write_fd, b"x")

    def start(
        self, manager: CertManager, serving: Callable[[threading.Event], None] | None
    ) -> None:
        """The client certificate's steps on one thread, the serving one's on another."""
        self._threads = [
            threading.Thread(target=manager.run, args=(self._stop,), name="client", daemon=True)
        ]
        if serving is not None:
            self._threads.append(
                threading.Thread(target=serving, args=(self._stop,), name="serving", daemon=True)
            )
        for thread in self._threads:
            thread.start()

    def on_snapshot(self, snapshot: Snapshot) -> None:
        pass

    def on_broadcast(self, message: Message) -> None:
        pass

    def fds(self) -> Sequence[int]:
        return [self._read_fd]

    def on_readable(self, fd: int) -> None:
        try:
            os.read(fd, 4096)
        except BlockingIOError:
            pass
        while not self._reports.empty():
            self._bus.send(self._reports.get())

    def tick(self, now: float) -> float:
        return now + IDLE_S

    def close(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(STOP_WAIT_S / len(self._threads))
        os.close(self._read_fd)
        os.close(self._write_fd)
