"""The pod-objects worker as the tests drive it, against the test API server or the real
control plane: ``Agent`` runs the worker object on its real client (reflector and job
threads) as its lifecycle loop does, with what it sends the parent captured; ``Parent``
is the parent's side of the bus for the worker as a process; and the API objects the
tests make (pods bound to the node, ConfigMaps, token volumes)."""

from __future__ import annotations

import base64
import json
import select
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import zmq
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.bus.messages import (
    Hello,
    Message,
    ObjectFetched,
    ServicesListed,
    Snapshot,
    SnapshotRequest,
    TokenIssued,
)
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.bus.sockets import ParentBus
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.podobjects import Options, PodObjects, build
from pkletd.workers.podobjects.calls import ApiCalls

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane

NODE = "testnode"
NODE_USER = f"system:node:{NODE}"
SECRET_VALUE = "hunter2-never-logged"
Obj = dict[str, Any]


class Agent:
    """The worker as its process runs it: ``tick``, then what its fds have waiting."""

    def __init__(
        self,
        server: ApiServer | ControlPlane,
        options: Options,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        kubeconfig = server.kubeconfig(user=NODE_USER, groups=["system:nodes"])
        self.calls = ApiCalls(kubeapi.connect(str(kubeconfig), 1000, 1000, pool_size=64))
        self.bus = FakeSender()
        self.worker: PodObjects = build(self.bus, self.calls, options, clock)
        self.closed = False

    def start(self, *pods: Obj) -> None:
        self.worker.on_snapshot(Snapshot(seq=0, pods=list(pods), containers={}))

    def run_until(self, done: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            due = self.worker.tick(time.monotonic())
            wait = max(0.0, min(due - time.monotonic(), 0.02))
            ready, _, _ = select.select(list(self.worker.fds()), [], [], wait)
            for fd in ready:
                self.worker.on_readable(fd)
            found = done()
            if found:
                return found
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"

    def objects(self, name: str) -> list[ObjectFetched]:
        return [m for m in self.bus.sent if isinstance(m, ObjectFetched) and m.name == name]

    def wait_object(
        self, name: str, check: Callable[[ObjectFetched], bool] = bool
    ) -> ObjectFetched:
        def found() -> ObjectFetched | None:
            sent = self.objects(name)
            return sent[-1] if sent and check(sent[-1]) else None

        return self.run_until(found, f"ObjectFetched {name}")  # type: ignore[no-any-return]

    def tokens(self) -> list[TokenIssued]:
        return [m for m in self.bus.sent if isinstance(m, TokenIssued)]

    def services(self, namespace: str) -> list[ServicesListed]:
        return [
            m for m in self.bus.sent if isinstance(m, ServicesListed) and m.namespace == namespace
        ]

    def close(self) -> None:
        if not self.closed:
            self.worker.close()
            self.calls.close()
        self.closed = True


def pod(kube: Kube, name: str, namespace: str = "default", **spec: Any) -> Obj:
    """An API pod bound to the node (the node authorizer's condition for its objects),
    without the service account volume unless asked for."""
    body = {
        "metadata": {"name": name, "namespace": namespace},
        "spec": {
            "nodeName": NODE,
            "automountServiceAccountToken": False,
            "containers": [{"name": "c", "image": "busybox"}],
            **spec,
        },
    }
    created = kube.core.create_namespaced_pod(namespace, body)
    return dict(kube.api.sanitize_for_serialization(created))


def volumes(*sources: Obj) -> list[Obj]:
    return [{"name": f"v{i}", **source} for i, source in enumerate(sources)]


def config_map(kube: Kube, name: str, namespace: str = "default", **fields: Any) -> None:
    body = {"metadata": {"name": name}, "data": {"key": "one"}, **fields}
    kube.core.create_namespaced_config_map(namespace, body)


def token_volume(*sources: Obj) -> Obj:
    return {"projected": {"sources": [{"serviceAccountToken": s} for s in sources]}}


def claims(token: str) -> Obj:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


CHILD = """
import logging, sys
from pathlib import Path
from pkletd.workers.lifecycle import WorkerSettings
from pkletd.workers.podobjects import Options, main
logging.basicConfig(level=logging.DEBUG, format="%(name)s %(message)s")
run_dir, kubeconfig = sys.argv[1:3]
sys.exit(main(WorkerSettings("pod-objects", Path(run_dir), 0.2), kubeconfig, Options("testnode")))
"""


class Parent:
    """The parent's side of the bus: answers each Hello with a snapshot of ``pods``."""

    def __init__(self, run_dir: Path, pods: list[Obj]) -> None:
        self.bus = ParentBus(run_dir)
        self.pods = pods
        self.heard: list[Message] = []

    def pump(self, probe: Callable[[], Any], what: str, timeout: float = 10.0) -> Any:
        deadline = time.monotonic() + timeout
        poller = zmq.Poller()
        poller.register(self.bus.router, zmq.POLLIN)
        while not probe():
            assert time.monotonic() < deadline, f"timed out after {timeout}s waiting for {what}"
            if poller.poll(50):
                self._take()
        return probe()

    def _take(self) -> None:
        while True:
            try:
                identity, envelope = self.bus.receive()
            except zmq.Again:
                return
            self.heard.append(envelope.message)
            if isinstance(envelope.message, Hello | SnapshotRequest):
                self.bus.reply(identity, Snapshot(seq=self.bus.seq, pods=self.pods, containers={}))

    def since(self, start: int) -> list[Message]:
        return self.heard[start:]

    def close(self) -> None:
        self.bus.close()


def everything(messages: list[Message]) -> dict[str, Message] | None:
    """The worker's word on the pod's secret, ConfigMap, token and default Services, once
    it has said it all."""
    found: dict[str, Message] = {}
    for m in messages:
        if isinstance(m, ObjectFetched):
            found[m.name] = m
        elif isinstance(m, TokenIssued) and m.token:
            found["token"] = m
        elif isinstance(m, ServicesListed):
            found[f"services/{m.namespace}"] = m
    return found if len(found) == 4 else None
