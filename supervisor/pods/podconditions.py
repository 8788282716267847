"""A pod's conditions, made as the kubelet makes them (``pkg/kubelet/status/generate.go``
and the order of ``generateAPIPodStatus``).

The conditions other clients wrote come first, kept as they are (``kept``: a readiness
gate's condition as the API pod has it), then the kubelet's own (``own``):

- ``PodReadyToStartContainers``: True once the pod's sandbox is ready.
- ``Initialized``: True once the init containers are done (or a regular container has
  run); in phase Succeeded True with reason ``PodCompleted``; else False,
  ``ContainersNotInitialized``, ``containers with incomplete status: [a b]``.
- ``ContainersReady``, over the sidecars and the regular containers: False with
  ``PodCompleted`` (phase Succeeded) or ``PodFailed`` (phase Failed) and no message;
  False with ``ContainersNotReady``, ``containers with unready status: [a b]`` while
  one is not ready; else True.
- ``Ready``: ContainersReady's status, reason and message while it is not True; then
  every readiness gate's condition must be True, else False with
  ``ReadinessGatesNotReady`` and a message per gate (``corresponding condition of pod
  readiness gate "x" does not exist.``, ``the status of pod readiness gate "x" is not
  "True", but False``, joined with ``, ``).
- ``PodScheduled``: True (a static pod is placed by its manifest; an API pod's own
  condition, the scheduler's, is the one the API keeps).

A True condition has neither reason nor message (``Initialized`` of a completed pod
aside), as the kubelet's.
"""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apimodel import readiness
from pkletd.ipc.apimodel.podspec import Pod
from pkletd.supervisor.pods.podactions import InitProgress

Condition = dict[str, Any]

READY_TO_START = "PodReadyToStartContainers"
INITIALIZED = "Initialized"
READY = "Ready"
CONTAINERS_READY = "ContainersReady"
SCHEDULED = "PodScheduled"
DISRUPTION_TARGET = "DisruptionTarget"
# pkg/kubelet/types/pod_status.go: the conditions the kubelet writes (owned or shared)
KUBELET_CONDITIONS = frozenset(
    {
        READY_TO_START,
        INITIALIZED,
        READY,
        CONTAINERS_READY,
        SCHEDULED,
        DISRUPTION_TARGET,
        "PodResizePending",
        "PodResizeInProgress",
    }
)
# The reasons of pkg/kubelet/status/generate.go
POD_COMPLETED = "PodCompleted"
POD_FAILED = "PodFailed"
CONTAINERS_NOT_READY = "ContainersNotReady"
CONTAINERS_NOT_INITIALIZED = "ContainersNotInitialized"
READINESS_GATES_NOT_READY = "ReadinessGatesNotReady"
TRUE = "True"


def condition(kind: str, ok: bool, reason: str = "", message: str = "") -> Condition:
    found: Condition = {"type": kind, "status": TRUE if ok else "False"}
    if reason:
        found["reason"] = reason
    if message:
        found["message"] = message
    return found


def go_list(names: list[str] | tuple[str, ...]) -> str:
    """A list of names as Go's ``%s`` prints a ``[]string``: ``[a b]``."""
    return f"[{' '.join(names)}]"


def kept(pod: Pod) -> list[Condition]:
    """The conditions others wrote that the pod's source carries (its gates'), as they are."""
    return [
        dict(c)
        for c in readiness.gate_conditions(pod.raw)
        if c.get("type") not in KUBELET_CONDITIONS
    ]


def own(
    pod: Pod,
    phase: str,
    sandbox_ready: bool,
    statuses: list[dict[str, Any]],
    init: InitProgress,
) -> list[Condition]:
    """The kubelet's conditions, in its order; ``statuses``: the sidecars' and the regular
    containers' statuses."""
    containers_ready = _containers_ready(phase, statuses)
    return [
        condition(READY_TO_START, sandbox_ready),
        _initialized(phase, init),
        _ready(pod, containers_ready),
        containers_ready,
        condition(SCHEDULED, True),
    ]


def _initialized(phase: str, init: InitProgress) -> Condition:
    if phase == "Succeeded":
        return condition(INITIALIZED, True, POD_COMPLETED)
    if init.done:
        return condition(INITIALIZED, True)
    incomplete = f"containers with incomplete status: {go_list(init.incomplete)}"
    return condition(INITIALIZED, False, CONTAINERS_NOT_INITIALIZED, incomplete)


def _containers_ready(phase: str, statuses: list[dict[str, Any]]) -> Condition:
    if phase == "Succeeded":
        return condition(CONTAINERS_READY, False, POD_COMPLETED)
    if phase == "Failed":
        return condition(CONTAINERS_READY, False, POD_FAILED)
    unready = [s["name"] for s in statuses if not s["ready"]]
    if unready:
        message = f"containers with unready status: {go_list(unready)}"
        return condition(CONTAINERS_READY, False, CONTAINERS_NOT_READY, message)
    return condition(CONTAINERS_READY, True)


def _ready(pod: Pod, containers_ready: Condition) -> Condition:
    if containers_ready["status"] != TRUE:
        return {**containers_ready, "type": READY}
    found = {c.get("type"): c for c in readiness.gate_conditions(pod.raw)}
    unready = []
    for gate in pod.readiness_gates:
        gate_condition = found.get(gate)
        if gate_condition is None:
            unready.append(
                f'corresponding condition of pod readiness gate "{gate}" does not exist.'
            )
        elif gate_condition.get("status") != TRUE:
            unready.append(
                f'the status of pod readiness gate "{gate}" is not "True", '
                f"but {gate_condition.get('status') or ''}"
            )
    if unready:
        return condition(READY, False, READINESS_GATES_NOT_READY, ", ".join(unready))
    return condition(READY, True)
