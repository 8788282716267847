"""The numbers the parent reports at /metrics: CRI calls counted at the runtime's one seam
(with the kubelet's operation names), PLEG's relists, each worker's state and cost, and
what crossed the bus."""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from concurrent import futures
from pathlib import Path
from typing import Any

import grpc
import pytest
import zmq
from cri_api.v1 import api_pb2 as pb
from cri_api.v1 import api_pb2_grpc as pb_grpc
from pkletd.ipc.bus.messages import Hello, MetricFamily, ParentAlive, Snapshot
from pkletd.ipc.bus.sockets import ParentBus, WorkerBus
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.runtime.cri import ContainerID, CriError, CriRuntime
from pkletd.supervisor.children import Children
from pkletd.supervisor.metrics import procstats
from pkletd.supervisor.metrics.busmetrics import bus_families
from pkletd.supervisor.metrics.plegmetrics import PlegMetrics
from pkletd.supervisor.metrics.runtimeops import RuntimeOperations, operation_type
from pkletd.supervisor.metrics.workermetrics import worker_families

from tests.harness.node import wait_for


def values(families: list[MetricFamily], name: str) -> dict[tuple[str, ...], float]:
    found = next(f for f in families if f["name"] == name)
    return {tuple(s["labels"]): s["value"] for s in found["series"]}


# --- the CRI seam -------------------------------------------------------------------------


class FakeCri(pb_grpc.RuntimeServiceServicer):
    def Version(self, request: Any, context: Any) -> Any:  # noqa: N802 (the CRI's name)
        return pb.VersionResponse(runtime_name="fake", runtime_version="1.0")

    def StartContainer(self, request: Any, context: Any) -> Any:  # noqa: N802
        context.abort(grpc.StatusCode.NOT_FOUND, f"container {request.container_id} not found")


@pytest.fixture
def cri_socket(tmp_path: Path) -> Iterator[str]:
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    pb_grpc.add_RuntimeServiceServicer_to_server(FakeCri(), server)
    endpoint = f"unix://{tmp_path / 'cri.sock'}"
    server.add_insecure_port(endpoint)
    server.start()
    try:
        yield endpoint
    finally:
        server.stop(None).wait()


def test_the_runtimes_calls_and_errors_are_counted_by_operation(cri_socket: str) -> None:
    operations = RuntimeOperations()
    runtime = CriRuntime(cri_socket, 5.0, operations.observe)
    try:
        assert runtime.version() == "fake 1.0"
        assert runtime.version() == "fake 1.0"
        with pytest.raises(CriError):
            runtime.start_container(ContainerID("gone"))
    finally:
        runtime.close()
    families = operations.families()
    assert values(families, "kubelet_runtime_operations_total") == {
        ("start_container",): 1.0,
        ("version",): 2.0,
    }
    assert values(families, "kubelet_runtime_operations_errors_total") == {
        ("start_container",): 1.0
    }
    durations = next(f for f in families if f["name"].endswith("_duration_seconds"))
    counts = {tuple(s["labels"]): s["buckets"][-1] for s in durations["series"]}
    assert counts == {("start_container",): 1, ("version",): 2}
    assert durations["bounds"][0] == 0.005 and len(durations["bounds"]) == 14


@pytest.mark.parametrize(
    ("method", "label"),
    [
        ("RunPodSandbox", "run_podsandbox"),
        ("PodSandboxStatus", "podsandbox_status"),
        ("ListPodSandbox", "list_podsandbox"),
        ("CreateContainer", "create_container"),
        ("ExecSync", "exec_sync"),
        ("ImageFsInfo", "image_fs_info"),
        ("ReopenContainerLog", "reopen_container_log"),
        ("Version", "version"),
    ],
)
def test_operations_carry_the_kubelets_names(method: str, label: str) -> None:
    assert operation_type(method) == label


# --- PLEG ----------------------------------------------------------------------------------


def test_relists_give_duration_interval_and_last_seen() -> None:
    pleg = PlegMetrics(FakeClock(mono=500.0, wall=1_000_000.0))
    assert values(pleg.families(), "kubelet_pleg_last_seen_seconds") == {}
    pleg.relisted(0.25, sent_at=400.0)
    pleg.relisted(0.5, sent_at=401.5)
    families = pleg.families()
    assert values(families, "kubelet_pleg_relist_duration_seconds") == {(): 0.75}
    assert values(families, "kubelet_pleg_relist_interval_seconds") == {(): 1.25}
    assert values(families, "kubelet_pleg_last_seen_seconds") == {(): 1_000_000.0 - 98.5}


# --- workers -------------------------------------------------------------------------------


class Spawner:
    def spawn(self, name: str) -> None:
        pass

    def signal(self, pid: int, sig: int) -> None:
        pass


def test_workers_report_state_restarts_last_exit_and_cost() -> None:
    children = Children(["pleg", "prober"], Spawner(), heartbeat_timeout=10.0)
    children.start_all()
    children.spawned("pleg", os.getpid())  # this process stands in for a live worker
    children.ready("pleg", os.getpid())
    children.spawned("prober", 999_999_999)
    children.exited(999_999_999, -signal.SIGKILL)
    children.tick()  # restarted at once: a first quick death
    families = worker_families(children, {"supervisor": os.getppid()})
    assert values(families, "pkletd_worker_up") == {("pleg",): 1.0, ("prober",): 0.0}
    assert values(families, "pkletd_worker_restarts_total") == {("pleg",): 0.0, ("prober",): 1.0}
    assert values(families, "pkletd_worker_last_exit_code") == {
        ("prober", "killed by SIGKILL; not expected"): -9.0
    }
    memory = values(families, "pkletd_process_pss_bytes")
    assert set(memory) == {("pleg",), ("supervisor",)}  # the restarting prober has no pid yet
    assert (
        0 < memory[("pleg",)] <= values(families, "pkletd_process_resident_memory_bytes")[("pleg",)]
    )
    assert values(families, "pkletd_process_cpu_seconds_total")[("pleg",)] > 0


def test_a_process_that_is_gone_has_no_stats() -> None:
    assert procstats.read(999_999_999) is None


# --- the bus -------------------------------------------------------------------------------


def test_the_bus_counts_what_each_worker_sent_and_got(tmp_path: Path) -> None:
    parent = ParentBus(tmp_path)
    worker = WorkerBus(tmp_path, "pleg")
    try:
        worker.send(Hello("pleg", os.getpid()))

        def received() -> tuple[bytes, Any] | None:
            try:
                return parent.receive()
            except zmq.Again:
                return None

        identity, _ = wait_for("the hello", received)
        assert parent.reply(identity, Snapshot(0, [], {}))
        parent.publish(ParentAlive(True))
        parent.publish(ParentAlive(True))
    finally:
        worker.close()
        parent.close()
    families = bus_families(parent)
    assert values(families, "pkletd_bus_messages_received_total") == {("pleg", "Hello"): 1.0}
    assert values(families, "pkletd_bus_messages_sent_total") == {("pleg", "Snapshot"): 1.0}
    assert values(families, "pkletd_bus_broadcasts_total") == {("ParentAlive",): 2.0}
