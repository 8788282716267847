"""The plugin-watcher worker's loop: the registration directory watched on the lifecycle's
loop, the registrations made on one job thread of their own.

The loop owns what the directory holds (socket path -> inode, read again on each inotify
event: names starting with "." and anything not a socket are left out) and hands each
change to the job thread in order: a new socket (or one made anew: another inode) is
registered, a socket gone is deregistered. The job thread's outcomes come back through an
``Inbox``; the loop tells the parent (``CsiDriverRegistered``, ``CsiDriverGone``) and
schedules what failed again, with the kubelet's back-off (0.5 s doubling to 2m2s), while
its socket stays. Every ``HEALTH_S`` each registered plugin is asked ``GetInfo``: one that
does not answer is deregistered and tried again like a failed one, so a dead driver whose
socket was left behind does not stay registered.

On its start the worker makes the node's CSINode (if missing), registers every socket it
finds, takes off the node's objects any driver they still name that it did not register
(its socket went while no watcher ran), then lists every driver registered
(``CsiDriversListed``): the parent's registry becomes that set. A later snapshot (the
parent lost broadcasts to us, so maybe our messages too) lists them again. The CSINode's
making and the clean-up are tried again with the same back-off until they succeed.

The Node may not be there yet: the node-lease worker, started with this one, registers it.
Nothing for an operator to do, so no error: the first step that finds it missing logs
``waiting for the node to be registered`` (INFO), the first that finds it there again
``node registered``, and the steps tried again meanwhile log nothing more (DEBUG). The
kubelet's CSINode initialisation likewise tries again, with back-off, until it succeeds.
"""

from __future__ import annotations

import functools
import logging
import os
import stat
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pkletd.ipc.apiclient.jsonapi import ApiCallFailed
from pkletd.ipc.bus.messages import (
    CsiDriverGone,
    CsiDriverInfo,
    CsiDriverRegistered,
    CsiDriversListed,
    Message,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.inotify import DirEvents
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.pluginwatcher.nodeinfo import NodeInfoRefused, NodeNotRegistered
from pkletd.workers.pluginwatcher.registrar import Registrar, RegistrationFailed

log = logging.getLogger(__name__)

HEALTH_S = 30.0  # GetInfo to every registered plugin
RETRY_FIRST_S = 0.5  # the kubelet's back-off for a failed operation on a socket
RETRY_MAX_S = 122.0
RETRY_WATCH_S = 1.0  # the directory could not be watched (made again, or replaced)
DIR_MODE = 0o750


class Watch(Protocol):
    """A directory watch (``ipc.inotify.Inotify``)."""

    fd: int
    watching: bool

    def watch(self, path: Path) -> bool: ...

    def read(self) -> DirEvents: ...

    def close(self) -> None: ...


class Runner(Protocol):
    """Runs jobs one at a time, in order, off the loop (a one-thread pool)."""

    def submit(self, job: Callable[[], None]) -> object: ...

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None: ...


def job_thread() -> Runner:
    return ThreadPoolExecutor(1, thread_name_prefix="register")


# --- what the job thread reports --------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Registered:
    socket: str
    driver: CsiDriverInfo


@dataclass(frozen=True, slots=True)
class Failed:
    socket: str
    error: str
    missing_node: str = ""  # the Node it needs, not registered yet


@dataclass(frozen=True, slots=True)
class Deregistered:
    name: str


@dataclass(frozen=True, slots=True)
class Listed:
    drivers: list[CsiDriverInfo]


@dataclass(frozen=True, slots=True)
class InitFailed:
    error: str
    missing_node: str = ""


@dataclass(frozen=True, slots=True)
class Pruned:
    gone: list[str]


@dataclass(frozen=True, slots=True)
class PruneFailed:
    error: str
    missing_node: str = ""


@dataclass(frozen=True, slots=True)
class JobDied:
    error: str


Outcome = Registered | Failed | Deregistered | Listed | InitFailed | Pruned | PruneFailed | JobDied


@dataclass(slots=True)
class Retry:
    due: float
    delay: float


def sockets(directory: Path) -> dict[str, int]:
    """The sockets in ``directory`` (path -> inode), names starting with "." left out."""
    found: dict[str, int] = {}
    try:
        entries = list(os.scandir(directory))
    except OSError:
        return found
    for entry in entries:
        if entry.name.startswith("."):
            continue
        try:
            info = entry.stat(follow_symlinks=False)
        except OSError:  # gone meanwhile
            continue
        if stat.S_ISSOCK(info.st_mode):
            found[entry.path] = info.st_ino
    return found


class PluginWatcher:
    def __init__(
        self,
        bus: Sender,
        directory: Path,
        registrar: Registrar,
        watch: Watch,
        runner: Runner,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._bus = bus
        self._dir = directory
        self._registrar = registrar
        self._watch = watch
        self._runner = runner
        self._clock = clock
        self._inbox: Inbox[Outcome] = Inbox()
        self._found: dict[str, int] = {}  # socket path -> inode, as last read
        self._retries: dict[str, Retry] = {}
        self._started = False
        self._next_watch = 0.0
        self._next_health = 0.0
        self._init_retry: Retry | None = None
        self._prune_retry: Retry | None = None
        self._missing_node = ""  # the Node waited for, "" when not waiting

    # --- the Worker protocol ----------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if not self._started:
            self._started = True
            self._dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
            self._watch.watch(self._dir)
            self._submit(self._initialize)
            self._rescan()
            self._submit(self._prune)
            self._next_health = self._clock.monotonic() + HEALTH_S
        self._submit(self._list)

    def on_broadcast(self, message: Message) -> None:
        pass

    def fds(self) -> Sequence[int]:
        return (self._watch.fd, self._inbox.fileno())

    def on_readable(self, fd: int) -> None:
        if fd == self._watch.fd:
            events = self._watch.read()
            if events.gone:
                self._watch.watching = False
            self._rescan({str(self._dir / name) for name in events.made})
            return
        for outcome in self._inbox.take():
            self._on_outcome(outcome)

    def tick(self, now: float) -> float:
        if not self._watch.watching and now >= self._next_watch:
            self._rewatch(now)
        for socket, retry in list(self._retries.items()):
            if now >= retry.due:
                retry.due = float("inf")  # until the job's outcome schedules it again
                self._submit(functools.partial(self._register, socket))
        if self._init_retry is not None and now >= self._init_retry.due:
            self._init_retry.due = float("inf")
            self._submit(self._initialize)
        if self._prune_retry is not None and now >= self._prune_retry.due:
            self._prune_retry.due = float("inf")
            self._submit(self._prune)
        if now >= self._next_health:
            self._submit(self._check_health)
            self._next_health = now + HEALTH_S
        dues = [self._next_health, *(r.due for r in self._retries.values())]
        for step in (self._init_retry, self._prune_retry):
            if step is not None:
                dues.append(step.due)
        if not self._watch.watching:
            dues.append(self._next_watch)
        return min(dues)

    def close(self) -> None:
        self._runner.shutdown(wait=False, cancel_futures=True)
        self._watch.close()
        self._inbox.close()

    # --- the loop's side --------------------------------------------------------------

    def _rewatch(self, now: float) -> None:
        """The directory went (removed, replaced): make it again, watch it, read it."""
        self._next_watch = now + RETRY_WATCH_S
        try:
            self._dir.mkdir(mode=DIR_MODE, parents=True, exist_ok=True)
        except OSError as exc:
            log.error("plugin registry directory not made path=%s error=%s", self._dir, exc)
            return
        if self._watch.watch(self._dir):
            self._rescan()

    def _rescan(self, made: set[str] | frozenset[str] = frozenset()) -> None:
        """Read the directory again; ``made``: paths created since the last read (made
        anew if they were there before, whatever their inode)."""
        now = sockets(self._dir)
        for socket, inode in sorted(self._found.items()):
            if now.get(socket) != inode or socket in made:
                log.info("plugin socket gone socket=%s", socket)
                self._retries.pop(socket, None)
                self._submit(functools.partial(self._deregister, socket))
        for socket, inode in sorted(now.items()):
            if self._found.get(socket) != inode or socket in made:
                log.info("plugin socket found socket=%s", socket)
                self._submit(functools.partial(self._register, socket))
        self._found = now

    def _on_outcome(self, outcome: Outcome) -> None:
        if isinstance(outcome, JobDied):
            raise RuntimeError(f"a registration job failed: {outcome.error}")
        if isinstance(outcome, Registered):
            self._node_found()
            self._retries.pop(outcome.socket, None)
            driver = outcome.driver
            log.info(
                "CSI driver registered driver=%s socket=%s endpoint=%s node_id=%s",
                driver["name"],
                outcome.socket,
                driver["endpoint"],
                driver["node_id"],
            )
            self._bus.send(CsiDriverRegistered(**driver))
        elif isinstance(outcome, Failed):
            self._failed(outcome)
        elif isinstance(outcome, Deregistered):
            log.info("CSI driver deregistered driver=%s", outcome.name)
            self._bus.send(CsiDriverGone(outcome.name))
        elif isinstance(outcome, Listed):
            self._bus.send(CsiDriversListed(outcome.drivers))
        elif isinstance(outcome, InitFailed):
            self._init_failed(outcome)
        elif isinstance(outcome, Pruned):
            self._pruned(outcome)
        else:
            self._prune_failed(outcome)

    def _failed(self, outcome: Failed) -> None:
        if outcome.missing_node:
            self._node_missing(outcome.missing_node, "plugin registration", outcome.error)
        else:
            log.error(
                "plugin registration failed socket=%s error=%s", outcome.socket, outcome.error
            )
        if outcome.socket not in self._found:
            return  # gone meanwhile: nothing to try again
        self._retries[outcome.socket] = _later(self._retries.get(outcome.socket), self._clock)

    def _init_failed(self, outcome: InitFailed) -> None:
        if outcome.missing_node:
            self._node_missing(outcome.missing_node, "CSINode initialization", outcome.error)
        else:
            log.error("CSINode not initialized error=%s", outcome.error)
        self._init_retry = _later(self._init_retry, self._clock)

    def _pruned(self, outcome: Pruned) -> None:
        self._node_found()
        self._prune_retry = None
        for name in outcome.gone:
            log.info("CSI driver removed from the node's objects (not found) driver=%s", name)

    def _prune_failed(self, outcome: PruneFailed) -> None:
        if outcome.missing_node:
            self._node_missing(outcome.missing_node, "stale CSI driver clean-up", outcome.error)
        else:
            log.error(
                "stale CSI drivers not removed from the node's objects error=%s", outcome.error
            )
        self._prune_retry = _later(self._prune_retry, self._clock)

    def _node_missing(self, node: str, step: str, error: str) -> None:
        """One line when the wait for the Node starts, whichever step finds it missing."""
        if self._missing_node:
            log.debug("still waiting for the node node=%s step=%s", node, step)
            return
        self._missing_node = node
        log.info(
            "waiting for the node to be registered node=%s step=%s error=%s", node, step, error
        )

    def _node_found(self) -> None:
        """A step read the Node: the wait, if any, is over."""
        if self._missing_node:
            log.info("node registered node=%s", self._missing_node)
            self._missing_node = ""

    def _submit(self, job: Callable[[], None]) -> None:
        self._runner.submit(lambda: self._guarded(job))

    # --- the job thread's side ----------------------------------------------------------

    def _guarded(self, job: Callable[[], None]) -> None:
        try:
            job()
        except Exception as exc:  # a bug: the loop raises it, the worker is restarted
            log.exception("registration job failed")
            self._inbox.put(JobDied(f"{type(exc).__name__}: {exc}"))

    def _initialize(self) -> None:
        try:
            self._registrar.initialize()
        except ApiCallFailed as exc:
            self._inbox.put(InitFailed(str(exc), _missing_node(exc)))

    def _register(self, socket: str) -> None:
        try:
            driver = self._registrar.register(socket)
        except RegistrationFailed as exc:
            self._inbox.put(Failed(socket, str(exc), _missing_node(exc.__cause__)))
            return
        self._inbox.put(Registered(socket, driver))

    def _deregister(self, socket: str) -> None:
        name = self._registrar.deregister(socket)
        if name is not None:
            self._inbox.put(Deregistered(name))

    def _check_health(self) -> None:
        for name, found in sorted(self._registrar.drivers.items()):
            why = self._registrar.healthy(found.socket)
            if why:
                log.warning("CSI driver not healthy driver=%s error=%s", name, why)
                self._deregister(found.socket)
                self._inbox.put(Failed(found.socket, f"health check: {why}"))

    def _prune(self) -> None:
        """After the first registrations: what the node's objects still name of drivers
        not found again (gone while no watcher ran) comes off."""
        try:
            gone = self._registrar.prune()
        except (ApiCallFailed, NodeInfoRefused) as exc:
            self._inbox.put(PruneFailed(str(exc), _missing_node(exc)))
            return
        self._inbox.put(Pruned(gone))

    def _list(self) -> None:
        self._inbox.put(Listed(self._registrar.listed()))


def _missing_node(error: BaseException | None) -> str:
    """The Node ``error`` says is not registered; "" for any other error."""
    return error.node if isinstance(error, NodeNotRegistered) else ""


def _later(before: Retry | None, clock: Clock) -> Retry:
    """The next try of what failed: 0.5 s after a first failure, then twice the delay before."""
    delay = min(before.delay * 2, RETRY_MAX_S) if before is not None else RETRY_FIRST_S
    return Retry(clock.monotonic() + delay, delay)
