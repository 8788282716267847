"""A pod's API status, computed from what the runtime has, by the kubelet's rules.

Phase (the kubelet's getPhase over regular containers): any container waiting that
never ran -> Pending; some running -> Running; none running but some stopped ->
Running under restartPolicy Always (it is restarting them), Succeeded if every one
succeeded, Failed under Never, else Running (OnFailure restarts the failed ones). A pod
deleted in the API whose containers all stopped is terminal (the kubelet's
``podIsTerminal``): Succeeded if every one succeeded, else Failed, whatever its policy.

Conditions: ``podconditions`` (those others wrote, then the kubelet's own), and
DisruptionTarget for a pod the kubelet stopped itself. A condition of ours keeps its
lastTransitionTime until its status changes.
``qosClass`` is ``qos.pod_qos`` (the API's GetPodQOS).

Ephemeral containers have their statuses in ``ephemeralContainerStatuses`` and no part
in the phase or the conditions; they are never ready and have no ``started`` (no prober
looks at them); one not created yet waits with ``PodInitializing`` in a pod that has init
containers, else ``ContainerCreating`` (the kubelet's default waiting state).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from pkletd.ipc.apimodel.podenums import PodPhase, RestartPolicy
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.runtime.cri import ContainerInfo, ContainerState, SandboxState
from pkletd.supervisor.pods import podconditions
from pkletd.supervisor.pods.cgroups import qos
from pkletd.supervisor.pods.podactions import InitProgress, init_progress
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.types import Failure, PodRuntime, Waiting, WaitingReason

RUNTIME_SCHEME = "containerd"
TERMINATION_BY_KUBELET = "TerminationByKubelet"  # the API's PodReasonTerminationByKubelet


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _ns(value: int) -> str:
    return rfc3339(value / 1e9)


def _terminated(c: ContainerInfo) -> dict[str, Any]:
    reason = c.reason if c.reason == "OOMKilled" else ("Completed" if c.exit_code == 0 else "Error")
    out: dict[str, Any] = {
        "exitCode": c.exit_code,
        "reason": reason,
        "startedAt": _ns(c.started_at) if c.started_at else None,
        "finishedAt": _ns(c.finished_at) if c.finished_at else None,
        "containerID": f"{RUNTIME_SCHEME}://{c.id}",
    }
    if c.message:
        out["message"] = c.message
    return out


def container_status(
    pod: Pod,
    container: Container,
    runtime: PodRuntime,
    waiting: Waiting | None,
    probes: ProbeResults,
) -> dict[str, Any]:
    name, image = container.name, container.image
    instances = runtime.instances(name)
    latest = instances[0] if instances else None
    status: dict[str, Any] = {
        "name": name,
        "image": image,
        "imageID": "",
        "ready": False,
        "started": False,
        "restartCount": latest.attempt if latest is not None else 0,
        "state": {"waiting": {"reason": "ContainerCreating"}},
        "lastState": {},
    }
    if latest is None:
        if waiting is not None:
            status["state"] = {"waiting": {"reason": waiting.reason, "message": waiting.message}}
        return status
    status["imageID"] = latest.image_ref
    status["containerID"] = f"{RUNTIME_SCHEME}://{latest.id}"
    previous = instances[1] if len(instances) > 1 else None
    if latest.state is ContainerState.RUNNING:
        status["state"] = {"running": {"startedAt": _ns(latest.started_at)}}
        status["started"] = probes.started(pod.uid, container, latest.id)
        status["ready"] = probes.ready(pod.uid, container, latest.id)
    elif latest.state is ContainerState.EXITED and waiting is not None:
        status["state"] = {"waiting": {"reason": waiting.reason, "message": waiting.message}}
        previous = latest
    elif latest.state is ContainerState.EXITED:
        status["state"] = {"terminated": _terminated(latest)}
    if previous is not None and previous.state is ContainerState.EXITED:
        status["lastState"] = {"terminated": _terminated(previous)}
    return status


def phase(pod: Pod, statuses: list[dict[str, Any]], terminal: bool = False) -> PodPhase:
    """``terminal``: the pod is deleted and stopping, so nothing restarts its containers
    (the kubelet's ``podIsTerminal``): stopped, it Succeeded or Failed whatever its
    restart policy."""
    running = waiting = stopped = succeeded = 0
    for s in statuses:
        state = s["state"]
        if "running" in state:
            running += 1
        elif "terminated" in state:
            stopped += 1
            succeeded += state["terminated"]["exitCode"] == 0
        elif s["lastState"].get("terminated"):
            stopped += 1
        else:
            waiting += 1
    if waiting:
        return PodPhase.PENDING
    if running:
        return PodPhase.RUNNING
    if not stopped:
        return PodPhase.PENDING
    if terminal:
        return PodPhase.SUCCEEDED if stopped == succeeded else PodPhase.FAILED
    if pod.restart_policy is RestartPolicy.ALWAYS:
        return PodPhase.RUNNING
    if stopped == succeeded:
        return PodPhase.SUCCEEDED
    return PodPhase.FAILED if pod.restart_policy is RestartPolicy.NEVER else PodPhase.RUNNING


def disruption_target(failure: Failure) -> dict[str, Any]:
    """The condition the kubelet adds to a pod it stops itself (a node shutdown), after
    its own conditions."""
    return {
        "type": "DisruptionTarget",
        "status": "True",
        "reason": TERMINATION_BY_KUBELET,
        "message": failure.message,
    }


def pod_status(
    pod: Pod,
    runtime: PodRuntime,
    waiting: Mapping[str, Waiting],
    host_ip: str,
    start_time: float,
    previous: dict[str, Any] | None,
    probes: ProbeResults,
    failure: Failure | None = None,
    terminal: bool = False,
) -> dict[str, Any]:
    init = init_progress(pod, runtime, probes.passed_startup(pod.uid))
    pending = None if init.done else Waiting(WaitingReason.POD_INITIALIZING, "")
    statuses = [
        container_status(pod, c, runtime, waiting.get(c.name) or pending, probes)
        for c in pod.containers
    ]
    init_statuses = [
        container_status(pod, c, runtime, waiting.get(c.name), probes) for c in pod.init_containers
    ]
    sidecars = [s for s, c in zip(init_statuses, pod.init_containers, strict=True) if c.sidecar]
    pod_phase = _init_phase(pod, init) or phase(pod, statuses, terminal)
    if failure is not None:
        pod_phase = PodPhase.FAILED
    sandbox = runtime.sandbox()
    pod_ip = host_ip if pod.host_network else (sandbox.ip if sandbox is not None else "")
    sandbox_ready = sandbox is not None and sandbox.state is SandboxState.READY
    found = podconditions.own(pod, pod_phase, sandbox_ready, sidecars + statuses, init)
    if failure is not None and failure.disruption:
        found.append(disruption_target(failure))
    status: dict[str, Any] = {
        "phase": pod_phase,
        "conditions": podconditions.kept(pod) + _stamp(found, previous),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": rfc3339(start_time),
        "containerStatuses": statuses,
        "qosClass": qos.pod_qos(pod),
    }
    if init_statuses:
        status["initContainerStatuses"] = init_statuses
    if pod.ephemeral_containers:
        status["ephemeralContainerStatuses"] = ephemeral_statuses(pod, runtime, waiting, probes)
    if failure is not None:
        status["reason"], status["message"] = failure.reason, failure.message
    if pod_ip:
        status["podIP"] = pod_ip
        status["podIPs"] = [{"ip": pod_ip}]
    return status


def ephemeral_statuses(
    pod: Pod, runtime: PodRuntime, waiting: Mapping[str, Waiting], probes: ProbeResults
) -> list[dict[str, Any]]:
    initializing = Waiting(WaitingReason.POD_INITIALIZING, "") if pod.init_containers else None
    found = []
    for c in pod.ephemeral_containers:
        why = waiting.get(c.name) or (initializing if runtime.latest(c.name) is None else None)
        status = container_status(pod, c, runtime, why, probes)
        status["ready"] = False
        del status["started"]
        found.append(status)
    return found


def _init_phase(pod: Pod, init: InitProgress) -> PodPhase | None:
    """Pending while initializing; Failed if an init container failed under Never."""
    if init.done:
        return None
    return PodPhase.FAILED if init.failed else PodPhase.PENDING


def _stamp(new: list[dict[str, Any]], previous: dict[str, Any] | None) -> list[dict[str, Any]]:
    old = {c["type"]: c for c in (previous or {}).get("conditions", [])}
    now = rfc3339(datetime.now(UTC).timestamp())
    for condition in new:
        before = old.get(condition["type"])
        same = before is not None and before["status"] == condition["status"]
        condition["lastProbeTime"] = None
        condition["lastTransitionTime"] = before["lastTransitionTime"] if same and before else now
    return new
