"""The parent's message routing: one table, message type -> the workers allowed to send it
-> its handler (``routes``), checked in one place (``Router.route``).

A message reaches its handler only from a worker the parent runs (the bus identity is
``<name>/<pid>`` with the pid that worker has now, and the envelope's sender is that name)
and allowed to send it: a fact only from the worker that observes it (PLEG's events from
pleg, probe results from the prober...), a source's pods only from the worker of the source
they name, the lifecycle messages (Hello, SnapshotRequest, WorkerReady, Heartbeat) from any.
Any message from a running worker counts as its heartbeat, unless that worker may not send
it. Anything else is dropped with one log line naming the worker and the kind: a message
from a worker not allowed to send it, or of a kind with no row (a broadcast sent back).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Generic, Protocol, TypeVar

from pkletd.ipc.bus.codec import Envelope
from pkletd.ipc.bus.messages import (
    ApiPodsObserved,
    ClientCertificateReported,
    CsiDriverGone,
    CsiDriverRegistered,
    CsiDriversListed,
    EvictionNeeded,
    EvictionThresholdMet,
    GarbageFound,
    Heartbeat,
    Hello,
    InhibitorReported,
    ManifestAccepted,
    ManifestRejected,
    Message,
    NodeReported,
    NodeShutdownCancelled,
    NodeShutdownStarted,
    ObjectFetched,
    PlegModeChanged,
    PodDeleted,
    PodLifecycleEvent,
    PodsListed,
    ProbeMetrics,
    ProbeResult,
    ReclaimRequested,
    RelistCompleted,
    RuntimeClassesListed,
    ServicesListed,
    SignalsObserved,
    SnapshotRequest,
    TokenIssued,
    WorkerReady,
)
from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor.children import Children, WorkerProcess
from pkletd.supervisor.workerset import SOURCE_WORKERS

log = logging.getLogger(__name__)

M = TypeVar("M", bound=Message)
M_co = TypeVar("M_co", bound=Message, covariant=True)


@dataclass(frozen=True, slots=True)
class Received(Generic[M_co]):
    """A message from a worker allowed to send it, as its handler gets it."""

    worker: WorkerName
    pid: int
    identity: bytes  # the bus identity, to reply to
    sent_at: float  # the sender's monotonic clock
    message: M_co


Senders = Callable[[M], frozenset[WorkerName]]  # the workers that may send this message


@dataclass(frozen=True, slots=True)
class Route(Generic[M]):
    senders: Senders[M]
    handle: Callable[[Received[M]], None]


Routes = dict[type[Any], Route[Any]]  # a message class -> its route


def any_worker(_message: Message) -> frozenset[WorkerName]:
    return frozenset(WorkerName)


def source_worker(
    message: PodsListed | ManifestRejected | ManifestAccepted,
) -> frozenset[WorkerName]:
    """The worker of the pod source the message names, and no other."""
    return frozenset({SOURCE_WORKERS[message.source]})


Row = tuple[type[Any], Route[Any]]


def row(
    kind: type[M], senders: WorkerName | Senders[M], handle: Callable[[Received[M]], None]
) -> Row:
    """One row; ``senders`` a worker's name: that worker alone."""
    if isinstance(senders, WorkerName):
        allowed = frozenset({senders})
        return kind, Route(lambda _message: allowed, handle)
    return kind, Route(senders, handle)


def table(*rows: Row) -> Routes:
    found = dict(rows)
    if len(found) != len(rows):
        raise ValueError("a message type has two rows in the routing table")
    return found


class Handlers(Protocol):
    """What the parent does with each message a worker may send it (one per row)."""

    def snapshot_wanted(self, got: Received[Hello | SnapshotRequest]) -> None: ...
    def worker_ready(self, got: Received[WorkerReady]) -> None: ...
    def heartbeat(self, got: Received[Heartbeat]) -> None: ...
    def pods_listed(self, got: Received[PodsListed]) -> None: ...
    def api_pods_observed(self, got: Received[ApiPodsObserved]) -> None: ...
    def manifest_rejected(self, got: Received[ManifestRejected]) -> None: ...
    def manifest_accepted(self, got: Received[ManifestAccepted]) -> None: ...
    def lifecycle_event(self, got: Received[PodLifecycleEvent]) -> None: ...
    def relist_completed(self, got: Received[RelistCompleted]) -> None: ...
    def pleg_mode_changed(self, got: Received[PlegModeChanged]) -> None: ...
    def probe_result(self, got: Received[ProbeResult]) -> None: ...
    def probe_metrics(self, got: Received[ProbeMetrics]) -> None: ...
    def node_reported(self, got: Received[NodeReported]) -> None: ...
    def pod_deleted(self, got: Received[PodDeleted]) -> None: ...
    def object_fetched(self, got: Received[ObjectFetched]) -> None: ...
    def token_issued(self, got: Received[TokenIssued]) -> None: ...
    def services_listed(self, got: Received[ServicesListed]) -> None: ...
    def runtime_classes_listed(self, got: Received[RuntimeClassesListed]) -> None: ...
    def garbage_found(self, got: Received[GarbageFound]) -> None: ...
    def reclaim_requested(self, got: Received[ReclaimRequested]) -> None: ...
    def signals_observed(self, got: Received[SignalsObserved]) -> None: ...
    def eviction_threshold_met(self, got: Received[EvictionThresholdMet]) -> None: ...
    def eviction_needed(self, got: Received[EvictionNeeded]) -> None: ...
    def node_shutdown(self, got: Received[NodeShutdownStarted | NodeShutdownCancelled]) -> None: ...
    def inhibitor_reported(self, got: Received[InhibitorReported]) -> None: ...
    def client_certificate_reported(self, got: Received[ClientCertificateReported]) -> None: ...
    def csi_driver_registered(self, got: Received[CsiDriverRegistered]) -> None: ...
    def csi_driver_gone(self, got: Received[CsiDriverGone]) -> None: ...
    def csi_drivers_listed(self, got: Received[CsiDriversListed]) -> None: ...


def routes(to: Handlers) -> Routes:
    """The table: message type -> the workers allowed to send it -> its handler."""
    return table(
        row(Hello, any_worker, to.snapshot_wanted),
        row(SnapshotRequest, any_worker, to.snapshot_wanted),
        row(WorkerReady, any_worker, to.worker_ready),
        row(Heartbeat, any_worker, to.heartbeat),
        row(PodsListed, source_worker, to.pods_listed),
        row(ApiPodsObserved, WorkerName.API_WATCHER, to.api_pods_observed),
        row(ManifestRejected, source_worker, to.manifest_rejected),
        row(ManifestAccepted, source_worker, to.manifest_accepted),
        row(PodLifecycleEvent, WorkerName.PLEG, to.lifecycle_event),
        row(RelistCompleted, WorkerName.PLEG, to.relist_completed),
        row(PlegModeChanged, WorkerName.PLEG, to.pleg_mode_changed),
        row(ProbeResult, WorkerName.PROBER, to.probe_result),
        row(ProbeMetrics, WorkerName.PROBER, to.probe_metrics),
        row(NodeReported, WorkerName.NODE_LEASE, to.node_reported),
        row(PodDeleted, WorkerName.STATUS_MANAGER, to.pod_deleted),
        row(ObjectFetched, WorkerName.POD_OBJECTS, to.object_fetched),
        row(TokenIssued, WorkerName.POD_OBJECTS, to.token_issued),
        row(ServicesListed, WorkerName.POD_OBJECTS, to.services_listed),
        row(RuntimeClassesListed, WorkerName.POD_OBJECTS, to.runtime_classes_listed),
        row(GarbageFound, WorkerName.IMAGE_GC, to.garbage_found),
        row(ReclaimRequested, WorkerName.EVICTION, to.reclaim_requested),
        row(SignalsObserved, WorkerName.EVICTION, to.signals_observed),
        row(EvictionThresholdMet, WorkerName.EVICTION, to.eviction_threshold_met),
        row(EvictionNeeded, WorkerName.EVICTION, to.eviction_needed),
        row(NodeShutdownStarted, WorkerName.NODE_SHUTDOWN, to.node_shutdown),
        row(NodeShutdownCancelled, WorkerName.NODE_SHUTDOWN, to.node_shutdown),
        row(InhibitorReported, WorkerName.NODE_SHUTDOWN, to.inhibitor_reported),
        row(
            ClientCertificateReported,
            WorkerName.CERT_MANAGER,
            to.client_certificate_reported,
        ),
        row(CsiDriverRegistered, WorkerName.PLUGIN_WATCHER, to.csi_driver_registered),
        row(CsiDriverGone, WorkerName.PLUGIN_WATCHER, to.csi_driver_gone),
        row(CsiDriversListed, WorkerName.PLUGIN_WATCHER, to.csi_drivers_listed),
    )


class Router:
    """Checks who sent each message against the table and hands it to its handler."""

    def __init__(self, table: Routes, children: Children) -> None:
        self._table = table
        self._children = children

    def route(self, identity: bytes, envelope: Envelope) -> None:
        worker = self._sender(identity, envelope)
        if worker is None:
            return
        message = envelope.message
        found = self._table.get(type(message))
        if found is not None and worker.name not in found.senders(message):
            log.error(
                "dropped message from the wrong worker worker=%s kind=%s", worker.name, message.kind
            )
            return
        self._children.heartbeat(worker.name, worker.pid)
        if found is None:
            log.warning(
                "dropped message not meant for the parent kind=%s worker=%s",
                message.kind,
                worker.name,
            )
            return
        found.handle(Received(worker.name, worker.pid, identity, envelope.sent_at, message))

    def _sender(self, identity: bytes, envelope: Envelope) -> WorkerProcess | None:
        """The running worker behind this identity and sender, else None (logged)."""
        name, _, pid_text = identity.decode(errors="replace").partition("/")
        known = WorkerName.of(name)
        worker = self._children.workers.get(known) if known is not None else None
        pid = int(pid_text) if pid_text.isascii() and pid_text.isdigit() else -1  # not "²"
        if worker is None or worker.pid != pid or envelope.sender != name:
            log.warning(
                "dropped message from unknown or stale worker identity=%r kind=%s",
                identity,
                envelope.message.kind,
            )
            return None
        return worker
