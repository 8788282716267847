"""Syncing pods that use API objects, on the fake runtime: a pod waits quietly for an
object not read yet, reports a missing one as the kubelet does (FailedMount,
CreateContainerConfigError), starts once it is there, and a running pod's files follow
the object while its containers keep running."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.bus.messages import ServicesListed
from pkletd.ipc.runtime.cri import ContainerState
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podsync import PodSyncer
from pkletd.supervisor.pods.types import WaitingReason

from tests.supervisor.pods.setup.object_helpers import CM, NAMESPACE, config_map, missing
from tests.supervisor.pods.unit_helpers import fake_syncer

IMAGE = "busybox:1.36"
VOLUME_POD = {
    "volumes": [{"name": "cfg", "configMap": {"name": "settings"}}],
    "containers": [
        {"name": "app", "image": IMAGE, "volumeMounts": [{"name": "cfg", "mountPath": "/cfg"}]}
    ],
}


def make(spec: dict[str, Any]) -> Pod:
    return parse_pod(
        {"metadata": {"name": "web", "namespace": NAMESPACE, "uid": "u1"}, "spec": spec}
    )


@pytest.fixture
def objects() -> ApiObjects:
    found = ApiObjects()
    found.on_services(ServicesListed("default", []))
    found.on_services(ServicesListed(NAMESPACE, []))
    return found


@pytest.fixture
def events() -> EventRecorder:
    return EventRecorder()


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime(images={IMAGE})


@pytest.fixture
def syncer(
    runtime: FakeRuntime, tmp_path: Path, objects: ApiObjects, events: EventRecorder
) -> PodSyncer:
    return fake_syncer(runtime, tmp_path, objects, events)


def reasons(events: EventRecorder) -> list[str]:
    """The warnings recorded."""
    return [e["reason"] for e in events.recent() if e["type"] == "Warning"]


def test_a_volume_waits_quietly_for_its_object(
    syncer: PodSyncer, runtime: FakeRuntime, objects: ApiObjects, events: EventRecorder
) -> None:
    pod = make(VOLUME_POD)
    result = syncer.sync(pod)
    assert result.waiting["app"].reason is WaitingReason.CONTAINER_CREATING
    assert result.waiting["app"].message == ""
    assert result.retry_in is not None
    assert "RunPodSandbox" not in runtime.methods()
    assert reasons(events) == []

    objects.on_fetched(config_map("settings", {"a": "1"}))
    result = syncer.sync(pod)
    assert result.waiting == {}
    assert [c.state for c in result.runtime.containers] == [ContainerState.RUNNING]


def test_a_missing_object_is_failed_mount(
    syncer: PodSyncer, runtime: FakeRuntime, objects: ApiObjects, events: EventRecorder
) -> None:
    objects.on_fetched(missing(CM, "settings"))
    result = syncer.sync(make(VOLUME_POD))
    message = 'MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found'
    assert result.waiting["app"].message == message
    assert result.retry_in is not None
    (event,) = [e for e in events.recent() if e["type"] == "Warning"]
    assert (event["type"], event["reason"], event["message"]) == ("Warning", "FailedMount", message)


def test_a_running_pods_files_follow_its_object(
    syncer: PodSyncer,
    runtime: FakeRuntime,
    objects: ApiObjects,
    events: EventRecorder,
    tmp_path: Path,
) -> None:
    objects.on_fetched(config_map("settings", {"a": "1"}))
    pod = make(VOLUME_POD)
    syncer.sync(pod)
    file = tmp_path / "root" / "pods" / "u1" / "volumes" / "kubernetes.io~configmap" / "cfg" / "a"
    assert file.read_text() == "1"

    objects.on_fetched(config_map("settings", {"a": "2"}))
    before = len(runtime.calls)
    result = syncer.sync(pod)
    assert file.read_text() == "2"
    assert "CreateContainer" not in [c.method for c in runtime.calls[before:]]

    objects.on_fetched(missing(CM, "settings"))  # deleted: the files stay, it keeps running
    result = syncer.sync(pod)
    assert file.read_text() == "2"
    assert [c.state for c in result.runtime.containers] == [ContainerState.RUNNING]
    assert result.waiting == {} and result.retry_in is not None
    assert reasons(events)[-1] == "FailedMount"


def test_environment_from_objects(
    syncer: PodSyncer, objects: ApiObjects, events: EventRecorder
) -> None:
    ref = {"configMapKeyRef": {"name": "settings", "key": "level"}}
    pod = make(
        {
            "containers": [
                {
                    "name": "app",
                    "image": IMAGE,
                    "env": [{"name": "LEVEL", "valueFrom": ref}],
                    "envFrom": [{"configMapRef": {"name": "settings"}}],
                }
            ]
        }
    )
    first = syncer.sync(pod)
    assert first.waiting["app"].reason is WaitingReason.CONTAINER_CREATING
    assert reasons(events) == []

    objects.on_fetched(config_map("settings", {"other": "x", "9lives": "y"}))
    second = syncer.sync(pod)
    assert second.waiting["app"].reason is WaitingReason.CREATE_CONTAINER_CONFIG_ERROR
    assert second.waiting["app"].message == "couldn't find key level in ConfigMap shop/settings"
    assert events.recent()[-1]["message"] == (
        "Error: couldn't find key level in ConfigMap shop/settings"
    )

    objects.on_fetched(config_map("settings", {"level": "3", "9lives": "y"}))
    third = syncer.sync(pod)
    assert third.waiting == {}
    invalid = [e for e in events.recent() if e["reason"] == "InvalidEnvironmentVariableNames"]
    assert invalid[-1]["message"] == (
        "Keys [9lives] from the EnvFrom configMap shop/settings were skipped since they are "
        "considered invalid environment variable names."
    )
