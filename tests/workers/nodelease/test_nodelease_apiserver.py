"""The node-lease worker against the real control plane (kube-apiserver with the Node
authorizer and NodeRestriction, kube-controller-manager): what a cluster user would see.

The worker runs in this process with short periods, as ``system:node:<node>``; a fake
stands in for the CRI calls; its loop is pumped by ``Running.until`` (a poll on the
worker's fds with a deadline). Each test has a node of its own name, so a Lease the
garbage collector has not yet taken from an earlier test's node is never in the way.
What the node sent is counted from kube-apiserver's audit log.

One test stays on the test API server: ``Faults`` (the smallest hook into its router)
delays or fails requests of one kind, a fault a real API server cannot be made to show.
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import os
import select
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException
from pkletd.ipc.apiclient.kubeapi import connect
from pkletd.ipc.apimodel.labels import Taint, node_label_allowed
from pkletd.ipc.bus.messages import NodeReported, ParentAlive, Snapshot
from pkletd.ipc.bus.sender import FakeSender
from pkletd.supervisor import config
from pkletd.supervisor.node.facts import MachineFacts, compose_node
from pkletd.workers.nodelease import NodeLeaseOptions, NodeLeaseWorker
from pkletd.workers.nodelease.api import KubeNodeApi

from tests.harness.apiserver import ApiServer, errors
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import wait_for
from tests.workers.nodelease.nodelease_helpers import CNI_DOWN, READY_CONDITIONS, FakeRuntime

NODE = "node-a"
LEASE_NAMESPACE = "kube-node-lease"
DEDICATED = {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
# What the NodeRestriction-era API server puts on every new Node until the node
# lifecycle controller sees it Ready (the TaintNodesByCondition admission plugin).
NOT_READY_TAINT = "node.kubernetes.io/not-ready"
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
_names = itertools.count()


def composed_node(node: str = NODE) -> dict[str, Any]:
    defaults = config.load(argparse.Namespace()).config
    cfg = dataclasses.replace(
        defaults,
        node_name=node,
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
        self,
        server: ApiServer | ControlPlane,
        runtime: FakeRuntime,
        options: NodeLeaseOptions,
        node: str = NODE,
    ) -> None:
        path = str(server.kubeconfig(user=f"system:node:{node}", groups=["system:nodes"]))
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
        self.worker.on_snapshot(Snapshot(seq=0, pods=[], containers={}, node=composed_node(node)))

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


class Seen:
    """What the API server holds of one node and its Lease (read as the admin), and what
    the node sent it (the audit log of the real control plane)."""

    def __init__(self, kube: Kube, node: str, control_plane: ControlPlane | None = None) -> None:
        self.kube = kube
        self.name = node
        self.control_plane = control_plane

    def _get(self, path: str) -> dict[str, Any] | None:
        code, found, _ = self.kube.raw("GET", path)
        if code == 404:
            return None
        assert code == 200, f"GET {path}: {code} {found}"
        return dict(found)

    def node(self) -> dict[str, Any] | None:
        return self._get(f"/api/v1/nodes/{self.name}")

    def lease(self) -> dict[str, Any] | None:
        path = f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases/{self.name}"
        return self._get(path)

    def ready(self) -> dict[str, Any]:
        conditions = ((self.node() or {}).get("status") or {}).get("conditions") or []
        return next((c for c in conditions if c["type"] == "Ready"), {})

    def taints(self) -> list[dict[str, Any]]:
        return list(((self.node() or {}).get("spec") or {}).get("taints") or [])

    def renew_time(self) -> str:
        return str(((self.lease() or {}).get("spec") or {}).get("renewTime", ""))

    def sent(
        self, resource: str, verb: str, subresource: str | None = None
    ) -> list[dict[str, Any]]:
        """The node's completed requests (audit events) of one kind."""
        assert self.control_plane is not None, "counts come from the real control plane"
        user = f"system:node:{self.name}"
        events = self.control_plane.audit_events(resource, subresource, user, verb)
        return [e for e in events if subresource is not None or not _subresource(e)]

    def codes(self, resource: str, verb: str, subresource: str | None = None) -> list[int]:
        return [_code(e) for e in self.sent(resource, verb, subresource)]


def _subresource(event: dict[str, Any]) -> str:
    return str((event.get("objectRef") or {}).get("subresource") or "")


def _code(event: dict[str, Any]) -> int:
    return int((event.get("responseStatus") or {}).get("code", 0))


def renewals(running: Running, seen: Seen, count: int) -> list[str]:
    times = [seen.renew_time()]
    for i in range(count):
        times.append(
            running.until(
                lambda: seen.renew_time() if seen.renew_time() > times[-1] else None,
                f"lease renewal {i + 1}",
            )
        )
    return times


def unique_node() -> str:
    """A node name no earlier test of this session used."""
    return f"nl-{os.getpid()}-{next(_names)}"


# --- fixtures -------------------------------------------------------------------------------


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def seen(kube: Kube, control_plane: ControlPlane) -> Seen:
    return Seen(kube, unique_node(), control_plane)


@pytest.fixture
def start(control_plane: ControlPlane, seen: Seen, kube: Kube) -> Iterator[Callable[..., Running]]:
    """Workers on the real control plane, as ``seen``'s node; closed before the cluster
    is cleaned (they would register the node again)."""
    running: list[Running] = []

    def make(runtime: FakeRuntime | None = None, **changes: Any) -> Running:
        options = dataclasses.replace(OPTIONS, **changes)
        worker = Running(control_plane, runtime or FakeRuntime(), options, seen.name)
        running.append(worker)
        return worker

    yield make
    for worker in running:
        worker.close()


def create_node(kube: Kube, node: dict[str, Any]) -> None:
    kube.core.create_node(node)


# --- on the real control plane ---------------------------------------------------------------


def test_node_registers_ready_with_its_lease(
    seen: Seen, start: Callable[..., Running], kube: Kube
) -> None:
    worker = start()
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True")
    node = seen.node()
    assert node is not None
    labels = node["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == seen.name and labels["tier"] == "edge"
    assert labels["kubernetes.io/os"] == "linux" and labels["kubernetes.io/arch"] == "amd64"
    # the API server's admission taints it not-ready; the controller takes that off
    worker.until(lambda: seen.taints() == [DEDICATED], "only the registered taint", 30.0)
    status = node["status"]
    assert status["capacity"]["memory"] == "16318500Ki" and status["capacity"]["pods"] == "110"
    assert status["allocatable"]["cpu"] == "1900m"
    assert status["nodeInfo"]["containerRuntimeVersion"] == "containerd://1.6.20"
    assert status["nodeInfo"]["kubeletVersion"] == "v1.32.0-pkletd"
    assert status["images"][0]["names"] == ["nginx@sha256:2", "nginx:1.25"]
    assert {"type": "InternalIP", "address": "10.0.0.7"} in status["addresses"]
    assert seen.ready()["message"] == "kubelet is posting ready status"

    lease = worker.until(seen.lease, "the lease")
    assert lease["spec"]["holderIdentity"] == seen.name
    assert lease["spec"]["leaseDurationSeconds"] == 40
    assert lease["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": seen.name, "uid": node["metadata"]["uid"]}
    ]
    times = renewals(worker, seen, 2)
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

    table = kube.kubectl("get", "node", seen.name, "--no-headers").stdout.split()
    assert table[:2] == [seen.name, "Ready"]
    assert "v1.32.0-pkletd" in table


def test_an_existing_node_is_adopted_and_a_restarted_worker_resumes(
    seen: Seen, start: Callable[..., Running], kube: Kube
) -> None:
    admin_taint = {"key": "admin", "effect": "NoSchedule"}
    metadata = {"name": seen.name, "labels": {"kubernetes.io/hostname": "stale", "team": "a"}}
    create_node(kube, {"metadata": metadata, "spec": {"taints": [admin_taint]}})
    uid = seen.node()["metadata"]["uid"]  # type: ignore[index]
    first = start()
    first.until(lambda: seen.ready().get("status") == "True", "Ready=True")
    node = seen.node()
    assert node is not None and node["metadata"]["uid"] == uid
    assert node["metadata"]["labels"]["kubernetes.io/hostname"] == seen.name
    assert node["metadata"]["labels"]["team"] == "a"
    first.until(lambda: seen.taints() == [admin_taint], "only the admin's taint", 30.0)
    assert seen.codes("nodes", "create") == [409]  # kubectl made it
    lease_uid = first.until(seen.lease, "the lease")["metadata"]["uid"]
    before = renewals(first, seen, 1)[-1]
    first.close()  # as if killed: a new worker starts from the same snapshot

    second = start()
    second.until(lambda: seen.renew_time() > before, "the lease renewed by the new worker")
    assert seen.lease()["metadata"]["uid"] == lease_uid  # type: ignore[index]
    assert seen.codes("leases", "create") == [201]
    assert seen.node()["metadata"]["uid"] == uid  # type: ignore[index]
    assert second.until(lambda: reported(second.bus).registered, "registered")
    assert seen.codes("nodes", "create") == [409, 409]


def test_ready_follows_the_runtime_and_pleg(seen: Seen, start: Callable[..., Running]) -> None:
    runtime = FakeRuntime()
    worker = start(runtime)
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True")
    became_ready = seen.ready()["lastTransitionTime"]

    runtime.conditions = (READY_CONDITIONS[0], CNI_DOWN)
    worker.until(lambda: seen.ready().get("status") == "False", "Ready=False (CNI)")
    assert seen.ready()["reason"] == "KubeletNotReady"
    worker.until(lambda: reported(worker.bus).conditions.get("Ready") == "False", "reported")
    assert seen.ready()["message"] == (
        "container runtime network not ready: NetworkReady=false reason:NetworkPluginNotReady "
        "message:Network plugin returns error: cni plugin not initialized"
    )
    runtime.conditions = READY_CONDITIONS
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True again")
    assert seen.ready()["lastTransitionTime"] >= became_ready

    worker.alive(pleg_ok=False)
    worker.until(lambda: seen.ready().get("status") == "False", "Ready=False (PLEG)")
    assert seen.ready()["message"].startswith("PLEG is not healthy: pleg was last seen active ")
    assert seen.ready()["message"].endswith(" ago; threshold is 3m0s")
    worker.alive(pleg_ok=True)
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True after PLEG")


def test_status_is_not_rewritten_when_nothing_changed(
    seen: Seen, start: Callable[..., Running]
) -> None:
    runtime = FakeRuntime()
    worker = start(runtime)
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True")
    reads = len(seen.sent("nodes", "get"))
    worker.until(lambda: len(seen.sent("nodes", "get")) >= reads + 10, "ten more status rounds")
    assert seen.sent("nodes", "patch", "status") == []  # created with it
    runtime.images = runtime.images[:1]  # an image went away: that is a change
    worker.until(lambda: seen.sent("nodes", "patch", "status"), "a PATCH")
    assert len(seen.node()["status"]["images"]) == 1  # type: ignore[index]
    reads = len(seen.sent("nodes", "get"))
    worker.until(lambda: len(seen.sent("nodes", "get")) >= reads + 5, "five more status rounds")
    assert len(seen.sent("nodes", "patch", "status")) == 1


def test_without_register_node_only_an_existing_node_gets_status(
    seen: Seen, start: Callable[..., Running], kube: Kube
) -> None:
    worker = start(register_node=False)
    worker.until(lambda: "not found" in reported(worker.bus).api_error, "the missing node reported")
    assert seen.node() is None and seen.lease() is None
    assert not reported(worker.bus).registered
    create_node(kube, {"metadata": {"name": seen.name}})
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True")
    worker.until(seen.lease, "the lease")
    worker.until(lambda: reported(worker.bus).api_error == "", "the error cleared")
    assert seen.sent("nodes", "create") == []  # the admin's only


def test_an_adopted_node_gets_the_machines_resources(
    seen: Seen, start: Callable[..., Running], kube: Kube
) -> None:
    """A Node left by another machine: its hugepage size this one lacks goes, its
    capacity becomes this machine's."""
    stale = {"cpu": "1", "memory": "1Gi", "pods": "10", "hugepages-1Gi": "2Gi"}
    node = {"metadata": {"name": seen.name}, "status": {"capacity": stale, "allocatable": stale}}
    create_node(kube, node)
    worker = start()
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True")

    def resources() -> tuple[dict[str, str], dict[str, str]]:
        status = (seen.node() or {}).get("status") or {}
        return status.get("capacity") or {}, status.get("allocatable") or {}

    capacity, allocatable = worker.until(
        lambda: resources()[0].get("cpu") == "2" and resources(), "this machine's capacity"
    )
    assert "hugepages-1Gi" not in capacity and "hugepages-1Gi" not in allocatable
    assert capacity["hugepages-2Mi"] == "0" and capacity["memory"] == "16318500Ki"
    assert allocatable["cpu"] == "1900m" and allocatable["pods"] == "110"


def lease_owner(seen: Seen) -> str:
    owners = ((seen.lease() or {}).get("metadata") or {}).get("ownerReferences") or [{}]
    return str(owners[0].get("uid", ""))


def test_a_node_deleted_and_registered_again_gets_a_lease_it_owns(
    seen: Seen, start: Callable[..., Running], kube: Kube
) -> None:
    """kube-controller-manager's garbage collector takes the Lease of a deleted Node: the
    lease is made again with the new Node as its owner."""
    first = start()
    old_uid = first.until(lambda: lease_owner(seen), "the first lease's owner")
    first.close()
    kube.core.delete_node(seen.name)
    second = start()
    new_uid = second.until(
        lambda: (uid := _uid_of(seen.node())) != old_uid and uid, "the node registered again"
    )
    second.until(lambda: lease_owner(seen) == new_uid, "the lease owned by the new node", 30.0)
    before = seen.renew_time()
    second.until(lambda: seen.renew_time() > before, "the new lease renewed")


def test_a_lease_orphaned_by_its_deleted_node_is_adopted_by_the_new_one(
    seen: Seen, start: Callable[..., Running], kube: Kube
) -> None:
    """``kubectl delete node --cascade=orphan``: the garbage collector strips the Lease's
    owner reference and keeps it; the node registered again renews that Lease and makes
    its new Node the owner, as the kubelet's lease controller does."""
    first = start()
    lease_uid = first.until(seen.lease, "the first lease")["metadata"]["uid"]
    first.close()
    kube.core.delete_node(seen.name, propagation_policy="Orphan")
    wait_for("the old node gone", lambda: seen.node() is None, timeout=30.0)
    assert lease_owner(seen) == "" and _uid_of(seen.lease()) == lease_uid
    second = start()
    new_uid = second.until(lambda: _uid_of(seen.node()), "the node registered again")
    second.until(lambda: lease_owner(seen) == new_uid, "the lease owned by the new node")
    assert _uid_of(seen.lease()) == lease_uid
    assert seen.codes("leases", "create") == [201]


def _uid_of(obj: dict[str, Any] | None) -> str:
    return str(((obj or {}).get("metadata") or {}).get("uid") or "")


def with_addresses(node: str, *ips: str) -> dict[str, Any]:
    """The composed Node, its InternalIPs ``ips`` (a dual-stack node has two)."""
    found = composed_node(node)
    internal = [{"type": "InternalIP", "address": ip} for ip in ips]
    found["status"]["addresses"] = [*internal, {"type": "Hostname", "address": node}]
    return found


def test_changed_addresses_replace_the_old_ones(seen: Seen, start: Callable[..., Running]) -> None:
    """Addresses merge by ``type``, which two InternalIPs share: the node's own list must
    stand, not a merge of the old and the new."""
    worker = start()
    worker.worker.on_snapshot(
        Snapshot(1, [], {}, node=with_addresses(seen.name, "10.0.0.7", "fd00::7"))
    )
    worker.until(lambda: seen.ready().get("status") == "True", "Ready=True")

    def addresses() -> list[dict[str, str]]:
        return list(((seen.node() or {}).get("status") or {}).get("addresses") or [])

    worker.until(lambda: len(addresses()) == 3, "both InternalIPs")
    worker.worker.on_snapshot(Snapshot(2, [], {}, node=with_addresses(seen.name, "10.0.0.9")))
    wanted = [
        {"type": "InternalIP", "address": "10.0.0.9"},
        {"type": "Hostname", "address": seen.name},
    ]
    worker.until(lambda: addresses() == wanted, "only the new address")


# --- on the test API server ------------------------------------------------------------------


@pytest.fixture
def faults(apiserver: ApiServer) -> Iterator[Faults]:
    found = Faults(apiserver)
    yield found
    found.release()


@pytest.fixture
def start_on_test_server(apiserver: ApiServer, faults: Faults) -> Iterator[Callable[..., Running]]:
    running: list[Running] = []

    def make(**changes: Any) -> Running:
        worker = Running(apiserver, FakeRuntime(), dataclasses.replace(OPTIONS, **changes))
        running.append(worker)
        return worker

    yield make
    faults.release()
    for worker in running:
        worker.close()


@pytest.fixture
def seen_on_test_server(apiserver: ApiServer) -> Iterator[Seen]:
    local = Kube(apiserver)
    yield Seen(local, NODE)
    local.close()


def test_the_lease_keeps_its_period_while_status_writes_are_slow_or_failing(
    apiserver: ApiServer,
    start_on_test_server: Callable[..., Running],
    faults: Faults,
    seen_on_test_server: Seen,
) -> None:
    """On the test API server: its status writes are made to hang, then to fail with a
    500, from inside the server (``Faults``); a real kube-apiserver cannot be made to do
    either to one kind of request alone."""
    seen = seen_on_test_server
    worker = start_on_test_server(report_frequency=0.2)  # a status PATCH every 0.2 s
    worker.until(seen.lease, "the lease")
    patch = ("PATCH", "nodes", "status")
    worker.until(lambda: apiserver.request_count(verb="PATCH", subresource="status"), "a PATCH")
    faults.delayed.add(patch)  # every status write now hangs until released
    times = renewals(worker, seen, 4)
    assert len(set(times)) == 5
    assert worker.slowest_turn < 0.2  # the loop never waited on the API server

    faults.release()
    faults.failed.add(patch)  # now they fail outright
    worker.until(lambda: "status:" in reported(worker.bus).api_error, "the status error reported")
    renewals(worker, seen, 3)
    report = reported(worker.bus)
    assert "HTTP 500" in report.api_error and "lease:" not in report.api_error
    assert abs(report.lease_renewed_at - time.time()) < 2


# Label keys on either side of NodeRestriction's line, as ``--node-labels`` may name them.
LABEL_KEYS = (
    "tier",
    "example.com/rack",
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "node.kubernetes.io/instance-type",
    "kubelet.kubernetes.io/managed",
    "pool.node.kubernetes.io/gpu",
    "failure-domain.beta.kubernetes.io/zone",
    "node-role.kubernetes.io/worker",
    "node-restriction.kubernetes.io/trusted",
    "example.node-restriction.kubernetes.io/trusted",
    "kubernetes.io/role",
    "example.k8s.io/anything",
)


def registered_by_the_node(kube: Kube, node: str, key: str) -> bool:
    """Whether kube-apiserver lets the node itself register with the label ``key``."""
    as_node = kube.as_user(f"system:node:{node}", ["system:nodes"])
    body = {"metadata": {"name": node, "labels": {key: "x"}}}
    try:
        as_node.core.create_node(body)
    except ApiException as exc:
        assert exc.status == 403 and "is not allowed to set the following labels" in exc.body
        return False
    return True


@pytest.mark.parametrize("key", LABEL_KEYS)
def test_the_labels_a_node_may_set_are_those_noderestriction_admits(kube: Kube, key: str) -> None:
    assert node_label_allowed(key) == registered_by_the_node(kube, unique_node(), key)
