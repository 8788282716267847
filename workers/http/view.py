"""What the HTTP handlers read: the node's pods with their status, the prober's counters,
the parent's metrics and its health, the CSI drivers registered, as the parent last said
them.

The lifecycle thread replaces each attribute whole (``HttpWorker``); the server's thread
only reads, so neither ever waits for the other.
"""

from __future__ import annotations

from typing import Any

from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock

PARENT_SILENT_S = 10.0
Pod = dict[str, Any]


class NodeView:
    def __init__(self, clock: Clock = SYSTEM_CLOCK) -> None:
        self.clock = clock
        self.pods: dict[str, Pod] = {}  # by UID
        self.probe_samples: list[dict[str, Any]] = []
        self.metrics_report: list[MetricFamily] = []  # the parent's last MetricsReport
        self.sync_loop_ok = True
        self.csi_drivers: dict[str, str] = {}  # driver name -> its Node service's socket
        self.parent_seen = clock.monotonic()

    # --- health ------------------------------------------------------------------

    def healthy(self) -> bool:
        return self.sync_loop_ok and self.clock.monotonic() - self.parent_seen < PARENT_SILENT_S

    def unhealthy_reason(self) -> str:
        if not self.sync_loop_ok:
            return "sync Loop took longer than expected"
        return "the supervisor has not been heard from"

    # --- pods --------------------------------------------------------------------

    def pod_list(self) -> dict[str, Any]:
        return pod_list(sorted(self.pods.values(), key=_by_name))

    def find_pod(self, namespace: str, name: str) -> Pod | None:
        """The pod of that name (static pods by their node-suffixed name); one that is not
        being deleted first, as the kubelet's pod manager holds one pod per full name."""
        found = [
            p
            for p in self.pods.values()
            if p["metadata"].get("namespace") == namespace and p["metadata"].get("name") == name
        ]
        found.sort(key=lambda p: "deletionTimestamp" in p["metadata"])
        return found[0] if found else None

    def running_pods(self) -> list[Pod]:
        """The kubelet's ``/runningpods/``: each pod with a running container, as the
        runtime knows it (``kubecontainer.Pod.ToAPIPod``): uid, name, namespace, and its
        running containers' names and images."""
        found = []
        for pod in sorted(self.pods.values(), key=_by_name):
            running = [
                {"name": s["name"], "image": s.get("image", ""), "resources": {}}
                for s in _statuses(pod)
                if "running" in (s.get("state") or {})
            ]
            if running:
                meta = pod["metadata"]
                found.append(
                    {
                        "metadata": {
                            "name": meta.get("name", ""),
                            "namespace": meta.get("namespace", ""),
                            "uid": meta.get("uid", ""),
                            "creationTimestamp": None,
                        },
                        "spec": {"containers": running},
                        "status": {},
                    }
                )
        return found

    def container_running(self, pod_uid: str, container_id: str) -> bool:
        """Whether that container instance still runs (a follow of its log goes on)."""
        pod = self.pods.get(pod_uid)
        if pod is None:
            return False
        return any(
            s.get("containerID") == container_id and "running" in (s.get("state") or {})
            for s in _statuses(pod)
        )


def pod_list(items: list[Pod]) -> dict[str, Any]:
    return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}


def _by_name(pod: Pod) -> tuple[str, str]:
    return pod["metadata"].get("namespace", ""), pod["metadata"].get("name", "")


def _statuses(pod: Pod) -> list[dict[str, Any]]:
    status = pod.get("status") or {}
    return [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
