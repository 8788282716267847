"""The one lifecycle every worker process shares.

connect -> Hello -> Snapshot -> WorkerReady -> serve (broadcasts, own fds, timers,
heartbeats) -> SIGTERM -> drain -> exit 0.

A worker applies broadcasts strictly in sequence: one at or below its snapshot's
sequence number is already folded in and is skipped; a gap (a broadcast dropped at
the high-water mark, or published before our subscription joined) triggers a
SnapshotRequest and nothing is applied until the new snapshot arrives.
"""

from __future__ import annotations

import logging
import os
import signal
import socket
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import zmq
from pkletd.ipc.bus.codec import BadMessage, Envelope
from pkletd.ipc.bus.messages import (
    Heartbeat,
    Hello,
    Message,
    Snapshot,
    SnapshotRequest,
    WorkerReady,
)
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.bus.workername import WorkerName
from pkletd.ipc.wakeup import Wakeup

log = logging.getLogger(__name__)

HELLO_RETRY_S = 1.0


@dataclass(frozen=True, slots=True)
class WorkerSettings:
    """What every worker gets from the parent at fork time."""

    name: WorkerName
    run_dir: Path
    heartbeat_interval: float
    # listening sockets the parent bound for this worker, inherited by each of its
    # incarnations (as systemd's socket activation; the http worker's)
    sockets: tuple[socket.socket, ...] = ()


class Worker(Protocol):
    """What a worker module plugs into the lifecycle."""

    def on_snapshot(self, snapshot: Snapshot) -> None: ...

    def on_broadcast(self, message: Message) -> None: ...

    def fds(self) -> Sequence[int]: ...

    def on_readable(self, fd: int) -> None: ...

    def tick(self, now: float) -> float:
        """Do what is due (called every loop turn); return when the next thing is due."""
        ...

    def close(self) -> None: ...


def serve(settings: WorkerSettings, bus: WorkerBus, worker: Worker) -> int:
    """Run ``worker`` on ``bus`` until SIGTERM; the exit code for the process."""
    return Lifecycle(worker, bus, settings.heartbeat_interval).run()


class Lifecycle:
    def __init__(self, worker: Worker, bus: WorkerBus, heartbeat_interval: float) -> None:
        self._worker = worker
        self._bus = bus
        self._interval = heartbeat_interval
        self._seq = -1  # last broadcast applied; -1 until the first snapshot
        self._awaiting_snapshot = True
        self._ready = False
        self._stopping = False
        self._signals = Wakeup()

    def run(self) -> int:
        self._signals.on_signals()
        signal.signal(signal.SIGTERM, self._on_term)
        signal.signal(signal.SIGINT, self._on_term)
        poller = zmq.Poller()
        poller.register(self._bus.dealer, zmq.POLLIN)
        poller.register(self._bus.sub, zmq.POLLIN)
        poller.register(self._signals.fileno(), zmq.POLLIN)
        for fd in self._worker.fds():
            poller.register(fd, zmq.POLLIN)
        self._send(Hello(self._bus.name, os.getpid()))
        next_hello = time.monotonic() + HELLO_RETRY_S
        next_beat = time.monotonic() + self._interval
        next_tick = time.monotonic()  # the worker's own next deadline; asked every turn
        while not self._stopping:
            now = time.monotonic()
            if self._awaiting_snapshot and now >= next_hello:
                self._send(SnapshotRequest(self._bus.name))
                next_hello = now + HELLO_RETRY_S
            if now >= next_beat:
                self._send(Heartbeat(self._bus.name))
                next_beat = now + self._interval
            if not self._awaiting_snapshot:
                next_tick = self._worker.tick(now)
            due = min(next_beat, next_hello if self._awaiting_snapshot else next_tick)
            timeout_ms = max(0, int((due - time.monotonic()) * 1000) + 1)
            for sock, _ in poller.poll(timeout_ms):
                self._dispatch(sock)
        log.info("draining worker=%s", self._bus.name)
        self._worker.close()
        self._bus.close()
        return 0

    def _on_term(self, signum: int, _frame: object) -> None:
        self._stopping = True

    def _dispatch(self, sock: object) -> None:
        if sock is self._bus.dealer:
            self._drain(self._bus.receive_direct, self._on_direct)
        elif sock is self._bus.sub:
            self._drain(self._bus.receive_broadcast, self._on_broadcast)
        elif sock == self._signals.fileno():
            self._signals.clear()
        elif isinstance(sock, int):
            self._worker.on_readable(sock)

    def _drain(self, receive: Callable[[], Envelope], handle: Callable[[Envelope], None]) -> None:
        while True:
            try:
                envelope = receive()
            except zmq.Again:
                return
            except BadMessage as exc:
                log.error("dropped bad message reason=%s", exc)
                continue
            handle(envelope)

    def _on_direct(self, envelope: Envelope) -> None:
        message = envelope.message
        if not isinstance(message, Snapshot):
            log.warning("unexpected direct message kind=%s", message.kind)
            return
        self._worker.on_snapshot(message)
        self._seq = message.seq
        self._awaiting_snapshot = False
        if not self._ready:
            self._ready = True
            self._send(WorkerReady(self._bus.name))
            log.info("ready worker=%s seq=%d", self._bus.name, self._seq)

    def _on_broadcast(self, envelope: Envelope) -> None:
        if self._awaiting_snapshot or envelope.seq <= self._seq:
            return
        if envelope.seq != self._seq + 1:
            log.warning(
                "broadcast gap have=%d got=%d; asking for a snapshot", self._seq, envelope.seq
            )
            self._awaiting_snapshot = True
            self._send(SnapshotRequest(self._bus.name))
            return
        self._seq = envelope.seq
        self._worker.on_broadcast(envelope.message)

    def _send(self, message: Message) -> None:
        try:
            self._bus.send(message)
        except zmq.Again:
            log.warning("parent not reachable; dropped kind=%s", message.kind)
