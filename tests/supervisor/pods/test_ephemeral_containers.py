"""Ephemeral containers in the parent, on the fake runtime: started once in the running pod
(even before its init containers finish), never restarted, in the target's PID namespace;
a target that does not run gets the kubelet's error and event and leaves the pod alone;
their statuses in ephemeralContainerStatuses, outside the pod's phase and conditions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.runtime.cri import ContainerID, ContainerState
from pkletd.supervisor import cli
from pkletd.supervisor.pods import podstatus
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.podactions import compute_actions
from pkletd.supervisor.pods.podmetrics import ContainerType
from pkletd.supervisor.pods.podsync import PodSyncer
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.types import PodRuntime, WaitingReason

from tests.supervisor.pods.unit_helpers import UID, fake_syncer, pod_dict

IMAGE = "busybox:1.36"


def debug_pod(target: str = "app", restart: str = "Always", **spec: Any) -> Pod:
    raw = pod_dict("app", restartPolicy=restart, **spec)
    raw["spec"]["ephemeralContainers"] = [
        {"name": "debugger", "image": IMAGE, "command": ["sh"], "targetContainerName": target}
    ]
    return parse_pod(raw)


def without_debugger(pod: Pod) -> Pod:
    raw = {**pod.raw, "spec": {k: v for k, v in pod.raw["spec"].items() if k[0] != "e"}}
    return parse_pod(raw)


def debugged(syncer: PodSyncer, pod: Pod) -> PodRuntime:
    """The pod running as created, then with its ephemeral container added."""
    syncer.sync(without_debugger(pod))
    return syncer.sync(pod).runtime


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime(images={IMAGE})


@pytest.fixture
def events() -> EventRecorder:
    return EventRecorder()


@pytest.fixture
def syncer(runtime: FakeRuntime, events: EventRecorder, tmp_path: Path) -> PodSyncer:
    return fake_syncer(runtime, tmp_path, events=events)


def running(runtime: FakeRuntime, name: str) -> list[ContainerID]:
    return [
        c.id
        for c in runtime.containers.values()
        if c.name == name and c.state is ContainerState.RUNNING
    ]


def test_one_added_to_a_running_pod_starts_in_its_targets_pid_namespace(
    runtime: FakeRuntime, syncer: PodSyncer
) -> None:
    pod = debug_pod()
    syncer.sync(without_debugger(pod))  # the pod as created: no ephemeral container yet
    (app,) = running(runtime, "app")
    result = syncer.sync(pod)  # the API added one
    (debugger,) = running(runtime, "debugger")
    assert runtime.specs[debugger].namespaces.target_id == app
    assert running(runtime, "app") == [app]  # the rest of the pod is left as it was
    assert result.waiting == {}
    assert runtime.methods().count("RunPodSandbox") == 1


def test_one_that_ran_is_never_started_again(runtime: FakeRuntime, syncer: PodSyncer) -> None:
    pod = debug_pod()
    debugged(syncer, pod)
    (debugger,) = running(runtime, "debugger")
    runtime.exit(debugger, 1)
    result = syncer.sync(pod)  # restartPolicy Always restarts regular containers, not this
    assert running(runtime, "debugger") == []
    assert compute_actions(pod, result.runtime).idle
    (status,) = status_of(pod, result.runtime)["ephemeralContainerStatuses"]
    assert status["state"]["terminated"]["exitCode"] == 1 and status["restartCount"] == 0


def test_one_starts_while_init_containers_run(runtime: FakeRuntime, syncer: PodSyncer) -> None:
    probe = {"exec": {"command": ["true"]}}  # a sidecar not past its startup probe yet
    init = [{"name": "setup", "image": IMAGE, "restartPolicy": "Always", "startupProbe": probe}]
    pod = debug_pod(target="setup", initContainers=init)
    syncer.sync(without_debugger(pod))
    assert running(runtime, "setup") and not running(runtime, "app")
    syncer.sync(pod)
    (debugger,) = running(runtime, "debugger")
    assert runtime.specs[debugger].namespaces.target_id == running(runtime, "setup")[0]
    assert not running(runtime, "app")


def test_none_starts_before_the_pod_has_a_sandbox() -> None:
    actions = compute_actions(debug_pod(), PodRuntime(UID))
    assert actions.create_sandbox and [c.name for c in actions.start] == ["app"]


def test_a_running_one_is_not_killed_as_a_stranger(runtime: FakeRuntime, syncer: PodSyncer) -> None:
    pod = debug_pod()
    state = debugged(syncer, pod)
    assert running(runtime, "debugger") and compute_actions(pod, state).kill == ()


def test_a_target_that_does_not_run_is_the_kubelets_error_and_nothing_else(
    runtime: FakeRuntime, syncer: PodSyncer, events: EventRecorder
) -> None:
    pod = debug_pod(target="nope")
    syncer.sync(without_debugger(pod))
    (app,) = running(runtime, "app")
    before = len(runtime.calls)
    result = syncer.sync(pod)
    assert result.waiting["debugger"].reason is WaitingReason.CREATE_CONTAINER_CONFIG_ERROR
    assert result.waiting["debugger"].message == "unable to find target container nope"
    writes = {"CreateContainer", "StartContainer", "StopContainer", "StopPodSandbox"}
    assert not writes & {c.method for c in runtime.calls[before:]}
    assert running(runtime, "app") == [app]
    failed = [e for e in events.take_new() if e.reason == "Failed"]
    assert [(e.type, e.message) for e in failed] == [
        ("Warning", "Error: unable to find target container nope")
    ]
    assert failed[0].object.field_path == "spec.ephemeralContainers{debugger}"
    api = status_of(pod, result.runtime, result.waiting)
    assert api["phase"] == "Running"
    (status,) = api["ephemeralContainerStatuses"]
    assert status["state"]["waiting"] == {
        "reason": "CreateContainerConfigError",
        "message": "unable to find target container nope",
    }


def status_of(pod: Pod, runtime: PodRuntime, waiting: Any = None) -> dict[str, Any]:
    return podstatus.pod_status(pod, runtime, waiting or {}, "10.0.0.1", 0.0, None, ProbeResults())


def test_its_status_is_apart_from_the_pods_phase_and_readiness(
    runtime: FakeRuntime, syncer: PodSyncer
) -> None:
    pod = debug_pod()
    state = debugged(syncer, pod)
    status = status_of(pod, state)
    assert [s["name"] for s in status["containerStatuses"]] == ["app"]
    (debugger,) = status["ephemeralContainerStatuses"]
    assert "running" in debugger["state"] and debugger["ready"] is False
    assert "started" not in debugger  # no prober looks at it
    assert debugger["containerID"] == f"containerd://{running(runtime, 'debugger')[0]}"
    ready = {c["type"]: c["status"] for c in status["conditions"]}
    assert ready["Ready"] == ready["ContainersReady"] == "True"
    assert "ephemeralContainerStatuses" not in status_of(without_debugger(pod), state)


def test_one_not_created_yet_waits_as_the_kubelet_shows_it() -> None:
    plain = status_of(debug_pod(), PodRuntime(UID))["ephemeralContainerStatuses"][0]
    assert plain["state"] == {"waiting": {"reason": "ContainerCreating"}}
    init = [{"name": "setup", "image": IMAGE}]
    with_init = status_of(debug_pod(initContainers=init), PodRuntime(UID))
    waiting = with_init["ephemeralContainerStatuses"][0]["state"]["waiting"]
    assert waiting["reason"] == "PodInitializing"


def test_metrics_and_pkletd_status_name_it_ephemeral(
    runtime: FakeRuntime, syncer: PodSyncer
) -> None:
    pod = debug_pod()
    assert ContainerType.of(pod, pod.ephemeral_containers[0]) is ContainerType.EPHEMERAL_CONTAINER
    assert ContainerType.of(pod, pod.containers[0]) is ContainerType.CONTAINER
    book = Pods("10.0.0.1", ["api"], ProbeResults())
    book.set_source("api", [pod.raw])
    debugged(syncer, pod)
    book.record(syncer.sync(pod))
    (summary,) = book.summary()
    assert [(c["name"], c.get("ephemeral", False)) for c in summary["containers"]] == [
        ("app", False),
        ("debugger", True),
    ]
    cells = [cli._container_cell(c) for c in summary["containers"]]
    assert cells == ["app=running", "debugger=running (ephemeral)"]


def test_the_book_syncs_a_pod_whose_ephemeral_containers_changed() -> None:
    pod = debug_pod()
    book = Pods("10.0.0.1", ["api"], ProbeResults())
    book.set_source("api", [without_debugger(pod).raw])
    book.admit(pod.uid)
    assert book.set_source("api", [pod.raw]).sync == (pod,)
