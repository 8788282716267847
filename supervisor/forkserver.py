"""The fork server: a clean process that forks every worker.

The parent forks it first thing, before any zmq context, gRPC channel or thread
exists, and after the worker modules are imported. Each worker is then a fork of
this single-threaded, pre-imported process: it starts in milliseconds and shares
the imported pages. The fork server reaps its children and reports each death to
the parent at once (SIGCHLD wakes its loop), and it delivers the parent's signals
to workers only while they are its unreaped children, so a pid is never reused
under us.

Protocol over a SOCK_SEQPACKET socketpair, one msgpack map per packet:
parent -> server ``{"op": "spawn", "name"}`` and ``{"op": "signal", "pid", "sig"}``;
server -> parent ``{"op": "spawned", "name", "pid"}`` and
``{"op": "exited", "pid", "code"}`` (``code`` is the exit status, or minus the
signal number that killed it).

Shared pages stay shared: before each fork the objects that exist are frozen
(``gc.freeze``), so no collection in any process after it ever writes to them (a full
collection writes every tracked object's header: ~20 MB of copied pages per process).
The CLI disables the collector while ``pkletd start`` imports (no freed holes in the
pages to be shared, that a child's allocations would fill and copy); it is enabled on
both sides of the first fork.

Death chain: the fork server dies with the parent and the workers die with the
fork server (PR_SET_PDEATHSIG), so no worker outlives pkletd.

Listening sockets the parent bound for a worker (``sockets``, the http worker's: bound once,
as systemd's socket activation) pass to the fork server as it is forked, and the parent
closes its copies: the fork server holds them for as long as pkletd runs, each incarnation
of their worker inherits them, and every other worker closes them at once. So the ports
stay bound, and connections wait in their backlog, while that worker restarts.
"""

from __future__ import annotations

import ctypes
import gc
import logging
import os
import selectors
import signal
import socket
import sys
import traceback
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import msgpack
import setproctitle
from pkletd.ipc.bus.workername import WorkerName
from pkletd.ipc.wakeup import Wakeup
from pkletd.supervisor import logs, warmup

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
WorkerEntry = Callable[[], int]
HandedSockets = Mapping[WorkerName, Sequence[socket.socket]]  # worker -> its listening sockets


def die_with_parent(sig: int = signal.SIGKILL) -> None:
    """Ask the kernel to signal us when our parent exits; exit now if it already has."""
    parent = os.getppid()
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(PR_SET_PDEATHSIG, sig, 0, 0, 0)
    if os.getppid() != parent or parent == 1:
        os._exit(1)


@dataclass(frozen=True, slots=True)
class Spawned:
    name: WorkerName
    pid: int


@dataclass(frozen=True, slots=True)
class Exited:
    pid: int
    code: int


class ForkServer:
    """The parent's handle on the fork server process."""

    def __init__(
        self,
        entries: Mapping[WorkerName, WorkerEntry],
        log_dir: Path,
        sockets: HandedSockets | None = None,
    ) -> None:
        self._entries = entries
        self._log_dir = log_dir
        self._handed = sockets or {}
        self._sock: socket.socket | None = None
        self.pid = 0

    def start(self) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        warmup.run()
        gc.freeze()
        pid = os.fork()
        gc.enable()
        if pid == 0:
            ours.close()
            _serve(theirs, self._entries, self._log_dir, self._handed)
        theirs.close()
        for sockets in self._handed.values():
            for handed in sockets:
                handed.close()  # the fork server holds them now
        self._sock = ours
        self.pid = pid

    def fileno(self) -> int:
        assert self._sock is not None
        return self._sock.fileno()

    def spawn(self, name: WorkerName) -> None:
        self._send({"op": "spawn", "name": name})

    def signal(self, pid: int, sig: int) -> None:
        self._send({"op": "signal", "pid": pid, "sig": int(sig)})

    def _send(self, request: dict[str, object]) -> None:
        assert self._sock is not None
        self._sock.send(msgpack.packb(request))

    def read(self) -> Spawned | Exited | None:
        """One report; None when the fork server is gone."""
        assert self._sock is not None
        packet = self._sock.recv(65536)
        if not packet:
            return None
        report = msgpack.unpackb(packet)
        if report["op"] == "spawned":
            return Spawned(WorkerName(report["name"]), report["pid"])
        return Exited(report["pid"], report["code"])

    def close(self) -> None:
        if self._sock is not None:
            self._sock.close()
            self._sock = None
        if self.pid:
            try:
                os.kill(self.pid, signal.SIGTERM)
                os.waitpid(self.pid, 0)
            except (ProcessLookupError, ChildProcessError):
                pass
            self.pid = 0


# --- inside the fork server ------------------------------------------------------


def _serve(
    sock: socket.socket,
    entries: Mapping[WorkerName, WorkerEntry],
    log_dir: Path,
    handed: HandedSockets,
) -> None:
    code = 0
    try:
        die_with_parent()
        setproctitle.setproctitle("pkletd: forkserver")
        logs.configure("forkserver", log_dir)
        _Server(sock, entries, log_dir, handed).run()
    except BaseException:  # the top of a process: log anything, then exit non-zero
        traceback.print_exc()
        log.exception("fork server failed")
        code = 1
    os._exit(code)


class _Server:
    def __init__(
        self,
        sock: socket.socket,
        entries: Mapping[WorkerName, WorkerEntry],
        log_dir: Path,
        handed: HandedSockets,
    ):
        self._sock = sock
        self._entries = entries
        self._log_dir = log_dir
        self._handed = handed
        self._children: set[int] = set()
        self._signals = Wakeup()  # SIGCHLD wakes the selector

    def run(self) -> None:
        self._signals.on_signals()
        signal.signal(signal.SIGCHLD, lambda *_: None)
        signal.signal(signal.SIGTERM, lambda *_: None)
        selector = selectors.DefaultSelector()
        selector.register(self._sock, selectors.EVENT_READ)
        selector.register(self._signals.fileno(), selectors.EVENT_READ)
        log.info("fork server ready workers=%s", ",".join(self._entries))
        while True:
            for key, _ in selector.select():
                if key.fileobj is self._sock and not self._on_request():
                    self._stop_children()
                    return
            self._signals.clear()
            self._reap()

    def _on_request(self) -> bool:
        packet = self._sock.recv(65536)
        if not packet:
            log.info("parent closed the fork server socket; stopping")
            return False
        request = msgpack.unpackb(packet)
        if request["op"] == "spawn":
            self._spawn(WorkerName(request["name"]))
        elif request["op"] == "signal" and request["pid"] in self._children:
            os.kill(request["pid"], request["sig"])
        return True

    def _spawn(self, name: WorkerName) -> None:
        gc.freeze()  # what the fork server made since the last fork: shared from now on
        pid = os.fork()
        if pid == 0:
            self._become_worker(name)
        self._children.add(pid)
        log.info("forked worker=%s pid=%d", name, pid)
        self._report({"op": "spawned", "name": name, "pid": pid})

    def _become_worker(self, name: WorkerName) -> None:
        code = 1
        try:
            signal.set_wakeup_fd(-1)
            for sig in (signal.SIGCHLD, signal.SIGTERM):
                signal.signal(sig, signal.SIG_DFL)
            self._sock.close()
            self._signals.close()
            for other in (n for n in self._handed if n != name):
                for handed in self._handed[other]:
                    handed.close()
            die_with_parent()
            setproctitle.setproctitle(f"pkletd: {name}")
            logs.configure(name, self._log_dir)
            code = self._entries[name]()
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except BaseException:  # the top of a worker process
            logging.getLogger(f"pkletd.workers.{name}").exception("worker crashed")
            code = 1
        finally:
            logging.shutdown()
            sys.stdout.flush()
            sys.stderr.flush()
        os._exit(code)

    def _reap(self) -> None:
        while self._children:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                return
            if pid == 0:
                return
            self._children.discard(pid)
            code = os.waitstatus_to_exitcode(status)
            log.info("reaped pid=%d code=%d", pid, code)
            self._report({"op": "exited", "pid": pid, "code": code})

    def _report(self, report: dict[str, object]) -> None:
        self._sock.send(msgpack.packb(report))

    def _stop_children(self) -> None:
        for pid in list(self._children):
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
