"""The status manager against the real control plane (kube-apiserver with the Node
authorizer and NodeRestriction, the real strategic merge patch; ``tests/harness/
controlplane``): the worker object on its real client and job threads, driven as its
lifecycle loop drives it, with a real api-watcher whose views of the API
(``ApiPodsObserved``) are handed on as the parent hands them; checked with what a user
sees (``kubectl``, the official client) and kube-apiserver's audit log of what the node
sent."""

from __future__ import annotations

import json
import select
import socket
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
import yaml
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apiclient.jobs import ThreadJobs
from pkletd.ipc.apiclient.reflector import Reflector, Seen
from pkletd.ipc.bus.messages import (
    ApiPodsObserved,
    EventRecorded,
    PodDeleted,
    PodForgotten,
    PodStatusUpdated,
    PodTerminated,
    Snapshot,
)
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.apiwatcher import ApiWatcher
from pkletd.workers.statusmanager import Options, StatusManager
from pkletd.workers.statusmanager.calls import ClientCalls
from pkletd.workers.statusmanager.context import ApiAccess

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.workers.statusmanager.statusmanager_helpers import (
    NODE,
    api_pod,
    condition,
    event,
    reported,
    static_pod,
)

NODE_USER = f"system:node:{NODE}"
PERIOD = 0.3  # a while for something (not) to happen
TIMEOUT = 0.5  # each call's
OPTIONS = Options(
    50,
    100,
    50,
    100,
    retry_first=0.05,
    retry_max=0.2,
    request_timeout=TIMEOUT,
)

Obj = dict[str, Any]


class Watcher:
    """The api-watcher worker on its real reflector; what it sends the parent is taken
    by ``relay``, which hands its ``ApiPodsObserved`` on as the parent broadcasts them."""

    def __init__(self, kubeconfig: str) -> None:
        self.client = client = kubeapi.connect(kubeconfig, 50, 100)
        self.inbox: Inbox[Seen] = Inbox()
        pods = kubernetes.client.CoreV1Api(client).list_pod_for_all_namespaces
        self.reflector = Reflector("api", pods, self.inbox, f"spec.nodeName={NODE}")
        self.bus = FakeSender()
        self.worker = ApiWatcher(self.bus, self.reflector, self.inbox)
        self.reflector.start()

    def relay(self, to: StatusManager) -> None:
        self.worker.on_readable(self.inbox.fileno())
        for message in self.bus.take():
            if isinstance(message, ApiPodsObserved):
                to.on_broadcast(message)

    def close(self) -> None:
        self.worker.close()
        self.client.close()


class Agent:
    """A status manager as its process would run it: the loop's tick, the job threads'
    outcomes through their fds, and the api-watcher's views as the parent relays them.
    ``run_until`` turns the loop until a condition holds."""

    def __init__(self, server: ControlPlane, kubeconfig: Path | None = None) -> None:
        node = str(server.kubeconfig(user=NODE_USER, groups=["system:nodes"]))
        path = str(kubeconfig) if kubeconfig else node
        self.watcher = Watcher(node)
        timeout = OPTIONS.request_timeout
        api = ApiAccess(
            ClientCalls(kubeapi.connect(path, 50, 100), timeout),
            ClientCalls(kubeapi.connect(path, 50, 100), timeout),
            ThreadJobs(OPTIONS.threads, "status"),
            ThreadJobs(1, "events"),
        )
        self.bus = FakeSender()
        self.worker = StatusManager(self.bus, api, NODE, OPTIONS)
        self.longest_turn = 0.0  # the longest the loop spent in the worker at once
        self.turns = 0

    def run_until(self, done: Callable[[], Any], what: str, timeout: float = 5.0) -> Any:
        deadline = time.monotonic() + timeout
        while True:
            start = time.monotonic()
            due = self.worker.tick(start)
            ticked = time.monotonic()
            wait = max(0.0, min(due - ticked, 0.02))
            watched = self.watcher.inbox.fileno()
            ready, _, _ = select.select([*self.worker.fds(), watched], [], [], wait)
            woke = time.monotonic()
            for fd in ready:
                if fd == watched:
                    self.watcher.relay(self.worker)
                else:
                    self.worker.on_readable(fd)
            busy = (ticked - start) + (time.monotonic() - woke)
            self.longest_turn = max(self.longest_turn, busy)
            self.turns += 1
            found = done()
            if found:
                return found
            if time.monotonic() > deadline:
                raise AssertionError(f"timed out waiting for {what}")

    def run_for(self, seconds: float) -> None:
        end = time.monotonic() + seconds
        self.run_until(lambda: time.monotonic() >= end, "time", timeout=seconds + 1)

    def close(self) -> None:
        self.watcher.close()
        self.worker.close()


@pytest.fixture
def server(control_plane: ControlPlane) -> ControlPlane:
    return control_plane


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    """The admin, with the node registered (the Node authorizer knows it)."""
    cluster_kube.core.create_node({"metadata": {"name": NODE}})
    return cluster_kube


@pytest.fixture
def agent(server: ControlPlane, kube: Kube) -> Iterator[Agent]:
    made = Agent(server)
    yield made
    made.close()


def create_pod(kube: Kube, name: str = "web", gates: bool = False) -> Obj:
    """A pod bound to the node and scheduled, as the scheduler leaves it."""
    body = api_pod(name)
    if gates:
        body["spec"]["readinessGates"] = [{"conditionType": "example.com/ready"}]
    kube.core.create_namespaced_pod("default", body)
    scheduled = [condition("PodScheduled", when="2025-06-01T12:00:00Z")]
    kube.core.patch_namespaced_pod_status(name, "default", {"status": {"conditions": scheduled}})
    return read(kube, name)


def read(kube: Kube, name: str, namespace: str = "default") -> Obj:
    status, found, _ = kube.raw("GET", f"/api/v1/namespaces/{namespace}/pods/{name}")
    return dict(found) if status == 200 else {}


def conditions(pod: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in pod.get("status", {}).get("conditions", [])}


class NodeRequests:
    """What the node sent since the test began (the session's audit log holds earlier
    tests' requests too), by kube-apiserver's audit log."""

    def __init__(self, server: ControlPlane) -> None:
        self.server = server
        self.since = datetime.now(UTC)

    def _recent(self, found: list[dict[str, Any]]) -> list[Obj]:
        return [e for e in found if _received(e) >= self.since]

    def of(
        self, resource: str, subresource: str | None = None, verb: str | None = None, name: str = ""
    ) -> list[Obj]:
        """The node's completed requests of one kind (``subresource`` None: none)."""
        found = self._recent(self.server.audit_events(resource, subresource, NODE_USER, verb))
        return [
            e
            for e in found
            if (e["objectRef"].get("subresource") or None) == subresource
            and (not name or e["objectRef"].get("name") == name)
        ]

    def patches(self, name: str = "") -> int:
        return len(self.of("pods", "status", "patch", name))

    def verbs(self, name: str) -> list[str]:
        """What the node did to the pod ``name`` and its status, in order."""
        found = self._recent(self.server.audit_events("pods", None, NODE_USER))
        return [
            f"{e['verb']} {e['objectRef'].get('subresource') or ''}".strip()
            for e in found
            if e["objectRef"].get("name") == name
        ]


def _received(event: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(str(event["requestReceivedTimestamp"]))


@pytest.fixture
def sent(server: ControlPlane) -> NodeRequests:
    return NodeRequests(server)


# --- pod status ----------------------------------------------------------------------------


def test_status_reaches_the_api_once_and_keeps_what_others_wrote(
    sent: NodeRequests, kube: Kube, agent: Agent
) -> None:
    pod = create_pod(kube, gates=True)
    gate = condition("example.com/ready", when="2025-06-02T00:00:00Z")
    kube.core.patch_namespaced_pod_status("web", "default", {"status": {"conditions": [gate]}})
    agent.worker.on_snapshot(Snapshot(0, [], {}))
    agent.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    agent.run_until(lambda: read(kube, "web")["status"]["phase"] == "Running", "the status")
    shown = json.loads(kube.kubectl("get", "pod", "web", "-o", "json").stdout)
    assert shown["status"]["podIP"] == "10.88.0.5"
    assert shown["status"]["containerStatuses"][0]["state"]["running"]
    found = conditions(shown)
    assert found["PodScheduled"]["lastTransitionTime"] == "2025-06-01T12:00:00Z"  # scheduler's
    assert found["example.com/ready"]["status"] == "True"  # a readiness gate's, not ours
    assert found["Ready"]["status"] == "True"
    agent.worker.on_broadcast(PodStatusUpdated(reported(pod)))  # the same again
    agent.run_for(3 * PERIOD)  # and the watch's echo of the write
    assert sent.patches() == 1
    agent.worker.on_broadcast(PodStatusUpdated(reported(pod, ready=False)))
    agent.run_until(lambda: conditions(read(kube, "web"))["Ready"]["status"] == "False", "Ready")
    # the audit log records a request once its reply is sent: it may lag what the reply shows
    agent.run_until(lambda: sent.patches() >= 2, "the second patch in the audit log")
    assert sent.patches() == 2


def test_a_pod_recreated_under_its_name_is_not_overwritten(
    sent: NodeRequests, kube: Kube, agent: Agent
) -> None:
    old = create_pod(kube)
    agent.worker.on_snapshot(Snapshot(0, [], {}))
    kube.core.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    new = create_pod(kube)
    agent.worker.on_broadcast(PodStatusUpdated(reported(old)))
    agent.run_until(lambda: sent.patches() == 1, "the refused patch")
    agent.run_for(2 * PERIOD)
    now = read(kube, "web")
    assert now["metadata"]["uid"] == new["metadata"]["uid"]
    assert now["status"]["phase"] == "Pending"
    assert sent.patches() == 1


def test_someone_elses_write_is_undone_from_the_watch_without_a_list(
    sent: NodeRequests, kube: Kube, agent: Agent
) -> None:
    pod = create_pod(kube)
    agent.worker.on_snapshot(Snapshot(0, [reported(pod)], {}))
    agent.run_until(lambda: read(kube, "web")["status"]["phase"] == "Running", "the status")
    kube.core.patch_namespaced_pod_status("web", "default", {"status": {"phase": "Unknown"}})
    agent.run_until(lambda: read(kube, "web")["status"]["phase"] == "Running", "the repair")
    assert sent.patches() == 2
    others = [e["verb"] for e in sent.of("pods") if e["verb"] != "watch"]
    assert others == ["list"]  # the watch's


def test_statuses_catch_up_when_the_server_is_back(
    server: ControlPlane, sent: NodeRequests, kube: Kube, agent: Agent
) -> None:
    """kube-apiserver is stopped, then started again on its port and etcd."""
    pods = [create_pod(kube, f"p{i}") for i in range(3)]
    agent.worker.on_snapshot(Snapshot(0, [], {}))
    agent.run_until(lambda: sent.of("pods", verb="list"), "the watch's list")
    agent.run_for(PERIOD)
    server.components["kube-apiserver"].stop()
    for pod in pods:
        agent.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    agent.run_for(4 * PERIOD)  # writes fail and back off
    server.restart_apiserver()

    def all_running() -> bool:
        return all(read(kube, f"p{i}")["status"]["phase"] == "Running" for i in range(3))

    agent.run_until(all_running, "every status")


def test_a_server_that_does_not_answer_holds_up_nothing(
    server: ControlPlane, kube: Kube, tmp_path: Path
) -> None:
    pods = [create_pod(kube, f"p{i}") for i in range(3)]
    with socket.create_server(("127.0.0.1", 0)) as hole:  # accepts, never answers
        config = yaml.safe_load(
            server.kubeconfig(user=NODE_USER, groups=["system:nodes"]).read_text()
        )
        config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{hole.getsockname()[1]}"
        kubeconfig = tmp_path / "hole.kubeconfig"
        kubeconfig.write_text(yaml.safe_dump(config))
        agent = Agent(server, kubeconfig)
        agent.worker.on_snapshot(Snapshot(0, [reported(p) for p in pods], {}))
        for i in range(20):
            agent.worker.on_broadcast(EventRecorded(event(name=f"p{i % 3}", when=time.time())))
        agent.run_for(3 * TIMEOUT)
        agent.close()
    assert agent.longest_turn < 0.05  # heartbeats would go on: no call runs on the loop
    assert agent.turns > 3 * TIMEOUT / 0.02 / 2


def test_a_restarted_worker_writes_only_what_differs(
    server: ControlPlane, sent: NodeRequests, kube: Kube
) -> None:
    pods = [create_pod(kube, f"p{i}") for i in range(3)]
    first = Agent(server)
    first.worker.on_snapshot(Snapshot(0, [reported(p) for p in pods], {}))
    first.run_until(lambda: sent.patches() == 3, "three statuses")
    first.close()
    kube.core.patch_namespaced_pod_status("p1", "default", {"status": {"phase": "Pending"}})
    second = Agent(server)
    second.worker.on_snapshot(Snapshot(9, [reported(p) for p in pods], {}))
    second.run_until(lambda: read(kube, "p1")["status"]["phase"] == "Running", "p1 again")
    second.run_for(2 * PERIOD)
    second.close()
    assert sent.patches() == 4 and sent.patches("p1") == 2


def test_final_delete_with_the_uid_precondition(
    sent: NodeRequests, kube: Kube, agent: Agent
) -> None:
    pod = create_pod(kube)
    uid = pod["metadata"]["uid"]
    agent.worker.on_snapshot(Snapshot(0, [reported(pod)], {}))
    agent.worker.on_broadcast(PodStatusUpdated(reported(pod, phase="Succeeded", ready=False)))
    agent.worker.on_broadcast(PodForgotten(uid))
    agent.worker.on_broadcast(PodTerminated(uid, "default", "web"))
    agent.run_until(lambda: agent.bus.sent, "PodDeleted")
    assert agent.bus.sent == [PodDeleted(uid)]
    assert read(kube, "web") == {}
    assert sent.verbs("web")[-2:] == ["patch status", "delete"]  # the final status, then the delete


# --- mirror pods ---------------------------------------------------------------------------


def mirror(kube: Kube) -> Obj:
    return read(kube, f"etcd-{NODE}", "kube-system")


def current_mirror(kube: Kube, content_hash: str, not_uid: str = "") -> Obj | None:
    """The mirror pod of ``content_hash`` (with another UID than ``not_uid``), once it
    carries its static pod's status."""
    pod = mirror(kube)
    meta = pod.get("metadata", {})
    if meta.get("annotations", {}).get("kubernetes.io/config.mirror") != content_hash:
        return None
    if meta["uid"] == not_uid or not pod.get("status", {}).get("podIP"):
        return None
    return pod


def test_mirror_pod_follows_its_static_pod(sent: NodeRequests, kube: Kube, agent: Agent) -> None:
    node_uid = kube.core.read_node(NODE).metadata.uid
    agent.worker.on_snapshot(Snapshot(0, [static_pod(content_hash="h1")], {}))
    created = agent.run_until(lambda: current_mirror(kube, "h1"), "the mirror pod")
    meta = created["metadata"]
    assert meta["labels"] == {"component": "etcd"}
    assert meta["annotations"]["kubernetes.io/config.source"] == "file"
    assert meta["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node_uid, "controller": True}
    ]
    assert conditions(created)["Ready"]["status"] == "True"
    assert conditions(created)["PodScheduled"]["status"] == "True"

    kube.kubectl("delete", "pod", "-n", "kube-system", f"etcd-{NODE}", "--wait=false")
    back = agent.run_until(lambda: current_mirror(kube, "h1", meta["uid"]), "a new mirror pod")

    agent.worker.on_broadcast(PodStatusUpdated(static_pod(content_hash="h2")))  # edited
    agent.worker.on_broadcast(PodForgotten("h1"))
    agent.run_until(lambda: current_mirror(kube, "h2", back["metadata"]["uid"]), "the h2 mirror")

    agent.worker.on_broadcast(PodForgotten("h2"))  # the manifest removed
    agent.run_until(lambda: mirror(kube) == {}, "the mirror pod gone")
    assert len(sent.of("nodes", verb="get")) == 1


# --- events --------------------------------------------------------------------------------


def events(kube: Kube) -> list[Obj]:
    """The node's events (kube-controller-manager's own about the Node, such as
    ``RegisteredNode``, are in the same namespace)."""
    _, found, _ = kube.raw("GET", "/api/v1/namespaces/default/events")
    return [e for e in found["items"] if (e.get("source") or {}).get("host") == NODE]


def test_events_are_posted_counted_and_capped(kube: Kube, agent: Agent) -> None:
    agent.worker.on_snapshot(Snapshot(0, [], {}))
    now = time.time()
    agent.worker.on_broadcast(EventRecorded(event(when=now)))
    (posted,) = agent.run_until(lambda: events(kube), "the event")
    assert posted["source"] == {"component": "kubelet", "host": NODE}
    assert posted["involvedObject"]["fieldPath"] == "spec.containers{app}"
    assert (posted["reason"], posted["count"], posted["type"]) == ("Started", 1, "Normal")
    for i in (2, 3):
        agent.worker.on_broadcast(EventRecorded(event(when=now + i)))
        agent.run_until(lambda i=i: events(kube)[0]["count"] == i, f"count {i}")
    for i in range(40):  # a flood about one object
        body = event(reason="BackOff", message="Back-off restarting", kind="Warning", when=now + i)
        agent.worker.on_broadcast(EventRecorded(body))

    def back_off() -> list[Obj]:
        return [e for e in events(kube) if e["reason"] == "BackOff"]

    agent.run_until(lambda: back_off() and back_off()[0]["count"] == 22, "the capped flood")
    agent.run_for(2 * PERIOD)
    (flood,) = back_off()
    assert flood["count"] == 22  # the object's 25 tokens: 3 Started, 22 BackOff
    node_event = event(reason="NodeReady", message=f"Node {NODE} status is now: NodeReady")
    node_event["involvedObject"] = {"kind": "Node", "name": NODE, "uid": NODE, "apiVersion": "v1"}
    agent.worker.on_broadcast(EventRecorded(node_event))
    agent.run_until(lambda: len(events(kube)) == 3, "the Node's event")
    shown = json.loads(kube.kubectl("get", "events", "-o", "json").stdout)["items"]
    mine = [e["reason"] for e in shown if e["source"].get("host") == NODE]
    assert sorted(mine) == ["BackOff", "NodeReady", "Started"]


# --- what the real strategic merge patch keeps ---------------------------------------------


def not_ready(pod: Obj) -> Obj:
    """``pod`` as reported while its container is not ready, with the kubelet's reasons."""
    body = reported(pod, ready=False)
    why = "containers with unready status: [app]"
    for found in body["status"]["conditions"]:
        if found["type"] in ("Ready", "ContainersReady"):
            found.update(reason="ContainersNotReady", message=why)
    return body


def test_dropped_reasons_and_a_changed_ip_leave_nothing_behind(kube: Kube, agent: Agent) -> None:
    pod = create_pod(kube)
    agent.worker.on_snapshot(Snapshot(0, [not_ready(pod)], {}))
    agent.run_until(
        lambda: (
            conditions(read(kube, "web")).get("Ready", {}).get("reason") == "ContainersNotReady"
        ),
        "Ready=False with its reason",
    )
    agent.worker.on_broadcast(PodStatusUpdated(reported(pod, ip="10.88.0.9")))
    agent.run_until(lambda: read(kube, "web")["status"]["podIP"] == "10.88.0.9", "the new IP")
    status = read(kube, "web")["status"]
    assert status["podIPs"] == [{"ip": "10.88.0.9"}]
    ready = conditions(read(kube, "web"))["Ready"]
    assert ready["status"] == "True" and "reason" not in ready and "message" not in ready
    kinds = [c["type"] for c in status["conditions"]]
    assert kinds == [
        "PodReadyToStartContainers",
        "Initialized",
        "Ready",
        "ContainersReady",
        "PodScheduled",
    ]


def test_a_mirror_pod_noderestriction_refuses_holds_up_no_other_status(
    sent: NodeRequests, kube: Kube, agent: Agent
) -> None:
    """A static pod naming a service account may not have a mirror pod (NodeRestriction:
    403); its creates are retried with the back-off, and the node's other pods' statuses
    go on being written."""
    static = static_pod(content_hash="sa")
    static["spec"]["serviceAccountName"] = "default"
    pod = create_pod(kube)
    agent.worker.on_snapshot(Snapshot(0, [static, reported(pod)], {}))
    agent.run_until(lambda: read(kube, "web")["status"]["phase"] == "Running", "the status")
    refused = agent.run_until(lambda: sent.of("pods", verb="create"), "a mirror pod create")
    assert [_code(e) for e in refused] == [403] * len(refused)
    agent.run_for(4 * OPTIONS.retry_max)  # the back-off reaches its longest wait
    before = len(sent.of("pods", verb="create"))
    agent.run_for(5 * OPTIONS.retry_max)
    assert mirror(kube) == {}
    again = len(sent.of("pods", verb="create")) - before
    assert 1 <= again <= 5 + 1, again  # tried again, once per longest wait at most
    agent.worker.on_broadcast(PodStatusUpdated(reported(pod, ready=False)))
    agent.run_until(lambda: conditions(read(kube, "web"))["Ready"]["status"] == "False", "Ready")


def _code(event: Obj) -> int:
    return int((event.get("responseStatus") or {}).get("code", 0))


def test_a_repeated_event_whose_event_was_deleted_is_created_again(
    sent: NodeRequests, kube: Kube, agent: Agent
) -> None:
    agent.worker.on_snapshot(Snapshot(0, [], {}))
    now = time.time()
    agent.worker.on_broadcast(EventRecorded(event(when=now)))
    (posted,) = agent.run_until(lambda: events(kube), "the event")
    kube.core.delete_namespaced_event(posted["metadata"]["name"], "default")
    agent.worker.on_broadcast(EventRecorded(event(when=now + 1)))
    (again,) = agent.run_until(lambda: events(kube), "the event again")
    assert again["metadata"]["name"] == posted["metadata"]["name"]
    assert again["count"] == 2
    tried = [(e["verb"], _code(e)) for e in sent.of("events")]
    assert tried == [("create", 201), ("patch", 404), ("create", 201)]
