"""The pod status a `kubectl get pod -o yaml` would show, computed from the runtime's view."""

from __future__ import annotations

from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.runtime.cri import ContainerInfo, ContainerState, SandboxState
from pkletd.supervisor.pods import podstatus
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.types import Waiting

from tests.supervisor.pods.unit_helpers import SECOND, T0, container, make_pod, runtime, sandbox

HOST_IP = "192.168.1.10"
NO_PROBES = ProbeResults()  # no results: containers without probes are started and ready
BACKOFF = Waiting("CrashLoopBackOff", "back-off 10s restarting failed container=app")
OLD = "2020-01-01T00:00:00Z"


def instances(pod: Pod, name: str, how: str) -> tuple[list[ContainerInfo], Waiting | None]:
    """The runtime's instances of ``name`` and the sync's waiting reason, for a short ``how``:
    running, exit<N>, backoff<N> (died with N, waiting to restart), creating."""
    if how == "running":
        return [container(pod, name)], None
    if how.startswith("exit"):
        return [container(pod, name, ContainerState.EXITED, exit_code=int(how[4:]))], None
    if how.startswith("backoff"):
        dead = container(pod, name, ContainerState.EXITED, attempt=2, exit_code=int(how[7:]))
        return [dead], BACKOFF
    assert how == "creating"
    return [], None


def status(
    pod: Pod, *hows: str, box: Any = None, previous: dict[str, Any] | None = None
) -> dict[str, Any]:
    """``pod_status`` with the pod's containers, in order, in the states ``hows``."""
    found: list[ContainerInfo] = []
    waiting: dict[str, Waiting] = {}
    for c, how in zip(pod.containers, hows, strict=True):
        objects, reason = instances(pod, c.name, how)
        found += objects
        if reason is not None:
            waiting[c.name] = reason
    state = runtime(sandbox() if box is None else box, *found)
    return podstatus.pod_status(pod, state, waiting, HOST_IP, T0 / SECOND, previous, NO_PROBES)


def condition(result: dict[str, Any], kind: str) -> dict[str, Any]:
    return next(c for c in result["conditions"] if c["type"] == kind)


@pytest.mark.parametrize(
    ("policy", "hows", "phase"),
    [
        ("Always", ["creating"], "Pending"),
        ("Always", ["running", "creating"], "Pending"),
        ("Always", ["running", "running"], "Running"),
        ("Never", ["running", "exit1"], "Running"),
        ("Always", ["exit0", "exit0"], "Running"),
        ("Always", ["backoff1"], "Running"),
        ("OnFailure", ["exit0", "exit0"], "Succeeded"),
        ("Never", ["exit0", "exit0"], "Succeeded"),
        ("Never", ["exit0", "exit1"], "Failed"),
        ("OnFailure", ["exit0", "exit1"], "Running"),
        ("OnFailure", ["backoff1"], "Running"),
    ],
)
def test_phase(policy: str, hows: list[str], phase: str) -> None:
    pod = make_pod(*[f"c{i}" for i in range(len(hows))], restartPolicy=policy)
    assert status(pod, *hows)["phase"] == phase


@pytest.mark.parametrize(
    ("policy", "hows", "phase"),
    [
        ("Always", ["exit0", "exit0"], "Succeeded"),
        ("Always", ["exit0", "exit143"], "Failed"),
        ("OnFailure", ["exit0", "exit1"], "Failed"),
        ("Always", ["running", "exit0"], "Running"),  # still stopping
        ("Always", ["creating"], "Pending"),
    ],
)
def test_the_phase_of_a_deleted_pod_once_stopped_is_terminal(
    policy: str, hows: list[str], phase: str
) -> None:
    """The kubelet's podIsTerminal: nothing restarts the containers of a deleted pod."""
    pod = make_pod(*[f"c{i}" for i in range(len(hows))], restartPolicy=policy)
    statuses = status(pod, *hows)["containerStatuses"]
    assert podstatus.phase(pod, statuses, terminal=True) == phase


def test_running_container() -> None:
    pod = make_pod("app")
    (c,) = status(pod, "running")["containerStatuses"]
    assert c == {
        "name": "app",
        "image": "busybox:1.36",
        "imageID": "sha256:feed",
        "containerID": "containerd://app-0",
        "ready": True,
        "started": True,
        "restartCount": 0,
        "state": {"running": {"startedAt": "2023-11-14T22:13:21Z"}},
        "lastState": {},
    }


@pytest.mark.parametrize(("code", "reason"), [(0, "Completed"), (1, "Error"), (137, "Error")])
def test_terminated_container(code: int, reason: str) -> None:
    pod = make_pod("app", restartPolicy="Never")
    (c,) = status(pod, f"exit{code}")["containerStatuses"]
    assert c["state"] == {
        "terminated": {
            "exitCode": code,
            "reason": reason,
            "startedAt": "2023-11-14T22:13:21Z",
            "finishedAt": "2023-11-14T22:13:25Z",
            "containerID": "containerd://app-0",
        }
    }
    assert (c["ready"], c["lastState"]) == (False, {})


def test_crash_looping_container_waits_and_shows_its_last_exit() -> None:
    pod = make_pod("app")
    (c,) = status(pod, "backoff1")["containerStatuses"]
    assert c["state"] == {"waiting": {"reason": BACKOFF.reason, "message": BACKOFF.message}}
    assert c["lastState"]["terminated"]["exitCode"] == 1
    assert c["lastState"]["terminated"]["reason"] == "Error"
    assert c["restartCount"] == 2


def test_restarted_container_shows_the_previous_instance_as_last_state() -> None:
    pod = make_pod("app")
    previous = container(pod, state=ContainerState.EXITED, attempt=0, exit_code=2)
    current = container(pod, attempt=1)
    result = podstatus.pod_status(
        pod, runtime(sandbox(), previous, current), {}, HOST_IP, 0, None, NO_PROBES
    )
    (c,) = result["containerStatuses"]
    assert "running" in c["state"]
    assert c["lastState"]["terminated"]["exitCode"] == 2
    assert c["restartCount"] == 1


def test_container_not_created_yet() -> None:
    pod = make_pod("app")
    (c,) = status(pod, "creating")["containerStatuses"]
    assert c["state"] == {"waiting": {"reason": "ContainerCreating"}}
    assert (c["ready"], c["restartCount"], c["imageID"]) == (False, 0, "")
    assert "containerID" not in c


def test_image_pull_failure_shows_as_waiting_reason() -> None:
    pod = make_pod("app")
    pulling = Waiting("ErrImagePull", "not found")
    result = podstatus.pod_status(
        pod, runtime(sandbox()), {"app": pulling}, HOST_IP, 0, None, NO_PROBES
    )
    assert result["containerStatuses"][0]["state"] == {
        "waiting": {"reason": "ErrImagePull", "message": "not found"}
    }


def test_all_running_is_ready() -> None:
    result = status(make_pod("app", "sidecar"), "running", "running")
    for kind in ("PodScheduled", "PodReadyToStartContainers", "Initialized", "ContainersReady"):
        assert condition(result, kind)["status"] == "True"
    ready = condition(result, "Ready")
    assert ready["status"] == "True"
    assert "reason" not in ready and "message" not in ready


def test_unready_containers_are_named() -> None:
    result = status(make_pod("app", "sidecar", "log"), "running", "creating", "backoff1")
    for kind in ("Ready", "ContainersReady"):
        assert condition(result, kind)["status"] == "False"
        assert condition(result, kind)["reason"] == "ContainersNotReady"
        assert condition(result, kind)["message"] == "containers with unready status: [sidecar log]"


def test_finished_pod_is_unready_as_completed() -> None:
    result = status(
        make_pod("app", restartPolicy="Never"), "exit0", box=sandbox(SandboxState.NOTREADY)
    )
    assert result["phase"] == "Succeeded"
    ready = condition(result, "Ready")
    assert (ready["status"], ready["reason"]) == ("False", "PodCompleted")
    assert "message" not in ready
    assert condition(result, "PodReadyToStartContainers")["status"] == "False"


def test_transition_time_is_kept_until_the_status_changes() -> None:
    pod = make_pod("app")
    first = status(pod, "running")
    for c in first["conditions"]:
        c["lastTransitionTime"] = OLD

    same = status(pod, "running", previous=first)
    assert {c["lastTransitionTime"] for c in same["conditions"]} == {OLD}

    changed = status(pod, "creating", previous=first)
    assert condition(changed, "Ready")["lastTransitionTime"] != OLD
    assert condition(changed, "PodScheduled")["lastTransitionTime"] == OLD


def resources(**kinds: dict[str, str]) -> dict[str, Any]:
    return {"resources": kinds}


@pytest.mark.parametrize(
    ("per_container", "qos"),
    [
        ([{}, {}], "BestEffort"),
        ([resources(requests={"cpu": "100m"}), {}], "Burstable"),
        ([resources(limits={"cpu": "1", "memory": "1Gi"}), {}], "Burstable"),
        ([resources(limits={"cpu": "1"})], "Burstable"),
        ([resources(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"})], "Burstable"),
        ([resources(limits={"cpu": "1", "memory": "1Gi"})], "Guaranteed"),
        (
            [
                resources(
                    requests={"cpu": "1", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"}
                )
            ]
            * 2,
            "Guaranteed",
        ),
        (
            [
                resources(
                    requests={"cpu": "1000m", "memory": "1Gi"}, limits={"cpu": "1", "memory": "1Gi"}
                )
            ],
            "Guaranteed",
        ),
    ],
)
def test_qos_class(per_container: list[dict[str, Any]], qos: str) -> None:
    containers = [
        {"name": f"c{i}", "image": "busybox:1.36", **extra} for i, extra in enumerate(per_container)
    ]
    pod = make_pod(containers=containers)
    assert status(pod, *["creating"] * len(containers))["qosClass"] == qos


def test_pod_ip_is_the_host_ip_on_the_host_network() -> None:
    result = status(make_pod("app", hostNetwork=True), "running", box=sandbox(ip=""))
    assert (result["hostIP"], result["podIP"]) == (HOST_IP, HOST_IP)
    assert result["podIPs"] == [{"ip": HOST_IP}]


def test_pod_ip_is_the_sandbox_ip_on_the_pod_network() -> None:
    result = status(make_pod("app"), "running", box=sandbox(ip="10.88.0.9"))
    assert result["podIP"] == "10.88.0.9"


def test_no_pod_ip_before_the_sandbox_has_one() -> None:
    pod = make_pod("app")
    result = podstatus.pod_status(pod, runtime(), {}, HOST_IP, T0 / SECOND, None, NO_PROBES)
    assert "podIP" not in result
    assert result["startTime"] == "2023-11-14T22:13:20Z"
