"""The node-lease worker as a process: ``main`` under the shared lifecycle, a parent bus
played by the test, the test API server, and a CRI endpoint nobody answers.

It says hello, takes its snapshot, registers the Node (NotReady: the runtime never
answered, in the kubelet's words), keeps heartbeating while its API reads hang, and
after a SIGKILL a new process adopts the Node and carries on with the same Lease.
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
from tests.workers.nodelease.test_nodelease_apiserver import (
    NODE,
    Faults,
    composed_node,
    lease_of,
    node_of,
    ready_of,
    renew_time,
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

    def __init__(self, run_dir: Path) -> None:
        self.bus = ParentBus(run_dir)
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
                snapshot = Snapshot(seq=self.bus.seq, pods=[], containers={}, node=composed_node())
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
def parent(run_dir: Path) -> Iterator[Parent]:
    found = Parent(run_dir)
    yield found
    found.close()


@pytest.fixture
def spawn(
    run_dir: Path, apiserver: ApiServer, tmp_path: Path
) -> Iterator[Callable[[], subprocess.Popen[bytes]]]:
    children: list[subprocess.Popen[bytes]] = []
    kubeconfig = apiserver.kubeconfig(user=f"system:node:{NODE}", groups=["system:nodes"])
    endpoint = f"unix://{run_dir}/no-runtime.sock"

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

    yield start
    for child in children:
        if child.poll() is None:
            child.kill()
        child.wait()


def test_worker_process_registers_heartbeats_and_resumes_after_sigkill(
    apiserver: ApiServer, parent: Parent, spawn: Callable[[], subprocess.Popen[bytes]]
) -> None:
    faults = Faults(apiserver)
    first = spawn()
    parent.pump(lambda: ready_of(apiserver), "the node registered")
    assert ready_of(apiserver)["status"] == "False"
    assert ready_of(apiserver)["message"] == (
        "[container runtime status check may not have completed yet, network state unknown]"
    )
    lease = parent.pump(lambda: lease_of(apiserver), "the lease")
    report = parent.pump(
        lambda: next((r for r in reversed(parent.reports()) if r.lease_renewed_at), None),
        "a NodeReported with the lease",
    )
    assert report.registered and report.conditions["Ready"] == "False"

    faults.delayed.add(("GET", "nodes", ""))  # status rounds now hang on their read
    since = time.monotonic()
    renewed = renew_time(apiserver)
    parent.pump(lambda: time.monotonic() - since > 1.0, "a second of hung reads")
    beats = parent.beats_since(since)
    assert len(beats) >= 5, beats  # heartbeats every 0.1 s went on
    assert renew_time(apiserver) > renewed  # and so did the lease
    faults.release()

    first.kill()  # SIGKILL: no goodbye
    first.wait()
    before = renew_time(apiserver)
    hellos = sum(isinstance(m, Hello) for _, m in parent.heard)
    spawn()
    parent.pump(lambda: sum(isinstance(m, Hello) for _, m in parent.heard) > hellos, "hello")
    parent.pump(lambda: renew_time(apiserver) > before, "the lease renewed by the new process")
    assert lease_of(apiserver)["metadata"]["uid"] == lease["metadata"]["uid"]  # type: ignore[index]
    parent.pump(
        lambda: apiserver.request_count(resource="nodes", verb="POST") == 2, "the new registration"
    )
    assert [r.code for r in apiserver.requests(resource="nodes", verb="POST")] == [201, 409]
    assert len(apiserver.store.items("nodes")) == 1
    assert node_of(apiserver) is not None
