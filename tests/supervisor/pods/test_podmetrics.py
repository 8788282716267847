"""The kubelet's pod metrics from the pod syncer's own calls: pods and containers started
and the starts that failed (with the waiting reason as the code), and what runs."""

from __future__ import annotations

from pathlib import Path

import pytest
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import MetricFamily, ObjectFetched, ServicesListed
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podmetrics import PodMetrics
from pkletd.supervisor.pods.proberesults import ProbeResults

from tests.supervisor.pods.unit_helpers import UID, fake_syncer, make_pod, pod_dict

IMAGE = "busybox:1.36"


def values(families: list[MetricFamily], name: str) -> dict[tuple[str, ...], float]:
    found = next(f for f in families if f["name"] == name)
    return {tuple(s["labels"]): s["value"] for s in found["series"]}


@pytest.fixture
def runtime() -> FakeRuntime:
    return FakeRuntime(images={IMAGE})


def test_a_started_pod_counts_its_sandbox_and_containers_and_runs(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    metrics = PodMetrics()
    pod = pod_dict("app", "side")
    pod["spec"]["initContainers"] = [{"name": "init", "image": IMAGE, "command": ["true"]}]
    book = Pods("10.0.0.1", ["file"], ProbeResults())
    book.set_source("file", [pod])
    result = fake_syncer(runtime, tmp_path, metrics=metrics).sync(book.entries[UID].pod)
    book.record(result)
    families = metrics.families(book)
    assert values(families, "kubelet_started_pods_total") == {(): 1.0}
    started = values(families, "kubelet_started_containers_total")
    assert started[("init_container",)] == 1.0
    assert values(families, "kubelet_started_containers_errors_total") == {}
    assert values(families, "kubelet_running_pods") == {(): 1.0}
    running = values(families, "kubelet_running_containers")
    assert running[("running",)] == len(result.runtime.running())
    assert set(running) == {("created",), ("running",), ("exited",), ("unknown",)}


def test_failed_starts_count_as_errors_by_reason(runtime: FakeRuntime, tmp_path: Path) -> None:
    metrics = PodMetrics()
    syncer = fake_syncer(runtime, tmp_path, metrics=metrics)
    runtime.fail("StartContainer", "UNKNOWN", "exec format error")
    syncer.sync(make_pod("app"))
    families = metrics.families(Pods("10.0.0.1", ["file"], ProbeResults()))
    assert values(families, "kubelet_started_containers_total") == {("container",): 1.0}
    assert values(families, "kubelet_started_containers_errors_total") == {
        ("container", "RunContainerError"): 1.0
    }
    assert values(families, "kubelet_running_pods") == {(): 0.0}


def test_a_sandbox_that_fails_to_start_is_a_pod_start_error(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    metrics = PodMetrics()
    runtime.fail("RunPodSandbox", "UNKNOWN", "no network")
    result = fake_syncer(runtime, tmp_path, metrics=metrics).sync(make_pod("app"))
    assert result.waiting["app"].reason == "ContainerCreating"  # FailedCreatePodSandBox
    families = metrics.families(Pods("10.0.0.1", ["file"], ProbeResults()))
    assert values(families, "kubelet_started_pods_total") == {(): 1.0}
    assert values(families, "kubelet_started_pods_errors_total") == {(): 1.0}


def test_a_container_waiting_for_an_object_is_one_start_not_one_per_retry(
    runtime: FakeRuntime, tmp_path: Path
) -> None:
    """The kubelet reads a ConfigMap with a synchronous GET inside one start; pkletd's
    retries while the object is not yet read must not count as starts."""
    metrics, objects = PodMetrics(), ApiObjects()
    syncer = fake_syncer(runtime, tmp_path, objects, metrics=metrics)
    pod = pod_dict("app")
    pod["spec"]["containers"][0]["env"] = [
        {"name": "A", "valueFrom": {"configMapKeyRef": {"name": "settings", "key": "a"}}}
    ]
    book = Pods("10.0.0.1", ["file"], ProbeResults())
    book.set_source("file", [pod])
    namespace = book.entries[UID].pod.namespace
    objects.on_services(ServicesListed("default", []))
    objects.on_services(ServicesListed(namespace, []))
    for _ in range(3):
        syncer.sync(book.entries[UID].pod)
    assert values(metrics.families(book), "kubelet_started_containers_total") == {}
    objects.on_fetched(
        ObjectFetched(ObjectKind.CONFIG_MAP, namespace, "settings", strings={"a": "1"})
    )
    syncer.sync(book.entries[UID].pod)
    assert values(metrics.families(book), "kubelet_started_containers_total") == {
        ("container",): 1.0
    }
