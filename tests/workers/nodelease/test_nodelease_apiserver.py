"""The node-lease worker against the test API server: what a cluster user would see.

The worker runs in this process with short periods; a fake stands in for the CRI
calls; its loop is pumped by ``Running.until`` (a poll on the worker's fds with a
deadline). ``Faults`` is the smallest hook into the apiserver's router to delay or fail
requests of one kind.
"""

from __future__ import annotations

import argparse
import dataclasses
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pkletd.ipc.apiclient.kubeapi import connect
from pkletd.ipc.apimodel.labels import Taint
from pkletd.ipc.bus.messages import NodeReported, ParentAlive, Snapshot
from pkletd.ipc.bus.sender import FakeSender
from pkletd.supervisor import config
from pkletd.supervisor.node.facts import MachineFacts, compose_node
from pkletd.workers.nodelease import NodeLeaseOptions, NodeLeaseWorker
from pkletd.workers.nodelease.api import KubeNodeApi

from tests.harness.apiserver import ApiServer, errors
from tests.harness.apiserver.client import Kube
from tests.harness.apiserver.kinds.nodes import is_ready
from tests.workers.nodelease.nodelease_helpers import CNI_DOWN, READY_CONDITIONS, FakeRuntime

NODE = "node-a"
LEASES = ("leases", "kube-node-lease", NODE)
OPTIONS = NodeLeaseOptions(
    update_frequency=0.1,
    report_frequency=60.0,
    renew_interval=0.1,
    runtime_check_period=0.05,
    request_timeout=10.0,
    lease_jitter=0.0,
    api_qps=1000,
    api_burst=1000,
)
MACHINE = MachineFacts(
    cpus=2,
    memory=16318500 * 1024,
    ephemeral_storage=100 * 2**30,
    hugepages=((2 * 2**20, 0),),
    machine_id="3d1219c7c4c5404aaa1f6d2a48adfda4",
    system_uuid="ec2a1b4e-0000-4c4c-8000-000000000001",
    boot_id="ce137d34-5749-48f9-921f-644507ea1b11",
    kernel_version="6.1.0-18-amd64",
    os_image="Debian GNU/Linux 12 (bookworm)",
    architecture="amd64",
)


def composed_node() -> dict[str, Any]:
    defaults = config.load(argparse.Namespace()).config
    cfg = dataclasses.replace(
        defaults,
        node_name=NODE,
        node_labels=(("tier", "edge"),),
        register_with_taints=(Taint("dedicated", "gpu", "NoSchedule"),),
        system_reserved=(("cpu", "100m"),),
    )
    return compose_node(cfg, MACHINE, "10.0.0.7", "containerd://1.6.20")


class Faults:
    """Delay or fail requests of one kind: ``(method, resource, subresource)``."""

    def __init__(self, apiserver: ApiServer) -> None:
        self._router = apiserver.parts.router
        self._released = threading.Event()
        self.delayed: set[tuple[str, str, str]] = set()
        self.failed: set[tuple[str, str, str]] = set()
        apiserver.parts.router = self  # type: ignore[assignment]

    def route(self, h: Any, info: Any, user: Any) -> None:
        kind = (h.command, info.resource, info.subresource)
        if kind in self.delayed:
            self._released.wait(30.0)
        if kind in self.failed:
            h.read_body()  # the connection stays usable for the next request
            raise errors.internal("injected failure")
        self._router.route(h, info, user)

    def release(self) -> None:
        self.delayed.clear()
        self._released.set()


def reported(bus: FakeSender) -> NodeReported:
    """The last NodeReported sent (all zero before the first)."""
    found = bus.of_type(NodeReported)
    return found[-1] if found else NodeReported(False, 0.0, 0.0, "")


class Running:
    """A worker and its loop, pumped by the test."""

    def __init__(
        self, apiserver: ApiServer, runtime: FakeRuntime, options: NodeLeaseOptions
    ) -> None:
        path = str(apiserver.kubeconfig(user=f"system:node:{NODE}", groups=["system:nodes"]))
        timeout = options.api_timeout()
        self.bus = FakeSender()
        self.worker = NodeLeaseWorker(
            self.bus,
            runtime,
            KubeNodeApi(connect(path, options.api_qps, options.api_burst), timeout),
            KubeNodeApi(connect(path, options.api_qps, options.api_burst), timeout),
            options,
        )
        self.slowest_turn = 0.0
        self.worker.on_snapshot(Snapshot(seq=0, pods=[], containers={}, node=composed_node()))

    def turn(self, wait: float = 0.02) -> None:
        """One loop turn: wait for the worker's fd, take what came."""
        readable, _, _ = select.select(list(self.worker.fds()), [], [], wait)
        started = time.monotonic()
        for fd in readable:
            self.worker.on_readable(fd)
        self.worker.tick(time.monotonic())
        self.slowest_turn = max(self.slowest_turn, time.monotonic() - started)

    def until(self, probe: Callable[[], Any], what: str, timeout: float = 8.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            value = probe()
            if value:
                return value
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
            self.turn()

    def alive(self, pleg_ok: bool = True) -> None:
        self.worker.on_broadcast(ParentAlive(sync_loop_ok=True, pleg_ok=pleg_ok))

    def close(self) -> None:
        self.worker.close()


@pytest.fixture
def faults(apiserver: ApiServer) -> Iterator[Faults]:
    found = Faults(apiserver)
    yield found
    found.release()


@pytest.fixture
def start(apiserver: ApiServer, faults: Faults) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def make(runtime: FakeRuntime | None = None, **changes: Any) -> Running:
        worker = Running(
            apiserver, runtime or FakeRuntime(), dataclasses.replace(OPTIONS, **changes)
        )
        running.append(worker)
        return worker

    yield make
    faults.release()
    for worker in running:
        worker.close()


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[Kube]:
    found = Kube(apiserver)
    yield found
    found.close()


def node_of(apiserver: ApiServer) -> dict[str, Any] | None:
    return apiserver.store.get("nodes", "", NODE)


def lease_of(apiserver: ApiServer) -> dict[str, Any] | None:
    return apiserver.store.get(*LEASES)


def ready_of(apiserver: ApiServer) -> dict[str, Any]:
    node = node_of(apiserver) or {}
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def renew_time(apiserver: ApiServer) -> str:
    return str(((lease_of(apiserver) or {}).get("spec") or {}).get("renewTime", ""))


def renewals(running: Running, apiserver: ApiServer, count: int) -> list[str]:
    seen = [renew_time(apiserver)]
    for i in range(count):
        seen.append(
            running.until(
                lambda: renew_time(apiserver) if renew_time(apiserver) > seen[-1] else None,
                f"lease renewal {i + 1}",
            )
        )
    return seen


# --- tests -----------------------------------------------------------------------------------


def test_node_registers_ready_with_its_lease(
    apiserver: ApiServer, start: Callable[..., Running], kube: Kube
) -> None:
    worker = start()
    worker.until(lambda: ready_of(apiserver).get("status") == "True", "Ready=True")
    node = node_of(apiserver)
    assert node is not None
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == NODE and labels["tier"] == "edge"
    assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"] == "amd64"
    assert node["spec"]["taints"] == [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]
    status = node["status"]
    assert status["capacity"]["memory"] == "16318500Ki" and status["capacity"]["pods"] == "110"
    assert status["allocatable"]["cpu"] == "1900m"
    assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://1.6.20"
    assert status["nodeInfo"]["kubeletVersion"] == "v1.32.0-pkletd"
    assert status["images"][0]["names"] == ["nginx@sha256:2", "nginx:1.25"]
    assert ready_of(apiserver)["message"] == "kubelet is posting ready status"

    lease = worker.until(lambda: lease_of(apiserver), "the lease")
    assert lease["spec"]["holderIdentity"] == NODE
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node["metadata"]["uid"]}
    ]
    times = renewals(worker, apiserver, 2)
    assert times == sorted(times) and len(set(times)) == 3

    report = worker.until(
        lambda: (r := reported(worker.bus)).lease_renewed_at and r.status_reported_at and r,
        "a full NodeReported",
    )
    assert report.registered and report.api_error == ""
    assert report.conditions == {
        "MemoryPressure": "False",
        "DiskPressure": "False",
        "PIDPressure": "False",
        "Ready": "True",
    }
    assert abs(report.lease_renewed_at - time.time()) < 5

    table = kube.kubectl("get", "nodes", "--no-headers").stdout.split()
    assert table[:2] == [NODE, "Ready"]
    assert "v1.32.0-pkletd" in table


def test_an_existing_node_is_adopted_and_a_restarted_worker_resumes(
    apiserver: ApiServer, start: Callable[..., Running], kube: Kube
) -> None:
    kube.kubectl(
        "create",
        "-f",
        "-",
        input='{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a", '
        '"labels": {"kubernetes.io/hostname": "stale", "team": "a"}}, '
        '"spec": {"taints": [{"key": "admin", "effect": "NoSchedule"}]}}',
    )
    uid = node_of(apiserver)["metadata"]["uid"]  # type: ignore[index]
    first = start()
    first.until(lambda: ready_of(apiserver).get("status") == "True", "Ready=True")
    node = node_of(apiserver)
    assert node is not None and node["metadata"]["uid"] == uid
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == NODE
    assert node["metadata"]["labels"]["team"] == "a"
    assert node["spec"]["taints"] == [{"key": "admin", "effect": "NoSchedule"}]
    assert apiserver.request_count(resource="nodes", verb="POST") == 2  # kubectl's, then a 409
    lease_uid = first.until(lambda: lease_of(apiserver), "the lease")["metadata"]["uid"]
    before = renewals(first, apiserver, 1)[-1]
    first.close()  # as if killed: a new worker starts from the same snapshot

    second = start()
    second.until(lambda: renew_time(apiserver) > before, "the lease renewed by the new worker")
    assert lease_of(apiserver)["metadata"]["uid"] == lease_uid  # type: ignore[index]
    assert apiserver.request_count(resource="leases", verb="POST") == 1
    assert len(apiserver.store.items("nodes")) == 1
    assert node_of(apiserver)["metadata"]["uid"] == uid  # type: ignore[index]
    assert second.until(lambda: reported(second.bus).registered, "registered")


def test_the_lease_keeps_its_period_while_status_writes_are_slow_or_failing(
    apiserver: ApiServer, start: Callable[..., Running], faults: Faults
) -> None:
    worker = start(report_frequency=0.2)  # a status PATCH every 0.2 s
    worker.until(lambda: lease_of(apiserver), "the lease")
    patch = ("PATCH", "nodes", "status")
    worker.until(lambda: apiserver.request_count(verb="PATCH", subresource="status"), "a PATCH")
    faults.delayed.add(patch)  # every status write now hangs until released
    times = renewals(worker, apiserver, 4)
    assert len(set(times)) == 5
    assert worker.slowest_turn < 0.2  # the loop never waited on the API apiserver

    faults.release()
    faults.failed.add(patch)  # now they fail outright
    worker.until(lambda: "status:" in reported(worker.bus).api_error, "the status error reported")
    renewals(worker, apiserver, 3)
    report = reported(worker.bus)
    assert "HTTP 500" in report.api_error and "lease:" not in report.api_error
    assert abs(report.lease_renewed_at - time.time()) < 2


def test_ready_follows_the_runtime_and_pleg(
    apiserver: ApiServer, start: Callable[..., Running]
) -> None:
    runtime = FakeRuntime()
    worker = start(runtime)
    worker.until(lambda: ready_of(apiserver).get("status") == "True", "Ready=True")
    became_ready = ready_of(apiserver)["lastTransitionTime"]

    runtime.conditions = (READY_CONDITIONS[0], CNI_DOWN)
    worker.until(lambda: ready_of(apiserver).get("status") == "False", "Ready=False (CNI)")
    assert ready_of(apiserver)["reason"] == "KubeletNotReady"
    worker.until(lambda: reported(worker.bus).conditions.get("Ready") == "False", "reported")
    assert ready_of(apiserver)["message"] == (
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
        "message:Network plugin returns error: cni plugin not initialized"
    )
    runtime.conditions = READY_CONDITIONS
    worker.until(lambda: ready_of(apiserver).get("status") == "True", "Ready=True again")
    assert ready_of(apiserver)["lastTransitionTime"] >= became_ready

    worker.alive(pleg_ok=False)
    worker.until(lambda: ready_of(apiserver).get("status") == "False", "Ready=False (PLEG)")
    assert ready_of(apiserver)["message"].startswith(
        "PLEG is not healthy: pleg was last seen active "
    )
    assert ready_of(apiserver)["message"].endswith(" ago; threshold is 3m0s")
    worker.alive(pleg_ok=True)
    worker.until(lambda: ready_of(apiserver).get("status") == "True", "Ready=True after PLEG")
    assert is_ready(node_of(apiserver) or {})


def test_status_is_not_rewritten_when_nothing_changed(
    apiserver: ApiServer, start: Callable[..., Running]
) -> None:
    runtime = FakeRuntime()
    worker = start(runtime)
    worker.until(lambda: ready_of(apiserver).get("status") == "True", "Ready=True")
    reads = apiserver.request_count(resource="nodes", verb="GET")
    worker.until(
        lambda: apiserver.request_count(resource="nodes", verb="GET") >= reads + 10,
        "ten more status rounds",
    )
    assert apiserver.request_count(verb="PATCH", subresource="status") == 0  # created with it
    runtime.images = runtime.images[:1]  # an image went away: that is a change
    worker.until(lambda: apiserver.request_count(verb="PATCH", subresource="status"), "a PATCH")
    assert len(node_of(apiserver)["status"]["images"]) == 1  # type: ignore[index]
    reads = apiserver.request_count(resource="nodes", verb="GET")
    worker.until(
        lambda: apiserver.request_count(resource="nodes", verb="GET") >= reads + 5,
        "five more status rounds",
    )
    assert apiserver.request_count(verb="PATCH", subresource="status") == 1


def test_without_register_node_only_an_existing_node_gets_status(
    apiserver: ApiServer, start: Callable[..., Running], kube: Kube
) -> None:
    worker = start(register_node=False)
    worker.until(lambda: "not found" in reported(worker.bus).api_error, "the missing node reported")
    assert node_of(apiserver) is None and lease_of(apiserver) is None
    assert not reported(worker.bus).registered
    kube.kubectl(
        "create",
        "-f",
        "-",
        input='{"apiVersion": "v1", "kind": "Node", "metadata": {"name": "node-a"}}',
    )
    worker.until(lambda: ready_of(apiserver).get("status") == "True", "Ready=True")
    worker.until(lambda: lease_of(apiserver), "the lease")
    worker.until(lambda: reported(worker.bus).api_error == "", "the error cleared")
    assert apiserver.request_count(resource="nodes", verb="POST") == 1  # kubectl's only
