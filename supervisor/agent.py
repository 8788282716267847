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
import socket
import time
from fractions import Fraction
from pathlib import Path
from typing import Any

import zmq
from pkletd.ipc.bus.codec import BadMessage, Envelope
from pkletd.ipc.bus.messages import (
    EventRecorded,
    EvictionNeeded,
    EvictionThresholdMet,
    GarbageFound,
    Heartbeat,
    Hello,
    InhibitorReported,
    ManifestAccepted,
    ManifestRejected,
    NodeReported,
    NodeShutdownCancelled,
    NodeShutdownStarted,
    ObjectFetched,
    ParentAlive,
    PlegModeChanged,
    PodDeleted,
    PodLifecycleEvent,
    PodsListed,
    ProbeMetrics,
    ProbeResult,
    ReclaimRequested,
    ReleaseShutdownInhibitor,
    RelistCompleted,
    RuntimeClassesListed,
    ServicesListed,
    SignalsObserved,
    Snapshot,
    SnapshotRequest,
    TokenIssued,
    WorkerReady,
)
from pkletd.ipc.bus.sockets import ParentBus
from pkletd.ipc.runtime.cri import CriError
from pkletd.ipc.wakeup import Wakeup
from pkletd.supervisor.children import Children, State
from pkletd.supervisor.config import KubeletConfig
from pkletd.supervisor.control import ControlServer, Request
from pkletd.supervisor.forkserver import Exited, ForkServer, Spawned
from pkletd.supervisor.metrics.report import REPORT_S, AgentMetrics
from pkletd.supervisor.metrics.runtimeops import RuntimeOperations
from pkletd.supervisor.node.cluster import NodeState
from pkletd.supervisor.node.facts import (
    MachineFacts,
    compose_node,
    container_runtime_version,
    node_allocatable,
    node_capacity,
    node_labels,
)
from pkletd.supervisor.node.pressure import NodePressure
from pkletd.supervisor.node.shutdown import NodeShutdown
from pkletd.supervisor.notify import Notifier
from pkletd.supervisor.pods import admission, sysctls
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.cgroups.podcgroups import PodCgroups
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.garbage import GarbageCollector, Thresholds
from pkletd.supervisor.pods.garbagecheck import GarbageCheck
from pkletd.supervisor.pods.garbageremover import GarbageRemover
from pkletd.supervisor.pods.keyring import NO_NODE_CREDENTIALS, NodeCredentials
from pkletd.supervisor.pods.nodeinfo import NodeInfo, kernel_version
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podsync import PodSyncer
from pkletd.supervisor.pods.podworkers import PodWorkers
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.rejectedmanifests import RejectedManifests
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.setup import apparmor
from pkletd.supervisor.pods.setup.podsetup import PodSetup
from pkletd.supervisor.pods.syncloop import Parts, SyncLoop

log = logging.getLogger(__name__)

ALIVE_S = 1.0
FACTS_FROM = {
    PodLifecycleEvent: "pleg",
    RelistCompleted: "pleg",
    PlegModeChanged: "pleg",
    ProbeResult: "prober",
    ProbeMetrics: "prober",
    NodeReported: "node-lease",
    PodDeleted: "status-manager",
    ObjectFetched: "pod-objects",
    TokenIssued: "pod-objects",
    ServicesListed: "pod-objects",
    RuntimeClassesListed: "pod-objects",
    GarbageFound: "image-gc",
    SignalsObserved: "eviction",
    EvictionThresholdMet: "eviction",
    EvictionNeeded: "eviction",
    NodeShutdownStarted: "node-shutdown",
    NodeShutdownCancelled: "node-shutdown",
    InhibitorReported: "node-shutdown",
}
# Pod-source facts (PodsListed, ManifestRejected, ManifestAccepted) come from the worker of
# the source they name, and from no other: source -> worker.
SOURCE_WORKERS = {"file": "file-source", "http": "http-source", "api": "api-watcher"}
WORKER_SOURCES = {worker: source for source, worker in SOURCE_WORKERS.items()}


def node_ip(node_name: str) -> str:
    """The node's first non-loopback IPv4 address by name resolution, else loopback."""
    try:
        infos = socket.getaddrinfo(node_name, None, socket.AF_INET)
    except OSError:
        return "127.0.0.1"
    for info in infos:
        address = str(info[4][0])
        if not address.startswith("127."):
            return address
    return "127.0.0.1"


class Agent:
    def __init__(
        self,
        config: KubeletConfig,
        forkserver: ForkServer,
        worker_names: list[str],
        runtime: Runtime,
        operations: RuntimeOperations,
        node_credentials: NodeCredentials = NO_NODE_CREDENTIALS,
    ) -> None:
        self._config = config
        self._node_credentials = node_credentials  # credential provider plugins
        self._metrics = AgentMetrics(config.node_name, operations)  # counts the runtime's calls
        run_dir = Path(config.run_dir)
        self._forkserver = forkserver
        self._bus = ParentBus(run_dir)
        self._control = ControlServer(run_dir)
        self._notifier = Notifier()
        self._runtime = runtime
        sources = [s for s, worker in SOURCE_WORKERS.items() if worker in worker_names]
        self._pod_workers = PodWorkers(config.pod_sync_parallelism)
        self._probes = ProbeResults()
        host_ip = config.node_ip.split(",")[0] or node_ip(config.node_name)
        self._pods = Pods(host_ip, sources, self._probes)
        self._manifests = RejectedManifests()
        self._events = EventRecorder()
        self._machine = MachineFacts.read(Path(config.root_dir))  # read once, for both uses
        self._node = NodeState(config.node_name, bool(config.kubeconfig), self._events)
        self._node_object: dict[str, Any] = {}  # what the node-lease worker registers
        self._sync = SyncLoop(self._parts(config, worker_names), self._bus.publish)
        self._garbage = GarbageCollector(
            GarbageCheck(self._pods, self._pod_workers.busy),
            GarbageRemover(runtime, Path(config.pod_logs_dir)),
            self._events,
            config.node_name,
            Thresholds(
                config.image_gc_high_threshold_percent, config.image_gc_low_threshold_percent
            ),
            self._bus.publish,
        )
        self._node_shutdown = NodeShutdown.of(config, self._sync, self._events)
        self._pressure = NodePressure(config.node_name, self._events)
        self._children = Children(
            worker_names, forkserver, config.worker_heartbeat_timeout, on_ready=self._worker_ready
        )
        self._stopping = False
        self._signalled = ""
        self._announced_ready = False
        self._next_alive = 0.0
        self._next_report = 0.0
        self._next_watchdog = 0.0
        self._signals = Wakeup()

    def _parts(self, config: KubeletConfig, worker_names: list[str]) -> Parts:
        allocatable = node_allocatable(config, node_capacity(config, self._machine))
        node = NodeInfo(
            config.node_name,
            (self._pods.host_ip,),
            Path(config.root_dir),
            cpu=allocatable["cpu"],
            memory=allocatable["memory"],
            ephemeral_storage=allocatable.get("ephemeral-storage", Fraction(0)),
            kernel=kernel_version(),
            seccomp_default=config.seccomp_default,
        )
        labels = node_labels(config, self._machine)
        # Without the worker that reads them (no API server) there are no objects to wait for.
        objects = ApiObjects(standalone="pod-objects" not in worker_names)
        syncer = PodSyncer(
            self._runtime,
            Path(config.pod_logs_dir),
            self._events,
            PodSetup(node, objects, self._events),
            PodCgroups.host(config.pod_pids_limit).start(),
            objects,
            self._metrics.pods,
            node_credentials=self._node_credentials,
        )
        return Parts(
            runtime=self._runtime,
            syncer=syncer,
            pod_workers=self._pod_workers,
            pods=self._pods,
            probes=self._probes,
            events=self._events,
            admitter=admission.Admitter(self._admitted(node, config, labels), objects.standalone),
            sync_frequency=config.sync_frequency,
            objects=objects,
            metrics=self._metrics.pods,
        )

    @staticmethod
    def _admitted(node: NodeInfo, config: KubeletConfig, labels: dict[str, str]) -> admission.Node:
        """The node as admission sees it; the host's AppArmor is read once, as the kubelet."""
        allowed = sysctls.Allowlist.of(config.allowed_unsafe_sysctls, node.kernel)
        return admission.Node.of(node, config.max_pods, labels, allowed, apparmor.host_enabled())

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
                self._config, self._machine, self._pods.host_ip, runtime
            )
        self._children.start_all()
        while not (self._stopping and self._children.all_stopped()):
            if self._signalled and not self._stopping:
                self._begin_stop(f"signal {self._signalled}")
            timeout = max(0.0, self._tick() - time.monotonic())
            for sock, _ in poller.poll(int(timeout * 1000) + 1):
                self._dispatch(sock)
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
        if sock is self._bus.router:
            self._drain_bus()
        elif sock == self._forkserver.fileno():
            self._on_forkserver()
        elif sock == self._pod_workers.fileno():
            self._sync.on_pod_workers()
        elif sock == self._garbage.fileno():
            self._garbage.on_removed()
        elif sock == self._control.fileno():
            for request in self._control.pending():
                request.reply.put(self._answer(request))
        elif sock == self._signals.fileno():
            self._signals.clear()

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
                    self._node.pleg_ok(),
                    self._node_shutdown.shutting_down,
                    list(self._pressure.conditions),
                )
            )
            self._next_alive = now + ALIVE_S
        if now >= self._next_report:
            report = self._metrics.report(
                self._pods, self._children, self._bus, self._forkserver.pid
            )
            if "node-shutdown" in self._children.workers:
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
        poster = self._children.workers.get("status-manager")
        if poster is not None and poster.state is State.RUNNING:
            for event in self._events.take_new():
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

    def _worker_ready(self, name: str) -> None:
        if name == "http":
            self._next_report = 0.0  # a restarted http worker serves the parent's metrics at once
        if name == "node-shutdown" and self._node_shutdown.done:
            self._bus.publish(ReleaseShutdownInhibitor())  # a restarted worker took a new lock
        if not self._announced_ready and all(
            w.state is State.RUNNING for w in self._children.workers.values()
        ):
            self._announced_ready = True
            self._notifier.send("READY=1")
            log.info("all workers ready")

    def _drain_bus(self) -> None:
        while True:
            try:
                identity, envelope = self._bus.receive()
            except zmq.Again:
                return
            except BadMessage as exc:
                log.error("dropped bad bus message reason=%s", exc)
                continue
            self._on_message(identity, envelope)

    def _on_message(self, identity: bytes, envelope: Envelope) -> None:
        name, _, pid_text = identity.decode(errors="replace").partition("/")
        worker = self._children.workers.get(name)
        pid = int(pid_text) if pid_text.isascii() and pid_text.isdigit() else -1  # not "²"
        if worker is None or worker.pid != pid or envelope.sender != name:
            log.warning(
                "dropped message from unknown or stale worker identity=%r kind=%s",
                identity,
                envelope.message.kind,
            )
            return
        message = envelope.message
        wanted_sender = FACTS_FROM.get(type(message))
        if isinstance(message, (PodsListed, ManifestRejected, ManifestAccepted)):
            wanted_sender = SOURCE_WORKERS.get(message.source, "")  # unknown: nobody
        if wanted_sender is not None and wanted_sender != name:
            log.error("dropped message from the wrong worker worker=%s kind=%s", name, message.kind)
            return
        self._children.heartbeat(name, pid)
        if isinstance(message, (Hello, SnapshotRequest)):
            self._manifests.forget(WORKER_SOURCES.get(name, ""))  # it reports them again
            self._bus.reply(identity, self._snapshot())
        elif isinstance(message, WorkerReady):
            self._children.ready(name, pid)
        elif isinstance(message, Heartbeat):
            pass
        elif isinstance(message, PodsListed):
            self._sync.on_pods_listed(message)
        elif isinstance(message, (ManifestRejected, ManifestAccepted)):
            self._on_manifest(message)
        elif isinstance(message, PodLifecycleEvent):
            self._sync.on_lifecycle_event(message)
        elif isinstance(message, ProbeResult):
            self._sync.on_probe_result(message, envelope.sent_at)
        elif isinstance(message, ProbeMetrics):
            self._sync.on_probe_metrics(message)
        elif isinstance(message, RelistCompleted):
            self._node.relisted()
            self._metrics.pleg.relisted(message.duration_s, envelope.sent_at)
        elif isinstance(message, PlegModeChanged):
            self._node.pleg_mode(message)
        elif isinstance(message, NodeReported):
            self._node.reported(message)
        elif isinstance(message, PodDeleted):
            self._pods.final_delete_done(message.uid)
        elif isinstance(message, ObjectFetched):
            self._sync.on_object_fetched(message)
        elif isinstance(message, TokenIssued):
            self._sync.on_token_issued(message)
        elif isinstance(message, ServicesListed):
            self._sync.on_services_listed(message)
        elif isinstance(message, RuntimeClassesListed):
            self._sync.on_runtime_classes_listed(message)
        elif isinstance(message, GarbageFound):
            self._garbage.on_found(message)
        elif isinstance(message, ReclaimRequested):
            self._garbage.reclaim(message.reason)
        elif isinstance(message, (NodeShutdownStarted, NodeShutdownCancelled)):
            self._on_node_shutdown(message)
        elif isinstance(message, InhibitorReported):
            self._node_shutdown.inhibitor(message)
        elif isinstance(message, SignalsObserved):
            self._on_signals(message)
        elif isinstance(message, EvictionThresholdMet):
            self._pressure.threshold_met(message)
        elif isinstance(message, EvictionNeeded):
            self._sync.evict(message, self._config.eviction_max_pod_grace_period)
        else:
            log.warning(
                "dropped message not meant for the parent kind=%s worker=%s", message.kind, name
            )

    def _on_node_shutdown(self, message: NodeShutdownStarted | NodeShutdownCancelled) -> None:
        if isinstance(message, NodeShutdownStarted):
            self._node_shutdown.started()
        else:
            self._node_shutdown.cancelled()
        self._next_alive = 0.0  # the node's Ready follows at once

    def _on_signals(self, message: SignalsObserved) -> None:
        if self._pressure.observed(message):
            self._sync.under_pressure(self._pressure.conditions)
            self._next_alive = 0.0  # the node's conditions follow at once

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            self._bus.seq,
            self._pods.api_pods(),
            self._pods.runtime_objects(),
            self._probes.snapshot(),
            self._probes.metrics,
            self._node_object,
            self._pods.awaiting_delete(),
            self._pressure.state,
        )

    # --- control -------------------------------------------------------------------

    def _on_manifest(self, message: ManifestRejected | ManifestAccepted) -> None:
        if isinstance(message, ManifestAccepted):
            log.info("manifest accepted source=%s path=%s", message.source, message.path)
            self._manifests.accepted(message.source, message.path)
            return
        log.error(
            "manifest rejected source=%s path=%s reason=%s",
            message.source,
            message.path,
            message.reason,
        )
        self._manifests.rejected(message.source, message.path, message.reason, time.time())

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
                **self._sync.status(events=request.body.get("events") is True),
            }
        if command == "restart-worker":
            name = request.body.get("name")
            if not isinstance(name, str):
                return {"ok": False, "error": "restart-worker needs a worker name (a string)"}
            if name not in self._children.workers:
                return {
                    "ok": False,
                    "error": f"no worker named {name!r}",
                    "names": sorted(self._children.workers),
                }
            self._children.restart(name)
            return {"ok": True}
        if command == "stop":
            self._begin_stop("stop requested")
            return {"ok": True}
        return {"ok": False, "error": f"unknown command {command!r}"}

    def _node_status(self) -> dict[str, Any]:
        found = self._node.status()
        if "node-shutdown" in self._children.workers:
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
