"""The pod's conditions read as the kubelet's (``kubectl get pod -o yaml``): its reasons and
messages, terminal phases, readiness gates turned by other clients, and the conditions
others wrote kept in front of the kubelet's own."""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.runtime.cri import ContainerState, SandboxState
from pkletd.supervisor.pods import podstatus
from pkletd.supervisor.pods.proberesults import ProbeResults

from tests.supervisor.pods.unit_helpers import SECOND, T0, container, pod_dict, runtime, sandbox

GATE = "example.com/lb-ready"
OTHER_GATE = "example.com/dns-ready"


def gated(*gates: str, conditions: list[dict[str, Any]] | None = None, **spec: Any) -> Pod:
    """A pod with these readiness gates, its API status holding ``conditions``."""
    raw = pod_dict("app", readinessGates=[{"conditionType": g} for g in gates], **spec)
    if conditions is not None:
        raw["status"] = {"conditions": conditions}
    return parse_pod(raw)


def gate(kind: str, status: str) -> dict[str, Any]:
    return {"type": kind, "status": status, "lastProbeTime": None, "lastTransitionTime": "x"}


def conditions(pod: Pod, state: ContainerState = ContainerState.RUNNING) -> list[dict[str, Any]]:
    box = sandbox(SandboxState.READY if state is ContainerState.RUNNING else SandboxState.NOTREADY)
    found = runtime(box, container(pod, "app", state, exit_code=1 if pod.name == "fail" else 0))
    status = podstatus.pod_status(pod, found, {}, "192.0.2.1", T0 / SECOND, None, ProbeResults())
    result: list[dict[str, Any]] = status["conditions"]
    return result


def by_type(found: list[dict[str, Any]], kind: str) -> dict[str, Any]:
    return next(c for c in found if c["type"] == kind)


def shown(condition: dict[str, Any]) -> tuple[str, str | None, str | None]:
    return condition["status"], condition.get("reason"), condition.get("message")


def test_ready_waits_for_a_gate_whose_condition_does_not_exist() -> None:
    found = conditions(gated(GATE))
    assert shown(by_type(found, "ContainersReady")) == ("True", None, None)
    assert shown(by_type(found, "Ready")) == (
        "False",
        "ReadinessGatesNotReady",
        f'corresponding condition of pod readiness gate "{GATE}" does not exist.',
    )


def test_every_unready_gate_is_named_in_the_spec_order() -> None:
    pod = gated(OTHER_GATE, GATE, conditions=[gate(GATE, "False")])
    assert by_type(conditions(pod), "Ready")["message"] == (
        f'corresponding condition of pod readiness gate "{OTHER_GATE}" does not exist., '
        f'the status of pod readiness gate "{GATE}" is not "True", but False'
    )


def test_ready_once_every_gate_is_true() -> None:
    pod = gated(GATE, OTHER_GATE, conditions=[gate(GATE, "True"), gate(OTHER_GATE, "True")])
    assert shown(by_type(conditions(pod), "Ready")) == ("True", None, None)


def test_unready_containers_speak_before_the_gates() -> None:
    pod = gated(GATE, conditions=[gate(GATE, "True")])
    found = conditions(pod, ContainerState.CREATED)
    assert shown(by_type(found, "Ready")) == shown(by_type(found, "ContainersReady"))
    assert by_type(found, "Ready")["reason"] == "ContainersNotReady"


def test_gate_conditions_come_first_as_written_then_the_kubelets_in_its_order() -> None:
    written = gate(GATE, "True") | {"reason": "Registered", "message": "in target group"}
    pod = gated(GATE, conditions=[written])
    assert [c["type"] for c in conditions(pod)] == [
        GATE,
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]
    assert conditions(pod)[0] == written  # another client's: its times and words kept


def test_a_condition_no_gate_names_is_not_the_pods_to_report() -> None:
    pod = gated(conditions=[gate(GATE, "True")])
    assert GATE not in [c["type"] for c in conditions(pod)]


def test_a_succeeded_pod_is_initialized_and_unready_as_completed() -> None:
    pod = parse_pod(pod_dict("app", restartPolicy="Never"))
    found = conditions(pod, ContainerState.EXITED)
    assert shown(by_type(found, "Initialized")) == ("True", "PodCompleted", None)
    for kind in ("ContainersReady", "Ready"):
        assert shown(by_type(found, kind)) == ("False", "PodCompleted", None)


def test_a_failed_pod_is_unready_as_failed() -> None:
    raw = pod_dict("app", restartPolicy="Never")
    raw["metadata"]["name"] = "fail"
    found = conditions(parse_pod(raw), ContainerState.EXITED)
    assert shown(by_type(found, "Initialized")) == ("True", None, None)
    for kind in ("ContainersReady", "Ready"):
        assert shown(by_type(found, kind)) == ("False", "PodFailed", None)


def test_true_conditions_carry_no_reason_or_message() -> None:
    for condition in conditions(gated()):
        assert shown(condition)[1:] == (None, None), condition
