"""The parent's loop: the syncLoop and the worker supervisor in one thread.

One ``zmq.Poller`` wakes on everything that can happen: a worker's message (bus
ROUTER), a worker's death (the fork server's socket), a finished pod sync and a
control request (eventfds), a signal (the wakeup pipe). Timers (worker deadlines,
pod requeues, housekeeping, watchdog) set the poll timeout. No state is touched
off this thread except by the pod-sync threads, which only call the runtime.
"""

from __future__ import annotations

import heapq
import logging
import os
import signal
import socket
import time
from pathlib import Path
from typing import Any

import zmq
from pkletd.ipc.bus import ParentBus
from pkletd.ipc.codec import BadMessage, Envelope
from pkletd.ipc.cri import CriError, CriRuntime
from pkletd.ipc.messages import (
    Heartbeat,
    Hello,
    ManifestRejected,
    ParentAlive,
    PodForgotten,
    PodLifecycleEvent,
    PodsListed,
    PodStatusUpdated,
    ProbeMetrics,
    ProbeResult,
    RelistCompleted,
    Snapshot,
    SnapshotRequest,
    WorkerReady,
)
from pkletd.ipc.podspec import Pod
from pkletd.supervisor import admission
from pkletd.supervisor.cgroups import PodCgroups
from pkletd.supervisor.children import Children, State
from pkletd.supervisor.config import KubeletConfig
from pkletd.supervisor.control import ControlServer, Request
from pkletd.supervisor.events import EventRecorder, Reason
from pkletd.supervisor.forkserver import Exited, ForkServer, Spawned
from pkletd.supervisor.nodeinfo import NodeInfo
from pkletd.supervisor.notify import Notifier
from pkletd.supervisor.pods import Pods
from pkletd.supervisor.podsetup import PodSetup
from pkletd.supervisor.podsync import PodSyncer, SyncOptions, SyncResult
from pkletd.supervisor.podworkers import PodWorkers
from pkletd.supervisor.proberesults import ProbeResults

log = logging.getLogger(__name__)

HOUSEKEEPING_S = 2.0
ALIVE_S = 1.0
FACTS_FROM = {
    PodLifecycleEvent: "pleg",
    RelistCompleted: "pleg",
    ProbeResult: "prober",
    ProbeMetrics: "prober",
}
# Pod-source facts (PodsListed, ManifestRejected) come from the worker of the source
# they name, and from no other: source -> worker.
SOURCE_WORKERS = {"file": "file-source", "http": "http-source"}
DEADLINE_EXCEEDED = "DeadlineExceeded"
DEADLINE_MESSAGE = "Pod was active on the node longer than the specified deadline"
PROBE_RESULT_TTL_S = 10.0  # an older result is history, not a reason to act


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
        self, config: KubeletConfig, forkserver: ForkServer, worker_names: list[str]
    ) -> None:
        self._config = config
        run_dir = Path(config.run_dir)
        self._forkserver = forkserver
        self._bus = ParentBus(run_dir)
        self._control = ControlServer(run_dir)
        self._notifier = Notifier()
        self._runtime = CriRuntime(
            config.container_runtime_endpoint, config.runtime_request_timeout
        )
        self._events = EventRecorder()
        host_ip = node_ip(config.node_name)
        node = NodeInfo.detect(config.node_name, (host_ip,), Path(config.root_dir))
        self._syncer = PodSyncer(
            self._runtime,
            Path(config.pod_logs_dir),
            self._events,
            setup=PodSetup(node, self._runtime),
            cgroups=PodCgroups.host(config.pod_pids_limit).start(),
        )
        self._pod_workers = PodWorkers(config.pod_sync_parallelism)
        sources = [s for s, worker in SOURCE_WORKERS.items() if worker in worker_names]
        self._probes = ProbeResults()
        self._pods = Pods(host_ip, sources, self._probes)
        self._admitter = admission.Admitter(admission.Node.of(node, config.max_pods))
        self._children = Children(
            worker_names, forkserver, config.worker_heartbeat_timeout, on_ready=self._worker_ready
        )
        self._requeue: list[tuple[float, str]] = []
        self._due: dict[str, float] = {}
        self._terminating: set[str] = set()
        self._stopping = False
        self._signalled = ""
        self._announced_ready = False
        self._runtime_ok = True
        self._next_housekeeping = 0.0
        self._next_alive = 0.0
        self._next_watchdog = 0.0
        self._wake_r, self._wake_w = os.pipe()
        os.set_blocking(self._wake_r, False)
        os.set_blocking(self._wake_w, False)

    # --- the loop ------------------------------------------------------------------

    def run(self) -> int:
        signal.set_wakeup_fd(self._wake_w)
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, self._on_signal)
        poller = zmq.Poller()
        poller.register(self._bus.router, zmq.POLLIN)
        for fd in (
            self._forkserver.fileno(),
            self._pod_workers.wake_fd,
            self._control.wake_fd,
            self._wake_r,
        ):
            poller.register(fd, zmq.POLLIN)
        log.info(
            "supervisor started node=%s runtime=%s", self._config.node_name, self._runtime_version()
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
        elif sock == self._pod_workers.wake_fd:
            for uid, outcome in self._pod_workers.completed():
                self._on_sync_done(uid, outcome)
        elif sock == self._control.wake_fd:
            for request in self._control.pending():
                request.reply.put(self._on_control(request))
        elif sock == self._wake_r:
            try:
                os.read(self._wake_r, 512)
            except BlockingIOError:
                pass

    def _tick(self) -> float:
        now = time.monotonic()
        deadlines = [self._children.tick()]
        deadlines.append(self._run_requeues(now))
        if now >= self._next_housekeeping and not self._stopping:
            self._housekeeping()
            self._next_housekeeping = now + HOUSEKEEPING_S
        if now >= self._next_alive:
            self._bus.publish(ParentAlive(self._runtime_ok))
            self._next_alive = now + ALIVE_S
        if self._notifier.watchdog_interval and now >= self._next_watchdog:
            if self._children.heartbeats_fresh():
                self._notifier.send("WATCHDOG=1")
            self._next_watchdog = now + self._notifier.watchdog_interval
        deadlines += [self._next_housekeeping, self._next_alive]
        if self._notifier.watchdog_interval:
            deadlines.append(self._next_watchdog)
        return min(deadlines)

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
        pid = int(pid_text) if pid_text.isdigit() else -1
        if worker is None or worker.pid != pid or envelope.sender != name:
            log.warning(
                "dropped message from unknown or stale worker identity=%r kind=%s",
                identity,
                envelope.message.kind,
            )
            return
        message = envelope.message
        wanted_sender = FACTS_FROM.get(type(message))
        if isinstance(message, (PodsListed, ManifestRejected)):
            wanted_sender = SOURCE_WORKERS.get(message.source, "")  # unknown: nobody
        if wanted_sender is not None and wanted_sender != name:
            log.error("dropped message from the wrong worker worker=%s kind=%s", name, message.kind)
            return
        self._children.heartbeat(name, pid)
        if isinstance(message, (Hello, SnapshotRequest)):
            self._bus.reply(identity, self._snapshot())
        elif isinstance(message, WorkerReady):
            self._children.ready(name, pid)
        elif isinstance(message, Heartbeat):
            pass
        elif isinstance(message, PodsListed):
            self._on_pods_listed(message)
        elif isinstance(message, ManifestRejected):
            log.error(
                "manifest rejected source=%s path=%s reason=%s",
                message.source,
                message.path,
                message.reason,
            )
        elif isinstance(message, PodLifecycleEvent):
            self._on_lifecycle_event(message)
        elif isinstance(message, ProbeResult):
            self._on_probe_result(message, envelope.sent_at)
        elif isinstance(message, ProbeMetrics):
            self._probes.metrics = message.samples
            self._bus.publish(message)
        elif isinstance(message, RelistCompleted):
            pass
        else:
            log.warning(
                "dropped message not meant for the parent kind=%s worker=%s", message.kind, name
            )

    def _snapshot(self) -> Snapshot:
        return Snapshot(
            self._bus.seq,
            self._pods.api_pods(),
            self._pods.runtime_objects(),
            self._probes.snapshot(),
            self._probes.metrics,
        )

    # --- pods --------------------------------------------------------------------------

    def _on_pods_listed(self, message: PodsListed) -> None:
        change = self._pods.set_source(message.source, message.pods)
        for pod in change.sync:
            if self._pods.admitted(pod.uid) or self._admit(pod):
                self._sync(pod)
        for pod in change.terminate:
            self._terminate(pod.uid, pod, pod.grace_period_s)

    def _admit(self, pod: Pod) -> bool:
        rejection = self._admitter.admit(pod, self._pods.active())
        if rejection is None:
            self._pods.admit(pod.uid)
            return True
        self._events.warning(pod.full_name, rejection.reason, rejection.message)
        api_pod = self._pods.reject(pod.uid, rejection.reason.value, rejection.message)
        if api_pod is not None:
            self._bus.publish(PodStatusUpdated(api_pod))
        return False

    def _on_lifecycle_event(self, event: PodLifecycleEvent) -> None:
        uid = event.pod_uid or self._pods.owner(event.object_id)
        pod = self._pods.get(uid)
        if pod is not None and not self._pods.already_seen(uid, event):
            self._sync(pod)
        elif uid and self._pods.sources_ready and uid not in self._terminating:
            self._terminate(uid, None, None)

    def _on_probe_result(self, result: ProbeResult, sent_at: float) -> None:
        """Act on a probe's new state, if it is fresh and about the running container."""
        pod = self._pods.get(result.pod_uid)
        if pod is None or time.monotonic() - sent_at > PROBE_RESULT_TTL_S:
            return
        if self._pods.running_id(result.pod_uid, result.container) != result.container_id:
            return  # about a container that is gone or replaced
        if not self._probes.record(result):
            return
        kind = result.probe.capitalize()
        if result.result == "failure":
            self._events.warning(
                pod.full_name, Reason.UNHEALTHY, f"{kind} probe failed: {result.output}"
            )
        if result.result == "failure" and result.probe in ("liveness", "startup"):
            self._kill_unhealthy(pod, result)
            return
        if result.probe == "startup":
            self._sync(pod)  # a started sidecar lets the next init container go
        api_pod = self._pods.refresh(pod.uid)
        if api_pod is not None:
            self._bus.publish(PodStatusUpdated(api_pod))

    def _kill_unhealthy(self, pod: Pod, result: ProbeResult) -> None:
        container = next((c for c in pod.containers if c.name == result.container), None)
        if container is None:
            return
        probe = container.probe(result.probe)
        grace = pod.grace_period_s
        if probe is not None and probe.termination_grace_s is not None:
            grace = probe.termination_grace_s
        self._events.normal(
            pod.full_name,
            Reason.KILLING,
            f"Container {container.name} failed {result.probe} probe, will be restarted",
        )
        self._syncer.request_kill(pod.uid, result.container_id, grace)
        self._sync(pod)

    def _sync(self, pod: Pod) -> None:
        options = SyncOptions(self._probes.passed_startup(pod.uid), self._deadline_passed(pod))
        self._pod_workers.update(pod.uid, lambda: self._syncer.sync(pod, options))

    def _deadline_passed(self, pod: Pod) -> bool:
        """activeDeadlineSeconds: past it, the pod fails and its containers stop."""
        left = self._pods.deadline_left(pod.uid)
        if left is None or left > 0:
            return False
        if self._pods.fail(pod.uid, DEADLINE_EXCEEDED, DEADLINE_MESSAGE):
            self._events.normal(pod.full_name, Reason.DEADLINE_EXCEEDED, DEADLINE_MESSAGE)
        return True

    def _terminate(self, uid: str, pod: Pod | None, grace: int | None) -> None:
        self._terminating.add(uid)
        self._pod_workers.update(uid, lambda: self._syncer.terminate(uid, pod, grace))

    def _on_sync_done(self, uid: str, outcome: SyncResult | BaseException) -> None:
        if isinstance(outcome, BaseException):
            log.error("pod sync failed uid=%s error=%s", uid, outcome)
            self._schedule(uid, 10.0)
            return
        if outcome.terminated:
            self._terminating.discard(uid)
            self._syncer.forget(uid)
            self._probes.forget(uid)
            self._admitter.forget(uid)
            if self._pods.forget(uid):
                self._bus.publish(PodForgotten(uid))
            else:
                self._schedule(uid, 0.0)  # it came back while we were stopping it
            return
        api_pod = self._pods.record(outcome)
        if api_pod is not None:
            self._bus.publish(PodStatusUpdated(api_pod, outcome.runtime.objects()))
        delays = [self._config.sync_frequency]
        if outcome.retry_in is not None:
            delays.append(outcome.retry_in)
        left = self._pods.deadline_left(uid)
        if left is not None and left > 0:
            delays.append(left)
        self._schedule(uid, min(delays))

    def _schedule(self, uid: str, delay: float) -> None:
        due = time.monotonic() + delay
        if self._due.get(uid, float("inf")) <= due:
            return
        self._due[uid] = due
        heapq.heappush(self._requeue, (due, uid))

    def _run_requeues(self, now: float) -> float:
        while self._requeue and self._requeue[0][0] <= now:
            due, uid = heapq.heappop(self._requeue)
            if self._due.get(uid) != due:
                continue
            del self._due[uid]
            pod = self._pods.get(uid)
            if pod is not None and not self._stopping:
                self._sync(pod)
        return self._requeue[0][0] if self._requeue else now + 60.0

    def _housekeeping(self) -> None:
        """Terminate pods the runtime runs that no source wants (after every source spoke)."""
        try:
            sandboxes = self._runtime.list_sandboxes()
            self._runtime_ok = True
        except CriError as exc:
            log.error("housekeeping: runtime list failed error=%s", exc)
            self._runtime_ok = False
            return
        if not self._pods.sources_ready:
            return
        for sandbox in sandboxes:
            uid = sandbox.uid
            if (
                uid
                and self._pods.get(uid) is None
                and uid not in self._terminating
                and not self._pod_workers.busy(uid)
            ):
                log.info(
                    "orphaned pod found pod=%s/%s uid=%s", sandbox.namespace, sandbox.name, uid
                )
                self._terminate(uid, None, None)

    # --- control -------------------------------------------------------------------

    def _on_control(self, request: Request) -> dict[str, Any]:
        command = request.body["command"]
        if command == "status":
            now = time.monotonic()
            return {
                "ok": True,
                "workers": [w.as_dict(now) for w in self._children.workers.values()],
                "pods": self._pods.summary(),
                "events": self._events.recent(),
            }
        if command == "restart-worker":
            name = request.body.get("name")
            if name not in self._children.workers:
                return {
                    "ok": False,
                    "error": f"no worker named {name!r}",
                    "names": sorted(self._children.workers),
                }
            self._children.restart(str(name))
            return {"ok": True}
        if command == "stop":
            self._begin_stop("stop requested")
            return {"ok": True}
        return {"ok": False, "error": f"unknown command {command!r}"}

    # --- shutdown --------------------------------------------------------------------

    def _begin_stop(self, why: str) -> None:
        if self._stopping:
            return
        self._stopping = True
        log.info("stopping supervisor reason=%s; pods keep running", why)
        self._notifier.send("STOPPING=1")
        self._children.stop_all()

    def _shutdown(self) -> None:
        self._control.close()
        self._pod_workers.shutdown()
        self._bus.close()
        self._forkserver.close()
        self._runtime.close()
        log.info("supervisor stopped")

    def emergency_stop(self) -> None:
        """The loop died: take the workers down with us (pods stay)."""
        self._children.stop_all()
        self._forkserver.close()
