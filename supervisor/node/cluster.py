"""The parent's view of its place in the cluster: what the node-lease worker reports,
whether PLEG is healthy, and the node's own events.

``NodeState`` is fed by the agent (``reported`` for each ``NodeReported``,
``relisted`` for each PLEG relist, ``pleg_mode`` for each ``PlegModeChanged``), answers
``pleg_ok`` for the ``ParentAlive`` broadcast (the kubelet's PLEG thresholds: 3 minutes
since the last relist, 10 while runtime events flow and relists are 5 minutes apart;
a mode change applies its threshold at once, as the kubelet's does), records the kubelet's node
events (``Starting``, ``NodeHasSufficientMemory``..., ``NodeReady``/``NodeNotReady``
on each change of a condition) and says what ``pkletd status`` shows of the node.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pkletd.ipc.bus.messages import (
    ClientCertificateReported,
    NodeReported,
    PlegMode,
    PlegModeChanged,
)
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason

PLEG_HEALTHY_S = 180.0  # the kubelet's relist threshold ("PLEG is not healthy")
EVENTED_PLEG_HEALTHY_S = 600.0  # its threshold while the runtime's events flow

# (condition type, status) -> the kubelet's event reason
CONDITION_EVENTS = {
    ("Ready", "True"): Reason.NODE_READY,
    ("Ready", "False"): Reason.NODE_NOT_READY,
    ("MemoryPressure", "False"): Reason.NODE_HAS_SUFFICIENT_MEMORY,
    ("MemoryPressure", "True"): Reason.NODE_HAS_INSUFFICIENT_MEMORY,
    ("DiskPressure", "False"): Reason.NODE_HAS_NO_DISK_PRESSURE,
    ("DiskPressure", "True"): Reason.NODE_HAS_DISK_PRESSURE,
    ("PIDPressure", "False"): Reason.NODE_HAS_SUFFICIENT_PID,
    ("PIDPressure", "True"): Reason.NODE_HAS_INSUFFICIENT_PID,
}


class NodeState:
    def __init__(
        self,
        name: str,
        joined: bool,
        events: EventRecorder,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.name = name
        self.joined = joined  # pkletd runs with a kubeconfig
        self._events = events
        self._clock = clock
        self._last_relist = clock.monotonic()  # PLEG gets its threshold from the start
        self._pleg = PlegModeChanged(PlegMode.RELISTING, "not reported yet")
        self._report: NodeReported | None = None
        self._conditions: Mapping[str, str] = {}
        self._certificate = ClientCertificateReported("", 0.0)
        if joined:
            self._event(Reason.STARTING, "Starting kubelet.")

    def relisted(self) -> None:
        self._last_relist = self._clock.monotonic()

    def pleg_mode(self, changed: PlegModeChanged) -> None:
        self._pleg = changed

    def pleg_ok(self) -> bool:
        evented = self._pleg.mode is PlegMode.EVENTED
        threshold = EVENTED_PLEG_HEALTHY_S if evented else PLEG_HEALTHY_S
        return self._clock.monotonic() - self._last_relist < threshold

    def reported(self, report: NodeReported) -> None:
        self._report = report
        for kind, status in sorted(report.conditions.items()):
            if self._conditions.get(kind) != status and (kind, status) in CONDITION_EVENTS:
                reason = CONDITION_EVENTS[kind, status]
                self._event(reason, f"Node {self.name} status is now: {reason.value}")
        self._conditions = dict(report.conditions)

    def certificate_reported(self, report: ClientCertificateReported) -> str:
        """Keep the cert-manager's report; the pair file reported before it."""
        previous, self._certificate = self._certificate.path, report
        return previous

    def status(self) -> dict[str, Any]:
        """The node as ``pkletd status`` shows it."""
        report = self._report
        return {
            "name": self.name,
            "joined": self.joined,
            "registered": report is not None and report.registered,
            "lease_renewed_at": report.lease_renewed_at if report is not None else 0.0,
            "status_reported_at": report.status_reported_at if report is not None else 0.0,
            "api_error": report.api_error if report is not None else "",
            "conditions": dict(self._conditions),
            "client_certificate": {
                "path": self._certificate.path,
                "not_after": self._certificate.not_after,
                "error": self._certificate.error,
            },
            "pleg": {
                "mode": self._pleg.mode.value,
                "reason": self._pleg.reason,
                "relisted_s_ago": self._clock.monotonic() - self._last_relist,
                "healthy": self.pleg_ok(),
            },
        }

    def _event(self, reason: Reason, message: str) -> None:
        self._events.normal(ObjectRef.node(self.name), reason, message)
