"""What the parent does with each message a worker sends it: the handlers the routing table
(``routing.routes``) names, over the parent's parts. A handler runs only for a message from
a worker allowed to send it; the router has checked that.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable

from pkletd.ipc.bus.messages import (
    ApiPodsObserved,
    ClientCertificateReported,
    CsiDriverGone,
    CsiDriverRegistered,
    CsiDriversChanged,
    CsiDriversListed,
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
    Snapshot,
    SnapshotRequest,
    TokenIssued,
    WorkerReady,
)
from pkletd.supervisor.children import Children
from pkletd.supervisor.parts import ParentParts
from pkletd.supervisor.routing import Received
from pkletd.supervisor.workerset import API_WORKERS, WORKER_SOURCES

log = logging.getLogger(__name__)


class ParentHandlers:
    """``routing.Handlers`` over the parent's parts. ``snapshot`` makes the node state a
    worker begins from; ``alive_now`` has the parent broadcast ParentAlive at once (the
    node's conditions changed)."""

    def __init__(
        self,
        parts: ParentParts,
        children: Children,
        snapshot: Callable[[], Snapshot],
        alive_now: Callable[[], None],
    ) -> None:
        self._parts = parts
        self._children = children
        self._snapshot = snapshot
        self._alive_now = alive_now

    # --- every worker's lifecycle -------------------------------------------------

    def snapshot_wanted(self, got: Received[Hello | SnapshotRequest]) -> None:
        source = WORKER_SOURCES.get(got.worker)
        if source is not None:
            self._parts.manifests.forget(source)  # a source worker reports them again
        self._parts.bus.reply(got.identity, self._snapshot())

    def worker_ready(self, got: Received[WorkerReady]) -> None:
        self._children.ready(got.worker, got.pid)

    def heartbeat(self, got: Received[Heartbeat]) -> None:
        """Nothing more: any message from the worker counted as its heartbeat."""

    # --- pod sources ----------------------------------------------------------------

    def pods_listed(self, got: Received[PodsListed]) -> None:
        self._parts.sync.on_pods_listed(got.message)

    def api_pods_observed(self, got: Received[ApiPodsObserved]) -> None:
        """Kept for snapshots and handed on to the status manager (``pods/apiview.py``)."""
        self._parts.api_view.observed(got.message)
        self._parts.bus.publish(got.message)

    def manifest_rejected(self, got: Received[ManifestRejected]) -> None:
        message = got.message
        log.error(
            "manifest rejected source=%s path=%s reason=%s",
            message.source,
            message.path,
            message.reason,
        )
        self._parts.manifests.rejected(message.source, message.path, message.reason, time.time())

    def manifest_accepted(self, got: Received[ManifestAccepted]) -> None:
        message = got.message
        log.info("manifest accepted source=%s path=%s", message.source, message.path)
        self._parts.manifests.accepted(message.source, message.path)

    # --- PLEG and the prober --------------------------------------------------------

    def lifecycle_event(self, got: Received[PodLifecycleEvent]) -> None:
        self._parts.sync.on_lifecycle_event(got.message)

    def relist_completed(self, got: Received[RelistCompleted]) -> None:
        self._parts.node.relisted()
        self._parts.metrics.pleg.relisted(got.message.duration_s, got.sent_at)

    def pleg_mode_changed(self, got: Received[PlegModeChanged]) -> None:
        self._parts.node.pleg_mode(got.message)

    def probe_result(self, got: Received[ProbeResult]) -> None:
        self._parts.sync.on_probe_result(got.message, got.sent_at)

    def probe_metrics(self, got: Received[ProbeMetrics]) -> None:
        self._parts.sync.on_probe_metrics(got.message)

    # --- the cluster ----------------------------------------------------------------

    def client_certificate_reported(self, got: Received[ClientCertificateReported]) -> None:
        """A first pair starts the API workers held for it; a new one (rotated, or
        bootstrapped again) restarts them gracefully, so each uses it from then on."""
        report = got.message
        previous = self._parts.node.certificate_reported(report)
        if report.error:
            log.error("client certificate problem error=%s", report.error)
        if not report.path or report.path == previous:
            return
        if self._children.held:
            log.info("client certificate ready path=%s; starting the API workers", report.path)
            self._children.release("client certificate issued")
            return
        if previous:
            log.info("client certificate renewed path=%s; restarting the API workers", report.path)
            for name in API_WORKERS:
                if name in self._children.workers:
                    self._children.restart(name)

    def csi_driver_registered(self, got: Received[CsiDriverRegistered]) -> None:
        self._csi_drivers_changed(lambda: self._parts.csi_drivers.registered(got.message))

    def csi_driver_gone(self, got: Received[CsiDriverGone]) -> None:
        self._csi_drivers_changed(lambda: self._parts.csi_drivers.gone(got.message.name))

    def csi_drivers_listed(self, got: Received[CsiDriversListed]) -> None:
        self._csi_drivers_changed(lambda: self._parts.csi_drivers.listed(got.message.drivers))

    def _csi_drivers_changed(self, change: Callable[[], None]) -> None:
        """Apply ``change`` to the registry; the workers hear of the drivers' sockets when
        they changed (the http worker's volume stats; a restarted one has its snapshot)."""
        before = self._parts.csi_drivers.endpoints()
        change()
        after = self._parts.csi_drivers.endpoints()
        if after != before:
            self._parts.bus.publish(CsiDriversChanged(after))

    def node_reported(self, got: Received[NodeReported]) -> None:
        self._parts.node.reported(got.message)

    def pod_deleted(self, got: Received[PodDeleted]) -> None:
        self._parts.pods.final_delete_done(got.message.uid)

    def object_fetched(self, got: Received[ObjectFetched]) -> None:
        self._parts.sync.on_object_fetched(got.message)

    def token_issued(self, got: Received[TokenIssued]) -> None:
        self._parts.sync.on_token_issued(got.message)

    def services_listed(self, got: Received[ServicesListed]) -> None:
        self._parts.sync.on_services_listed(got.message)

    def runtime_classes_listed(self, got: Received[RuntimeClassesListed]) -> None:
        self._parts.sync.on_runtime_classes_listed(got.message)

    # --- garbage collection and eviction ------------------------------------------

    def garbage_found(self, got: Received[GarbageFound]) -> None:
        self._parts.garbage.on_found(got.message)

    def reclaim_requested(self, got: Received[ReclaimRequested]) -> None:
        self._parts.garbage.reclaim(got.message.reason)

    def signals_observed(self, got: Received[SignalsObserved]) -> None:
        if self._parts.pressure.observed(got.message):
            self._parts.sync.under_pressure(self._parts.pressure.conditions)
            self._alive_now()  # the node's conditions follow at once

    def eviction_threshold_met(self, got: Received[EvictionThresholdMet]) -> None:
        self._parts.pressure.threshold_met(got.message)

    def eviction_needed(self, got: Received[EvictionNeeded]) -> None:
        self._parts.sync.evict(got.message, self._parts.config.eviction_max_pod_grace_period)

    # --- the node's shutdown ------------------------------------------------------

    def node_shutdown(self, got: Received[NodeShutdownStarted | NodeShutdownCancelled]) -> None:
        if isinstance(got.message, NodeShutdownStarted):
            self._parts.node_shutdown.started()
        else:
            self._parts.node_shutdown.cancelled()
        self._alive_now()  # the node's Ready follows at once

    def inhibitor_reported(self, got: Received[InhibitorReported]) -> None:
        self._parts.node_shutdown.inhibitor(got.message)
