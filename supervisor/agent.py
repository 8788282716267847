"""The parent's loop: the worker supervisor and the syncLoop (``syncloop.py``) in one thread.

One ``zmq.Poller`` wakes on everything that can happen: a worker's message (bus
ROUTER), a worker's death (the fork server's socket), a finished pod sync and a
control request (eventfds), a signal (the wakeup pipe). Timers (worker deadlines,
pod requeues, housekeeping, watchdog) set the poll timeout. No state is touched
off this thread except by the pod-sync threads, which only call the runtime.
"""

from __future__ import annotations

import logging
import signal
import time
from typing import Any

import zmq
from pkletd.ipc.bus.codec import BadMessage
from pkletd.ipc.bus.messages import (
    EventRecorded,
    ParentAlive,
    ReleaseShutdownInhibitor,
    Snapshot,
)
from pkletd.ipc.bus.workername import WorkerName
from pkletd.ipc.runtime.cri import CriError
from pkletd.ipc.wakeup import Wakeup
from pkletd.supervisor import workerset
from pkletd.supervisor.children import Children, State
from pkletd.supervisor.control import Request
from pkletd.supervisor.forkserver import Exited, Spawned
from pkletd.supervisor.loopturns import LoopTurns
from pkletd.supervisor.messagehandlers import ParentHandlers
from pkletd.supervisor.metrics.report import REPORT_S
from pkletd.supervisor.node.facts import compose_node, container_runtime_version
from pkletd.supervisor.parts import ParentParts
from pkletd.supervisor.routing import Router, routes

log = logging.getLogger(__name__)

ALIVE_S = 1.0
BUS_BATCH = 256  # messages taken per wake-up: the timers run between batches of a flood


class Agent:
    """Runs the parent's parts (``parts.build`` makes them from the configuration)."""

    def __init__(self, parts: ParentParts) -> None:
        self._parts = parts
        self._config = parts.config
        self._forkserver = parts.forkserver
        self._bus = parts.bus
        self._control = parts.control
        self._notifier = parts.notifier
        self._runtime = parts.runtime
        self._pod_workers = parts.pod_workers
        self._pods = parts.pods
        self._sync = parts.sync
        self._garbage = parts.garbage
        self._manifests = parts.manifests
        self._node_shutdown = parts.node_shutdown
        self._pressure = parts.pressure
        self._node_object: dict[str, Any] = {}  # what the node-lease worker registers
        self._children = Children(
            parts.workers,
            parts.forkserver,
            parts.config.worker_heartbeat_timeout,
            on_ready=self._worker_ready,
        )
        handlers = ParentHandlers(parts, self._children, self._snapshot, self._alive_now)
        self._router = Router(routes(handlers), self._children)
        self._stopping = False
        self._signalled = ""
        self._announced_ready = False
        self._next_alive = 0.0
        self._next_report = 0.0
        self._next_watchdog = 0.0
        self._signals = Wakeup()
        self._turns = LoopTurns()

    # --- the loop ------------------------------------------------------------------

    def run(self) -> int:
        self._signals.on_signals()
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        poller = zmq.Poller()
        poller.register(self._bus.router, zmq.POLLIN)
        for fd in (
            self._forkserver.fileno(),
            self._pod_workers.fileno(),
            self._control.fileno(),
            self._garbage.fileno(),
            self._signals.fileno(),
        ):
            poller.register(fd, zmq.POLLIN)
        version = self._runtime_version()
        log.info("supervisor started node=%s runtime=%s", self._config.node_name, version)
        if self._config.kubeconfig:
            runtime = container_runtime_version(version)
            self._node_object = compose_node(
                self._config, self._parts.machine, self._pods.host_ip, runtime
            )
        self._children.start_all(workerset.waiting_for_certificate(self._config))
        if self._children.held:
            log.info(
                "waiting for a client certificate (TLS bootstrap) held=%s",
                ",".join(sorted(self._children.held)),
            )
        while not (self._stopping and self._children.all_stopped()):
            if self._signalled and not self._stopping:
                self._begin_stop(f"signal {self._signalled}")
            self._turns.begin()
            started = time.monotonic()
            timeout = max(0.0, self._tick() - time.monotonic())
            self._turns.add("timers", started)
            for sock, _ in poller.poll(int(timeout * 1000) + 1):
                self._dispatch(sock)
            self._turns.end()
        self._shutdown()
        return 0

    def _on_signal(self, signum: int, _frame: object) -> None:
        # Only note it: the loop acts on it between two handlers, never inside one.
        self._signalled = signal.Signals(signum).name

    def _runtime_version(self) -> str:
        try:
            return self._runtime.version()
        except CriError as exc:
            log.error(
                "runtime not answering endpoint=%s error=%s",
                self._config.container_runtime_endpoint,
                exc,
            )
            return "unavailable"

    def _dispatch(self, sock: Any) -> None:
        started = time.monotonic()
        if sock is self._bus.router:
            self._drain_bus()
            return  # timed per message kind
        if sock == self._forkserver.fileno():
            self._on_forkserver()
            part = "forkserver"
        elif sock == self._pod_workers.fileno():
            self._sync.on_pod_workers()
            part = "pod-syncs"
        elif sock == self._garbage.fileno():
            self._garbage.on_removed()
            part = "garbage"
        elif sock == self._control.fileno():
            for request in self._control.pending():
                request.reply.put(self._answer(request))
            part = "control"
        else:
            self._signals.clear()
            part = "signals"
        self._turns.add(part, started)

    def _tick(self) -> float:
        now = time.monotonic()
        deadlines = [self._children.tick()]
        deadlines.append(self._sync.tick(now))
        deadlines.append(self._node_shutdown.tick(now))
        if self._node_shutdown.take_release():
            self._bus.publish(ReleaseShutdownInhibitor())
        self._publish_events()
        if now >= self._next_alive:
            self._keep_bus_sockets()
            self._bus.publish(
                ParentAlive(
                    self._sync.runtime_ok,
                    self._parts.node.pleg_ok(),
                    self._node_shutdown.shutting_down,
                    list(self._pressure.conditions),
                    self._parts.csi_volumes.in_use(),
                )
            )
            self._next_alive = now + ALIVE_S
        if now >= self._next_report:
            report = self._parts.metrics.report(
                self._pods, self._children, self._bus, self._forkserver.pid
            )
            if WorkerName.NODE_SHUTDOWN in self._children.workers:
                report.families.extend(self._node_shutdown.families())
            self._bus.publish(report)
            self._next_report = now + REPORT_S
        if self._notifier.watchdog_interval and now >= self._next_watchdog:
            if self._children.heartbeats_fresh():
                self._notifier.send("WATCHDOG=1")
            self._next_watchdog = now + self._notifier.watchdog_interval
        deadlines += [self._next_alive, self._next_report]
        if self._notifier.watchdog_interval:
            deadlines.append(self._next_watchdog)
        return min(deadlines)

    def _keep_bus_sockets(self) -> None:
        """A bus socket file removed or replaced keeps every restarted worker out: bind
        it again (checked every ALIVE_S)."""
        for lost in self._bus.rebind_lost():
            if lost.error:
                log.error(
                    "bus socket gone; cannot bind it again path=%s found=%s error=%s",
                    lost.path,
                    lost.found,
                    lost.error,
                )
            else:
                log.error("bus socket gone; bound again path=%s found=%s", lost.path, lost.found)

    def _publish_events(self) -> None:
        """Hand new events to the status manager once it listens: broadcasts before it
        subscribed would be lost, so they wait in the recorder (at most 1000)."""
        poster = self._children.workers.get(WorkerName.STATUS_MANAGER)
        if poster is not None and poster.state is State.RUNNING:
            for event in self._parts.events.take_new():
                self._bus.publish(EventRecorded(event.api()))

    # --- workers ---------------------------------------------------------------------

    def _on_forkserver(self) -> None:
        report = self._forkserver.read()
        if report is None:
            raise RuntimeError("the fork server died; workers cannot be restarted")
        if isinstance(report, Spawned):
            self._children.spawned(report.name, report.pid)
        elif isinstance(report, Exited):
            self._children.exited(report.pid, report.code)

    def _worker_ready(self, name: WorkerName) -> None:
        if name == WorkerName.HTTP:
            self._next_report = 0.0  # a restarted http worker serves the parent's metrics at once
        if name == WorkerName.NODE_SHUTDOWN and self._node_shutdown.done:
            self._bus.publish(ReleaseShutdownInhibitor())  # a restarted worker took a new lock
        if not self._announced_ready and all(
            w.state is State.RUNNING or w.name in self._children.held
            for w in self._children.workers.values()
        ):
            self._announced_ready = True
            self._notifier.send("READY=1")
            log.info("all workers ready")

    def _drain_bus(self) -> None:
        for _ in range(BUS_BATCH):
            started = time.monotonic()
            try:
                identity, envelope = self._bus.receive()
            except zmq.Again:
                return
            except BadMessage as exc:
                log.error("dropped bad bus message reason=%s", exc)
                continue
            self._router.route(identity, envelope)
            self._turns.add(envelope.message.kind, started)

    def _alive_now(self) -> None:
        self._next_alive = 0.0

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            self._bus.seq,
            self._pods.api_pods(),
            self._pods.runtime_objects(),
            self._parts.probes.snapshot(),
            self._parts.probes.metrics,
            self._node_object,
            self._pods.awaiting_delete(),
            self._pressure.state,
            self._parts.csi_drivers.endpoints(),
            self._parts.api_view.pods(),
            self._parts.api_view.listed,
        )

    # --- control -------------------------------------------------------------------

    def _answer(self, request: Request) -> dict[str, Any]:
        """A control request's reply; a bug in answering one fails that request only."""
        try:
            return self._on_control(request)
        except Exception as exc:
            log.exception("control request failed request=%r", request.body)
            return {"ok": False, "error": f"internal error: {type(exc).__name__}: {exc}"}

    def _on_control(self, request: Request) -> dict[str, Any]:
        command = request.body["command"]
        if command == "status":
            now = time.monotonic()
            return {
                "ok": True,
                "workers": [w.as_dict(now) for w in self._children.workers.values()],
                "gc": self._garbage.status(),
                "node": self._node_status(),
                "pressure": self._pressure.status(),
                "manifests": self._manifests.status(),
                "csi_drivers": self._parts.csi_drivers.status(),
                **self._sync.status(events=request.body.get("events") is True),
            }
        if command == "restart-worker":
            name = request.body.get("name")
            if not isinstance(name, str):
                return {"ok": False, "error": "restart-worker needs a worker name (a string)"}
            worker = WorkerName.of(name)
            if worker is None or worker not in self._children.workers:
                return {
                    "ok": False,
                    "error": f"no worker named {name!r}",
                    "names": sorted(self._children.workers),
                }
            self._children.restart(worker)
            return {"ok": True}
        if command == "stop":
            self._begin_stop("stop requested")
            return {"ok": True}
        return {"ok": False, "error": f"unknown command {command!r}"}

    def _node_status(self) -> dict[str, Any]:
        found = self._parts.node.status()
        if WorkerName.NODE_SHUTDOWN in self._children.workers:
            found["shutdown"] = self._node_shutdown.status()
        return found

    # --- shutdown --------------------------------------------------------------------

    def _begin_stop(self, why: str) -> None:
        if self._stopping:
            return
        self._stopping = self._sync.stopping = True
        log.info("stopping supervisor reason=%s; pods keep running", why)
        self._notifier.send("STOPPING=1")
        self._children.stop_all()

    def _shutdown(self) -> None:
        self._control.close()
        self._pod_workers.shutdown()
        self._garbage.close()
        self._bus.close()
        self._forkserver.close()
        self._runtime.close()
        log.info("supervisor stopped")

    def emergency_stop(self) -> None:
        """The loop died: take the workers down with us (pods stay)."""
        self._children.stop_all()
        self._forkserver.close()
