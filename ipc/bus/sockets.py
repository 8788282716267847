"""ZeroMQ sockets between the parent and its workers.

Two channels, both ``ipc://`` sockets in the run dir (the dir is 0700, each
socket file 0600; nothing listens on TCP):

- ``bus.sock``: parent ROUTER, workers DEALER. Everything a worker says (hello,
  heartbeats, facts) and the parent's direct replies (snapshots) go here; the
  ROUTER identity (``<name>/<pid>``) tells the parent who spoke.
- ``events.sock``: parent PUB, workers SUB. Broadcasts with a sequence number per
  message, so a subscriber can tell it missed one and ask for a snapshot.

Every socket has LINGER 0 (a dead peer must never hang ``close``), and each process
makes its own context after it was forked.

A socket file removed or replaced behind the parent's back (by hand, by a cleanup of the
run dir) breaks no connection already made, but keeps every new one out: a restarted
worker could never say hello again. ``ParentBus.rebind_lost`` finds such a file and
binds the socket to its path again; the connections already made go on.
"""

from __future__ import annotations

import os
import stat
import time
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import zmq
from pkletd.ipc.bus.codec import BadMessage, Envelope, decode, encode
from pkletd.ipc.bus.messages import Message

BUS_SOCKET = "bus.sock"
EVENTS_SOCKET = "events.sock"
PARENT = "supervisor"


def _endpoint(run_dir: Path, name: str) -> str:
    endpoint = f"ipc://{run_dir / name}"
    if len(endpoint.encode()) - len("ipc://") > 107:
        raise ValueError(f"run dir {run_dir} is too long for an ipc:// socket path")
    return endpoint


@dataclass(frozen=True, slots=True)
class Rebound:
    """A socket file that was gone or replaced: what was at its path, and why it could not
    be bound again ("" when it was)."""

    path: Path
    found: str
    error: str = ""


def _file_id(path: Path) -> tuple[int, int]:
    info = path.lstat()
    return info.st_dev, info.st_ino


def _what_is_at(path: Path) -> str:
    try:
        mode = path.lstat().st_mode
    except FileNotFoundError:
        return "nothing"
    if stat.S_ISSOCK(mode):
        return "another socket"
    return "a regular file" if stat.S_ISREG(mode) else "something else"


def worker_name(identity: bytes) -> str:
    """The worker's name in a DEALER identity (``<name>/<pid>``)."""
    return identity.decode(errors="replace").partition("/")[0]


class ParentBus:
    """The parent's end: ROUTER for worker traffic, PUB for broadcasts."""

    def __init__(self, run_dir: Path) -> None:
        self._ctx = zmq.Context()
        self._run_dir = run_dir
        self._files: dict[str, tuple[int, int]] = {}  # socket name -> (device, inode) bound
        self.router = self._bind(zmq.ROUTER, BUS_SOCKET)
        self.router.setsockopt(zmq.ROUTER_MANDATORY, 1)
        self.pub = self._bind(zmq.PUB, EVENTS_SOCKET)
        self.pub.setsockopt(zmq.SNDHWM, 100_000)
        self.seq = 0
        # What crossed the bus, for the parent's metrics: by (worker, kind), by kind.
        self.received: Counter[tuple[str, str]] = Counter()
        self.sent: Counter[tuple[str, str]] = Counter()
        self.broadcasts: Counter[str] = Counter()

    def _bind(self, kind: int, name: str) -> zmq.Socket[bytes]:
        (self._run_dir / name).unlink(missing_ok=True)
        sock: zmq.Socket[bytes] = self._ctx.socket(kind)
        sock.setsockopt(zmq.LINGER, 0)
        self._bind_path(sock, name)
        return sock

    def _bind_path(self, sock: zmq.Socket[bytes], name: str) -> None:
        path = self._run_dir / name
        sock.bind(_endpoint(self._run_dir, name))
        os.chmod(path, 0o600)
        self._files[name] = _file_id(path)

    def rebind_lost(self) -> list[Rebound]:
        """Bind again each socket whose file is no longer the one it bound. libzmq's bind
        replaces what is at the path; the old listener stays open, unreachable (one fd per
        rebind): unbinding it would make libzmq drop what the workers connected through it
        send."""
        found = []
        for name, sock in ((BUS_SOCKET, self.router), (EVENTS_SOCKET, self.pub)):
            path = self._run_dir / name
            try:
                if _file_id(path) == self._files[name]:
                    continue
            except FileNotFoundError:
                pass
            what = _what_is_at(path)
            try:
                self._bind_path(sock, name)
            except (OSError, zmq.ZMQError) as exc:
                found.append(Rebound(path, what, str(exc)))
                continue
            found.append(Rebound(path, what))
        return found

    def receive(self) -> tuple[bytes, Envelope]:
        """One waiting frame from a worker; raises BadMessage for garbage."""
        parts = self.router.recv_multipart(zmq.NOBLOCK)
        if len(parts) != 2:
            raise BadMessage(f"{len(parts)}-part frame from {parts[0]!r}")
        envelope = decode(parts[1])
        self.received[(worker_name(parts[0]), envelope.message.kind)] += 1
        return parts[0], envelope

    def reply(self, identity: bytes, message: Message) -> bool:
        """Send to one worker; False if it is gone."""
        frame = encode(message, PARENT, self.seq, time.monotonic())
        try:
            self.router.send_multipart([identity, frame], zmq.NOBLOCK)
        except zmq.ZMQError:
            return False
        self.sent[(worker_name(identity), message.kind)] += 1
        return True

    def publish(self, message: Message) -> int:
        self.seq += 1
        frame = encode(message, PARENT, self.seq, time.monotonic())
        self.pub.send_multipart([message.kind.encode(), frame])
        self.broadcasts[message.kind] += 1
        return self.seq

    def close(self) -> None:
        self.router.close()
        self.pub.close()
        self._ctx.term()


class WorkerBus:
    """A worker's end: DEALER to the parent, SUB to its broadcasts.

    A worker that needs none of the broadcasts (``broadcasts=False``) subscribes to
    none: the parent's publisher then sends it nothing, so no broadcast wakes it."""

    def __init__(self, run_dir: Path, name: str, broadcasts: bool = True) -> None:
        self.name = name
        self._ctx = zmq.Context()
        self.dealer: zmq.Socket[bytes] = self._ctx.socket(zmq.DEALER)
        self.dealer.setsockopt(zmq.LINGER, 0)
        self.dealer.setsockopt(zmq.IDENTITY, f"{name}/{os.getpid()}".encode())
        self.dealer.connect(_endpoint(run_dir, BUS_SOCKET))
        self.sub: zmq.Socket[bytes] = self._ctx.socket(zmq.SUB)
        self.sub.setsockopt(zmq.LINGER, 0)
        self.sub.setsockopt(zmq.RCVHWM, 100_000)
        if broadcasts:
            self.sub.setsockopt(zmq.SUBSCRIBE, b"")
        self.sub.connect(_endpoint(run_dir, EVENTS_SOCKET))
        self._sent = 0

    def send(self, message: Message) -> None:
        self._sent += 1
        frame = encode(message, self.name, self._sent, time.monotonic())
        self.dealer.send(frame, zmq.NOBLOCK)

    def receive_direct(self) -> Envelope:
        return decode(self.dealer.recv(zmq.NOBLOCK))

    def receive_broadcast(self) -> Envelope:
        _topic, frame = self.sub.recv_multipart(zmq.NOBLOCK)
        return decode(frame)

    def close(self) -> None:
        self.dealer.close()
        self.sub.close()
        self._ctx.term()
