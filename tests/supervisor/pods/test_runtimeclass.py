"""A pod's ``runtimeClassName`` on the fake runtime, as the kubelet's RuntimeClass manager and
SyncPod handle it: the class's handler passed to RunPodSandbox; a pod waiting quietly while
the classes are not read yet; an unknown class, or a handler the runtime refuses, failing
the sandbox with the kubelet's ``FailedCreatePodSandBox`` and tried again; the pod's
overhead in its cgroup, its sandbox config and admission; and a standalone node refusing
such a pod, having no RuntimeClass to read."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.bus.messages import RuntimeClassesListed, ServicesListed
from pkletd.ipc.runtime.cri import ContainerResources
from pkletd.supervisor.pods import admission
from pkletd.supervisor.pods.cgroups import resources
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podsync import FAILED_STEP_RETRY_S, PodSyncer
from pkletd.supervisor.pods.setup import runtimespec
from pkletd.supervisor.pods.types import WaitingReason

from tests.supervisor.pods.unit_helpers import fake_syncer

IMAGE = "busybox:1.36"
NOT_CONFIGURED = 'failed to get sandbox runtime: no runtime for "kata" is configured'


def make(class_name: str = "sandboxed", **spec: Any) -> Pod:
    container = {"name": "app", "image": IMAGE, **spec.pop("container", {})}
    return parse_pod(
        {
            "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
            "spec": {"runtimeClassName": class_name, "containers": [container], **spec},
        }
    )


@pytest.fixture
def objects() -> ApiObjects:
    found = ApiObjects()
    found.on_services(ServicesListed("default", []))
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


def warnings(events: EventRecorder) -> list[tuple[str, str]]:
    return [(e["reason"], e["message"]) for e in events.recent() if e["type"] == "Warning"]


def test_the_classes_handler_runs_the_sandbox(
    syncer: PodSyncer, runtime: FakeRuntime, objects: ApiObjects
) -> None:
    objects.on_runtime_classes(RuntimeClassesListed({"sandboxed": "runc-test"}))
    result = syncer.sync(make())
    assert result.waiting == {}
    (sandbox,) = runtime.sandboxes.values()
    assert sandbox.runtime_handler == "runc-test"


def test_no_class_is_the_default_handler_even_before_the_classes_are_read(
    syncer: PodSyncer, runtime: FakeRuntime
) -> None:
    syncer.sync(make(""))
    (sandbox,) = runtime.sandboxes.values()
    assert sandbox.runtime_handler == ""


def test_a_pod_waits_quietly_until_the_classes_are_read(
    syncer: PodSyncer, runtime: FakeRuntime, objects: ApiObjects, events: EventRecorder
) -> None:
    result = syncer.sync(make())
    assert result.waiting["app"].reason is WaitingReason.CONTAINER_CREATING
    assert result.waiting["app"].message == ""
    assert result.retry_in is not None and result.retry_in < FAILED_STEP_RETRY_S
    assert "RunPodSandbox" not in runtime.methods()
    assert warnings(events) == []


def test_an_unknown_class_fails_the_sandbox_as_the_kubelet_and_is_tried_again(
    syncer: PodSyncer, runtime: FakeRuntime, objects: ApiObjects, events: EventRecorder
) -> None:
    objects.on_runtime_classes(RuntimeClassesListed({"other": "runc"}))
    result = syncer.sync(make())
    message = 'Failed to create pod sandbox: runtimeclass.node.k8s.io "sandboxed" not found'
    assert warnings(events) == [("FailedCreatePodSandBox", message)]
    assert result.waiting["app"].reason is WaitingReason.CONTAINER_CREATING
    assert result.waiting["app"].message == message
    assert result.retry_in == FAILED_STEP_RETRY_S
    assert "RunPodSandbox" not in runtime.methods()

    changed = objects.on_runtime_classes(RuntimeClassesListed({"other": "runc", "sandboxed": "x"}))
    assert changed == {"sandboxed"}
    assert syncer.sync(make()).waiting == {}
    assert [s.runtime_handler for s in runtime.sandboxes.values()] == ["x"]


def test_a_handler_the_runtime_lacks_is_the_runtimes_error(
    syncer: PodSyncer, runtime: FakeRuntime, objects: ApiObjects, events: EventRecorder
) -> None:
    objects.on_runtime_classes(RuntimeClassesListed({"sandboxed": "kata"}))
    runtime.fail("RunPodSandbox", "UNKNOWN", NOT_CONFIGURED)
    result = syncer.sync(make())
    message = f"Failed to create pod sandbox: rpc error: code = Unknown desc = {NOT_CONFIGURED}"
    assert warnings(events) == [("FailedCreatePodSandBox", message)]
    assert result.waiting["app"].message == message
    assert result.retry_in == FAILED_STEP_RETRY_S
    assert runtime.sandboxes == {}


def test_only_the_classes_that_changed_are_named() -> None:
    objects = ApiObjects()
    assert objects.on_runtime_classes(RuntimeClassesListed({"a": "runc"})) == {"a"}
    assert objects.on_runtime_classes(RuntimeClassesListed({"a": "runc", "b": "x"})) == {"b"}
    assert objects.on_runtime_classes(RuntimeClassesListed({"b": "y"})) == {"a", "b"}


OVERHEAD = {"cpu": "250m", "memory": "64Mi"}
LIMITED = {"resources": {"limits": {"cpu": "500m", "memory": "128Mi"}}}


def test_the_overhead_is_in_the_pod_cgroup_and_the_requests() -> None:
    pod = make(overhead=OVERHEAD, container=LIMITED)
    values = resources.pod_cgroup_values(pod)
    assert values.memory == (128 + 64) * 2**20
    assert values.cpu_quota == 75000  # 750m of a 100 ms period
    assert values.cpu_shares == 768
    assert resources.pod_requests(pod)["cpu"] == Fraction(3, 4)
    assert admission.requests(pod)["memory"] == (128 + 64) * 2**20


def test_no_limit_stays_no_limit_with_an_overhead() -> None:
    pod = make(overhead=OVERHEAD, container={"resources": {"requests": {"cpu": "100m"}}})
    values = resources.pod_cgroup_values(pod)
    assert values.memory is None and values.cpu_quota is None
    assert values.cpu_shares == 358  # (100m + 250m) * 1024


def test_the_sandbox_config_carries_the_overhead_and_the_pods_own_totals(tmp_path: Path) -> None:
    spec = runtimespec.sandbox_spec(make(overhead=OVERHEAD, container=LIMITED), 0, tmp_path)
    assert spec.overhead is not None and spec.resources is not None
    assert (spec.overhead.cpu_shares, spec.overhead.cpu_quota) == (256, 25000)
    assert spec.overhead.memory_limit_in_bytes == 64 * 2**20
    assert (spec.resources.cpu_shares, spec.resources.cpu_quota) == (512, 50000)
    assert spec.resources.memory_limit_in_bytes == 128 * 2**20
    plain = runtimespec.sandbox_spec(make(""), 0, tmp_path)
    assert plain.overhead is None
    assert isinstance(plain.resources, ContainerResources) and plain.resources.cpu_shares == 2


def test_a_standalone_node_refuses_a_pod_with_a_runtime_class() -> None:
    node = admission.Node("n", 110, {"cpu": 4000, "memory": 2**33, "ephemeral-storage": 2**34})
    rejection = admission.Admitter(node, standalone=True).admit(make(), [])
    assert rejection is not None
    assert rejection.reason.value == "RuntimeClassUnavailable"
    assert rejection.message == (
        'runtimeClassName "sandboxed" cannot be resolved: the node runs standalone, '
        "with no API server to read RuntimeClasses from"
    )
    assert admission.Admitter(node, standalone=True).admit(make(""), []) is None
    assert admission.Admitter(node).admit(make(), []) is None
