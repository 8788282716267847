"""The cells ``kubectl get`` prints for pods, nodes and events, computed as kube-apiserver's
printers compute them (``printPod``, ``printNode``, ``printEvent``), and the AGE format.

A pod's STATUS is its phase or reason, overridden by init-container progress
(``Init:1/2``, ``Init:CrashLoopBackOff``), by the waiting/terminated reasons of its
containers (``CrashLoopBackOff``, ``Completed``, ``ExitCode:1``) and by ``Terminating`` once
deleted; RESTARTS adds ``(5m ago)``; a node's STATUS is Ready/NotReady/Unknown plus
``SchedulingDisabled``; ROLES come from ``node-role.kubernetes.io/*`` labels.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from tests.harness.apiserver import schema

Obj = dict[str, Any]


def human_duration(seconds: float) -> str:
    """``duration.HumanDuration``: 5s, 2m30s, 3h, 4d, 2y."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        return f"{hours // 24}d{hours % 24}h" if hours % 24 else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        return f"{hours // 24 // 365}y{days}d" if days else f"{hours // 24 // 365}y"
    return f"{hours // 24 // 365}y"


def age(stamp: str | None) -> str:
    if not stamp:
        return "<unknown>"
    then = schema.parse_time(stamp)
    return human_duration((dt.datetime.now(dt.UTC) - then).total_seconds())


# --------------------------------------------------------------------------- pods


def _pod_status(pod: Obj) -> tuple[str, int, int, int]:
    """printPod's STATUS, ready count, container count and restarts."""
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    reason = status.get("reason") or status.get("phase", "")
    for condition in status.get("conditions") or []:
        if condition.get("type") == "PodScheduled" and condition.get("reason") == "SchedulingGated":
            reason = "SchedulingGated"
    init_specs = {c.get("name"): c for c in spec.get("initContainers") or []}
    sidecars = {n for n, c in init_specs.items() if c.get("restartPolicy") == "Always"}
    total = len(spec.get("containers") or []) + len(sidecars)
    ready = restarts = sidecar_restarts = 0
    initializing = False
    for i, container in enumerate(status.get("initContainerStatuses") or []):
        restarts += container.get("restartCount", 0)
        if container.get("name") in sidecars:
            sidecar_restarts += container.get("restartCount", 0)
        state = container.get("state") or {}
        terminated, waiting = state.get("terminated"), state.get("waiting")
        if terminated is not None and terminated.get("exitCode") == 0:
            continue
        if container.get("name") in sidecars and container.get("started"):
            ready += 1 if container.get("ready") else 0
            continue
        initializing = True
        if terminated is not None:
            reason = "Init:" + (
                terminated.get("reason")
                or (
                    f"Signal:{terminated['signal']}"
                    if terminated.get("signal")
                    else f"ExitCode:{terminated.get('exitCode', 0)}"
                )
            )
        elif waiting is not None and waiting.get("reason") not in (None, "", "PodInitializing"):
            reason = "Init:" + waiting["reason"]
        else:
            reason = f"Init:{i}/{len(init_specs)}"
        break
    initialized = any(
        c.get("type") == "Initialized" and c.get("status") == "True"
        for c in status.get("conditions") or []
    )
    if not initializing or initialized:
        restarts = sidecar_restarts
        reason, ready, restarts = _main_containers(status, reason, ready, restarts)
    terminal = status.get("phase") in ("Succeeded", "Failed")
    if pod["metadata"].get("deletionTimestamp"):
        if status.get("reason") == "NodeLost":
            reason = "Unknown"
        elif not terminal:
            reason = "Terminating"
    return reason, ready, total, restarts


def _main_containers(status: Obj, reason: str, ready: int, restarts: int) -> tuple[str, int, int]:
    has_running = False
    for container in reversed(status.get("containerStatuses") or []):
        restarts += container.get("restartCount", 0)
        state = container.get("state") or {}
        waiting, terminated = state.get("waiting"), state.get("terminated")
        if waiting is not None and waiting.get("reason"):
            reason = waiting["reason"]
        elif terminated is not None and terminated.get("reason"):
            reason = terminated["reason"]
        elif terminated is not None:
            reason = (
                f"Signal:{terminated['signal']}"
                if terminated.get("signal")
                else f"ExitCode:{terminated.get('exitCode', 0)}"
            )
        elif container.get("ready") and state.get("running") is not None:
            has_running = True
            ready += 1
    if reason == "Completed" and has_running:
        ready_condition = any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in status.get("conditions") or []
        )
        reason = "Running" if ready_condition else "NotReady"
    return reason, ready, restarts


def _last_restart(pod: Obj) -> str | None:
    statuses = (pod.get("status") or {}).get("containerStatuses") or []
    stamps: list[str] = [
        str(finished)
        for s in statuses
        if (finished := ((s.get("lastState") or {}).get("terminated") or {}).get("finishedAt"))
    ]
    return max(stamps) if stamps else None


def pod_cells(pod: Obj) -> list[Any]:
    reason, ready, total, restarts = _pod_status(pod)
    restart_text = str(restarts)
    last = _last_restart(pod)
    if restarts and last:
        restart_text = f"{restarts} ({age(last)} ago)"
    spec, status = pod.get("spec") or {}, pod.get("status") or {}
    ips = status.get("podIPs") or []
    gates = spec.get("readinessGates") or []
    gate_text = "<none>"
    if gates:
        true = {c.get("type") for c in status.get("conditions") or [] if c.get("status") == "True"}
        gate_text = f"{sum(1 for g in gates if g.get('conditionType') in true)}/{len(gates)}"
    return [
        pod["metadata"]["name"],
        f"{ready}/{total}",
        reason,
        restart_text,
        age(pod["metadata"].get("creationTimestamp")),
        ips[0].get("ip") if ips else "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        gate_text,
    ]


def pod_conditions(pod: Obj) -> list[Obj] | None:
    phase = (pod.get("status") or {}).get("phase")
    if phase == "Succeeded":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Succeeded",
                "message": "The pod has completed successfully.",
            }
        ]
    if phase == "Failed":
        return [
            {
                "type": "Completed",
                "status": "True",
                "reason": "Failed",
                "message": "The pod failed.",
            }
        ]
    return None


# --------------------------------------------------------------------------- others


def node_cells(node: Obj) -> list[Any]:
    status, labels = node.get("status") or {}, node["metadata"].get("labels") or {}
    states = [
        ("Ready" if c.get("status") == "True" else "NotReady")
        for c in status.get("conditions") or []
        if c.get("type") == "Ready"
    ][:1]
    states = states or ["Unknown"]
    if (node.get("spec") or {}).get("unschedulable"):
        states.append("SchedulingDisabled")
    roles = sorted(
        {
            k.split("/", 1)[1]
            for k in labels
            if k.startswith("node-role.kubernetes.io/") and k.split("/", 1)[1]
        }
        | ({labels["kubernetes.io/role"]} if labels.get("kubernetes.io/role") else set())
    )
    info = status.get("nodeInfo") or {}
    addresses = status.get("addresses") or []

    def address(kind: str) -> str:
        return next((a["address"] for a in addresses if a.get("type") == kind), "<none>")

    return [
        node["metadata"]["name"],
        ",".join(states),
        ",".join(roles) or "<none>",
        age(node["metadata"].get("creationTimestamp")),
        info.get("kubeletVersion", ""),
        address("InternalIP"),
        address("ExternalIP"),
        info.get("osImage") or "<unknown>",
        info.get("kernelVersion") or "<unknown>",
        info.get("containerRuntimeVersion") or "<unknown>",
    ]


def event_cells(event: Obj) -> list[Any]:
    first = event.get("firstTimestamp") or event.get("eventTime")
    last = event.get("lastTimestamp") or first
    count = event.get("count") or 1
    series = event.get("series")
    if series:
        last, count = series.get("lastObservedTime"), series.get("count", count)
    involved = event.get("involvedObject") or {}
    kind = (involved.get("kind") or "").lower()
    target = f"{kind}/{involved['name']}" if involved.get("name") else kind
    source = event.get("source") or {}
    source_text = source.get("component") or event.get("reportingComponent", "")
    if source.get("host"):
        source_text += ", " + source["host"]
    return [
        age(last),
        event.get("type", ""),
        event.get("reason", ""),
        target,
        involved.get("fieldPath", ""),
        source_text,
        (event.get("message") or "").strip(),
        age(first),
        count,
        event["metadata"]["name"],
    ]
