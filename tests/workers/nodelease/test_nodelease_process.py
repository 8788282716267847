"""The node-lease worker as a process: ``main`` under the shared lifecycle, a parent bus
played by the test, and a CRI endpoint nobody answers.

On the real control plane it says hello, takes its snapshot, registers the Node
(NotReady: the runtime never answered, in the kubelet's words), and after a SIGKILL a new
process adopts the Node and carries on with the same Lease. On the test API server, whose
reads of Nodes are made to hang from inside it, it keeps heartbeating and renewing.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import zmq
from pkletd.ipc.bus.messages import (
    Heartbeat,
    Hello,
    Message,
    NodeReported,
    ParentAlive,
    Snapshot,
    SnapshotRequest,
)
from pkletd.ipc.bus.sockets import ParentBus

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.workers.nodelease.test_nodelease_apiserver import (
    NODE,
    Faults,
    Seen,
    composed_node,
    unique_node,
)

WORKER = "node-lease"
CHILD = """
import logging, sys
from pathlib import Path
from pkletd.workers.lifecycle import WorkerSettings
from pkletd.workers.nodelease import NodeLeaseOptions, main
logging.basicConfig(level=logging.INFO, format="%(name)s %(message)s")
run_dir, kubeconfig, endpoint = sys.argv[1:4]
options = NodeLeaseOptions(
    update_frequency=0.2, renew_interval=0.2, runtime_check_period=0.1,
    request_timeout=10.0, lease_jitter=0.0,
)
sys.exit(main(WorkerSettings("node-lease", Path(run_dir), 0.1), kubeconfig, endpoint, 0.5, options))
"""


class Parent:
    """The parent's side of the bus: answers Hello with a snapshot, says it is alive."""

    def __init__(self, run_dir: Path, node: str = NODE) -> None:
        self.bus = ParentBus(run_dir)
        self.node = node
        self.heard: list[tuple[float, Message]] = []
        self._alive_at = 0.0

    def pump(self, probe: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        poller = zmq.Poller()
        poller.register(self.bus.router, zmq.POLLIN)
        while True:
            value = probe()
            if value:
                return value
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
            if time.monotonic() - self._alive_at > 0.2:
                self.bus.publish(ParentAlive(sync_loop_ok=True, pleg_ok=True))
                self._alive_at = time.monotonic()
            if poller.poll(50):
                self._take()

    def _take(self) -> None:
        while True:
            try:
                identity, envelope = self.bus.receive()
            except zmq.Again:
                return
            message = envelope.message
            self.heard.append((time.monotonic(), message))
            if isinstance(message, Hello | SnapshotRequest):
                snapshot = Snapshot(
                    seq=self.bus.seq, pods=[], containers={}, node=composed_node(self.node)
                )
                self.bus.reply(identity, snapshot)

    def reports(self) -> list[NodeReported]:
        return [m for _, m in self.heard if isinstance(m, NodeReported)]

    def beats_since(self, since: float) -> list[float]:
        return [t for t, m in self.heard if isinstance(m, Heartbeat) and t >= since]

    def close(self) -> None:
        self.bus.close()


@pytest.fixture
def run_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="nl-", dir="/tmp"))  # ipc:// paths must stay short
    yield path
    shutil.rmtree(path, ignore_errors=True)


@pytest.fixture
def seen(cluster_kube: Kube, control_plane: ControlPlane) -> Seen:
    return Seen(cluster_kube, unique_node(), control_plane)


@pytest.fixture
def seen_on_test_server(apiserver: ApiServer) -> Iterator[Seen]:
    local = Kube(apiserver)
    yield Seen(local, NODE)
    local.close()


@pytest.fixture
def make_parent(run_dir: Path) -> Iterator[Callable[[str], Parent]]:
    parents: list[Parent] = []

    def make(node: str) -> Parent:
        parents.append(Parent(run_dir, node))
        return parents[-1]

    yield make
    for found in parents:
        found.close()


@pytest.fixture
def make_spawn(
    run_dir: Path, tmp_path: Path
) -> Iterator[Callable[[ApiServer | ControlPlane, str], Callable[[], subprocess.Popen[bytes]]]]:
    """``make_spawn(server, node)``: a starter of worker processes for ``node``; every one
    is killed afterwards (before the cluster is cleaned: it would register again)."""
    children: list[subprocess.Popen[bytes]] = []
    endpoint = f"unix://{run_dir}/no-runtime.sock"

    def make(server: ApiServer | ControlPlane, node: str) -> Callable[[], subprocess.Popen[bytes]]:
        kubeconfig = server.kubeconfig(user=f"system:node:{node}", groups=["system:nodes"])

        def start() -> subprocess.Popen[bytes]:
            log = open(tmp_path / f"worker-{len(children)}.log", "wb")  # noqa: SIM115
            child = subprocess.Popen(
                [sys.executable, "-c", CHILD, str(run_dir), str(kubeconfig), endpoint],
                stdout=log,
                stderr=subprocess.STDOUT,
            )
            log.close()
            children.append(child)
            return child

        return start

    yield make
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


def hellos(parent: Parent) -> int:
    return sum(isinstance(m, Hello) for _, m in parent.heard)


def test_worker_process_registers_and_resumes_after_sigkill(
    control_plane: ControlPlane,
    seen: Seen,
    make_parent: Callable[[str], Parent],
    make_spawn: Callable[..., Callable[[], subprocess.Popen[bytes]]],
) -> None:
    parent = make_parent(seen.name)
    spawn = make_spawn(control_plane, seen.name)
    first = spawn()
    parent.pump(seen.ready, "the node registered")
    assert seen.ready()["status"] == "False"
    assert seen.ready()["message"] == (
        "[container runtime status check may not have completed yet, network state unknown]"
    )
    lease = parent.pump(seen.lease, "the lease")
    report = parent.pump(
        lambda: next((r for r in reversed(parent.reports()) if r.lease_renewed_at), None),
        "a NodeReported with the lease",
    )
    assert report.registered and report.conditions["Ready"] == "False"

    first.kill()  # SIGKILL: no goodbye
    first.wait()
    before = seen.renew_time()
    said_hello = hellos(parent)
    spawn()
    parent.pump(lambda: hellos(parent) > said_hello, "hello")
    parent.pump(lambda: seen.renew_time() > before, "the lease renewed by the new process")
    assert seen.lease()["metadata"]["uid"] == lease["metadata"]["uid"]  # type: ignore[index]
    parent.pump(lambda: len(seen.sent("nodes", "create")) == 2, "the new registration")
    assert seen.codes("nodes", "create") == [201, 409]
    assert seen.node() is not None


def test_worker_process_heartbeats_while_its_node_reads_hang(
    apiserver: ApiServer,
    seen_on_test_server: Seen,
    make_parent: Callable[[str], Parent],
    make_spawn: Callable[..., Callable[[], subprocess.Popen[bytes]]],
) -> None:
    """On the test API server: its reads of Nodes are made to hang from inside it
    (``Faults``), which a real kube-apiserver cannot be made to do to one kind alone."""
    seen = seen_on_test_server
    faults = Faults(apiserver)
    parent = make_parent(NODE)
    make_spawn(apiserver, NODE)()
    parent.pump(seen.lease, "the lease")
    faults.delayed.add(("GET", "nodes", ""))  # status rounds now hang on their read
    since = time.monotonic()
    renewed = seen.renew_time()
    try:
        parent.pump(lambda: time.monotonic() - since > 1.0, "a second of hung reads")
    finally:
        faults.release()
    beats = parent.beats_since(since)
    assert len(beats) >= 5, beats  # heartbeats every 0.1 s went on
    assert seen.renew_time() > renewed  # and so did the lease
