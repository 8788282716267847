"""The pod syncer against the fake runtime: what it asks of the runtime, and what a
failing runtime call makes of the pod's containers."""

from __future__ import annotations

from pathlib import Path

import pytest
from pkletd.ipc.runtime.cri import ContainerState
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.podsync import PodSyncer
from pkletd.supervisor.pods.types import WaitingReason

from tests.supervisor.pods.unit_helpers import fake_syncer, make_pod

IMAGE = "busybox:1.36"
GI = 2**30


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime(images={IMAGE})


@pytest.fixture
def syncer(runtime: FakeRuntime, tmp_path: Path) -> PodSyncer:
    return fake_syncer(runtime, tmp_path)


def test_a_new_pod_gets_a_sandbox_then_its_container(
    runtime: FakeRuntime, syncer: PodSyncer
) -> None:
    result = syncer.sync(make_pod("app"))
    writes = [
        m for m in runtime.methods() if m in ("RunPodSandbox", "CreateContainer", "StartContainer")
    ]
    assert writes == ["RunPodSandbox", "CreateContainer", "StartContainer"]
    assert result.waiting == {}
    assert [c.state for c in result.runtime.containers] == [ContainerState.RUNNING]


def test_a_synced_pod_is_left_alone(runtime: FakeRuntime, syncer: PodSyncer) -> None:
    pod = make_pod("app")
    syncer.sync(pod)
    before = len(runtime.calls)
    syncer.sync(pod)
    reads = {"ListPodSandbox", "ListContainers", "ContainerStatus", "PodSandboxStatus"}
    assert {c.method for c in runtime.calls[before:]} <= reads


def test_a_failed_start_is_run_container_error(runtime: FakeRuntime, syncer: PodSyncer) -> None:
    runtime.fail("StartContainer", "UNKNOWN", "exec format error")
    result = syncer.sync(make_pod("app"))
    assert result.waiting["app"].reason is WaitingReason.RUN_CONTAINER_ERROR
    assert "exec format error" in result.waiting["app"].message
    assert result.retry_in is not None


def test_a_failed_pull_is_err_image_pull_then_back_off(
    runtime: FakeRuntime, syncer: PodSyncer
) -> None:
    runtime.images.clear()
    runtime.fail("PullImage", "NOT_FOUND", "no such image")
    pod = make_pod("app")
    first = syncer.sync(pod)
    assert first.waiting["app"].reason is WaitingReason.ERR_IMAGE_PULL
    assert first.waiting["app"].message == "rpc error: code = NotFound desc = no such image"
    second = syncer.sync(pod)
    assert second.waiting["app"].reason is WaitingReason.IMAGE_PULL_BACK_OFF
    assert runtime.methods().count("PullImage") == 1  # no pull while backing off


def test_terminate_removes_everything(runtime: FakeRuntime, syncer: PodSyncer) -> None:
    pod = make_pod("app")
    syncer.sync(pod)
    result = syncer.terminate(pod.uid, pod, 0)
    assert result.terminated
    assert runtime.sandboxes == {} and runtime.containers == {}


def test_terminate_reports_the_stopped_containers(runtime: FakeRuntime, syncer: PodSyncer) -> None:
    """What the pod's last status says (the kubelet's syncTerminatingPod reads the runtime
    again after the kill): its containers exited, not the empty runtime left after."""
    pod = make_pod("app")
    syncer.sync(pod)
    result = syncer.terminate(pod.uid, pod, 0)
    assert [(c.name, c.state) for c in result.runtime.containers] == [
        ("app", ContainerState.EXITED)
    ]
