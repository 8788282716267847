"""The pod-objects worker against the local HTTPS API server (``tests/harness/apiserver``):
the worker object on its real client, reflector threads and job threads, driven as its
lifecycle loop drives it, with what it sends the parent captured; checked against
what the API holds and the server's open watches and request log."""

from __future__ import annotations

import base64
import logging
import select
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pkletd.ipc import kubeapi
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.messages import (
    Message,
    ObjectFetched,
    PodForgotten,
    PodStatusUpdated,
    ServicesListed,
    Snapshot,
    TokenIssued,
)
from pkletd.workers.podobjects import Options, PodObjects, Strategy, build
from pkletd.workers.podobjects.calls import ApiCalls

from tests.e2e import wait_for
from tests.harness.apiserver import ApiServer, Attributes, Decision
from tests.harness.apiserver.auth import default_authorizer
from tests.harness.apiserver.client import Kube

NODE = "testnode"
NODE_USER = f"system:node:{NODE}"
SECRET_VALUE = "hunter2-never-logged"
Obj = dict[str, Any]


class FakeBus:
    def __init__(self) -> None:
        self.sent: list[Message] = []

    def send(self, message: Message) -> None:
        self.sent.append(message)


class Agent:
    """The worker as its process runs it: ``tick``, then what its fds have waiting."""

    def __init__(
        self,
        server: ApiServer,
        options: Options,
        clock: Callable[[], float] = time.time,
    ) -> None:
        kubeconfig = server.kubeconfig(user=NODE_USER, groups=["system:nodes"])
        self.calls = ApiCalls(kubeapi.connect(str(kubeconfig), 1000, 1000, pool_size=64))
        self.bus = FakeBus()
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


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[Kube]:
    admin = Kube(apiserver)
    admin.core.create_node({"metadata": {"name": NODE}})
    yield admin
    admin.close()


@pytest.fixture
def agents(apiserver: ApiServer, kube: Kube) -> Iterator[Callable[..., Agent]]:
    made: list[Agent] = []

    def make(
        server: ApiServer = apiserver, clock: Callable[[], float] = time.time, **options: Any
    ) -> Agent:
        agent = Agent(server, Options(NODE, **options), clock)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


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


def open_watches(server: ApiServer, bucket: str, namespace: str) -> int:
    return sum(
        1
        for w in server.store.watchers()
        if w.bucket == bucket and w.namespace == namespace and not w.closed.is_set()
    )


# --- ConfigMaps and Secrets: Watch ------------------------------------------------------


def test_objects_are_sent_and_changes_follow_within_a_second(
    agents: Callable[..., Agent], kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    config_map(kube, "conf", binaryData={"blob": base64.b64encode(b"\x00\x01").decode()})
    secret = base64.b64encode(SECRET_VALUE.encode()).decode()
    kube.core.create_namespaced_secret(
        "default", {"metadata": {"name": "creds"}, "type": "Opaque", "data": {"pw": secret}}
    )
    env = [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw"}}}]
    web = pod(
        kube,
        "web",
        volumes=volumes({"configMap": {"name": "conf"}}),
        containers=[{"name": "c", "image": "busybox", "env": env}],
    )
    agent = agents()
    agent.start(web)
    conf = agent.wait_object("conf")
    assert (conf.object_kind, conf.strings, conf.data) == (
        ObjectKind.CONFIG_MAP,
        {"key": "one"},
        {"blob": b"\x00\x01"},
    )
    creds = agent.wait_object("creds")
    assert creds.object_kind is ObjectKind.SECRET and creds.secret_type == "Opaque"
    assert creds.data == {"pw": SECRET_VALUE.encode()} and not creds.error

    kube.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
    changed = time.monotonic()
    agent.wait_object("conf", lambda m: m.strings == {"key": "two"})
    assert time.monotonic() - changed < 2.0
    assert int(agent.objects("conf")[-1].resource_version) > int(conf.resource_version)
    assert len(agent.objects("creds")) == 1  # unchanged: not sent again
    assert SECRET_VALUE not in caplog.text and secret not in caplog.text
    assert "object read kind=Secret namespace=default name=creds" in caplog.text


def test_an_immutable_object_is_read_once_and_not_watched(
    agents: Callable[..., Agent], kube: Kube, apiserver: ApiServer
) -> None:
    kube.core.create_namespace({"metadata": {"name": "frozen"}})
    config_map(kube, "settled", "frozen", immutable=True)
    config_map(kube, "moving", "default")
    agent = agents()
    agent.start(
        pod(kube, "a", "frozen", volumes=volumes({"configMap": {"name": "settled"}})),
        pod(kube, "b", volumes=volumes({"configMap": {"name": "moving"}})),
    )
    assert agent.wait_object("settled").immutable
    agent.wait_object("moving")
    agent.run_until(lambda: open_watches(apiserver, "configmaps", "default"), "the watch")
    assert open_watches(apiserver, "configmaps", "frozen") == 0
    agent.close()
    # Requests are logged once they end: the watch of "moving" ended with the worker.
    wait_for("the watch logged", lambda: apiserver.requests(resource="configmaps", verb="WATCH"))
    frozen = apiserver.requests(resource="configmaps", namespace="frozen", user=NODE_USER)
    assert [r.verb for r in frozen] == ["LIST"]


def test_a_missing_object_is_missing_until_it_is_created(
    agents: Callable[..., Agent], kube: Kube
) -> None:
    agent = agents()
    agent.start(pod(kube, "web", volumes=volumes({"secret": {"secretName": "later"}})))
    assert agent.wait_object("later").error == 'secret "later" not found'
    assert agent.objects("later")[-1].missing
    kube.core.create_namespaced_secret("default", {"metadata": {"name": "later"}})
    found = agent.wait_object("later", lambda m: not m.error)
    assert not found.missing and found.data == {}


def test_watches_resume_after_a_drop_and_relist_after_410(
    make_apiserver: Callable[..., ApiServer], agents: Callable[..., Agent]
) -> None:
    server = make_apiserver(bookmark_interval=3600.0)  # the watch stays at its list's version
    admin = Kube(server)
    try:
        admin.core.create_node({"metadata": {"name": NODE}})
        config_map(admin, "conf")
        agent = agents(server)
        agent.start(pod(admin, "web", volumes=volumes({"configMap": {"name": "conf"}})))
        agent.wait_object("conf")
        agent.run_until(lambda: open_watches(server, "configmaps", "default"), "the watch")

        server.drop_watches(abrupt=True)
        admin.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
        agent.wait_object("conf", lambda m: m.strings == {"key": "two"})

        lists = len(server.requests(resource="configmaps", verb="LIST"))
        config_map(admin, "bystander", "kube-system")  # history moves on...
        server.compact()  # ...and is forgotten: resuming the watch gets 410
        server.drop_watches()
        admin.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "three"}})
        agent.wait_object("conf", lambda m: m.strings == {"key": "three"})
        assert len(server.requests(resource="configmaps", verb="LIST")) == lists + 1
    finally:
        admin.close()


def test_forgetting_the_last_pod_stops_its_watches(
    agents: Callable[..., Agent], kube: Kube, apiserver: ApiServer
) -> None:
    config_map(kube, "shared")
    first = pod(kube, "first", volumes=volumes({"configMap": {"name": "shared"}}))
    second = pod(kube, "second", volumes=volumes({"configMap": {"name": "shared"}}))
    agent = agents()
    agent.start(first, second)
    agent.wait_object("shared")
    agent.run_until(lambda: open_watches(apiserver, "configmaps", "default") == 1, "one watch")
    agent.worker.on_broadcast(PodForgotten(first["metadata"]["uid"]))
    agent.run_until(lambda: True, "a turn")
    assert open_watches(apiserver, "configmaps", "default") == 1  # second still uses it
    agent.worker.on_broadcast(PodForgotten(second["metadata"]["uid"]))
    agent.run_until(lambda: open_watches(apiserver, "configmaps", "default") == 0, "no watch")
    sent = len(agent.objects("shared"))
    kube.core.patch_namespaced_config_map("shared", "default", {"data": {"key": "two"}})
    agent.run_until(lambda: apiserver.requests(resource="configmaps", verb="PATCH"), "patched")
    assert len(agent.objects("shared")) == sent


def test_a_refused_read_is_an_error_until_allowed(
    agents: Callable[..., Agent], kube: Kube, apiserver: ApiServer
) -> None:
    def no_secrets(attributes: Attributes) -> Decision:
        if attributes.resource == "secrets":
            return Decision(False, "no secrets today")
        return default_authorizer(attributes)

    kube.core.create_namespaced_secret("default", {"metadata": {"name": "locked"}})
    apiserver.authorizer = no_secrets
    agent = agents()
    agent.start(pod(kube, "web", imagePullSecrets=[{"name": "locked"}]))
    refused = agent.wait_object("locked")
    assert not refused.missing
    assert refused.error.startswith(
        'secrets "locked" is forbidden: User "system:node:testnode" cannot list resource'
    )
    assert refused.error.endswith("no secrets today")
    apiserver.authorizer = default_authorizer
    agent.run_until(lambda: not agent.objects("locked")[-1].error, "read after the back-off")


# --- ConfigMaps and Secrets: Cache and Get ---------------------------------------------


def gets(server: ApiServer, name: str) -> int:
    return sum(1 for r in server.requests(resource="configmaps", verb="GET") if r.name == name)


@pytest.mark.parametrize("strategy", [Strategy.CACHE, Strategy.GET])
def test_polled_objects_are_read_again_after_their_period(
    agents: Callable[..., Agent], kube: Kube, apiserver: ApiServer, strategy: Strategy
) -> None:
    kube.core.patch_node(NODE, {"metadata": {"annotations": {"node.alpha.kubernetes.io/ttl": "1"}}})
    config_map(kube, "conf")
    # Cache: every max(TTL 1 s, syncFrequency 0.5 s); Get: every syncFrequency.
    agent = agents(strategy=strategy, sync_frequency=0.5)
    refs = volumes({"configMap": {"name": "conf"}}, {"secret": {"secretName": "nowhere"}})
    agent.start(pod(kube, "web", volumes=refs))
    agent.wait_object("conf")
    assert agent.wait_object("nowhere").missing
    kube.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
    changed = time.monotonic()
    agent.wait_object("conf", lambda m: m.strings == {"key": "two"})
    assert time.monotonic() - changed < 2.5
    assert gets(apiserver, "conf") >= 2
    assert not apiserver.requests(resource="configmaps", verb="WATCH")
    assert not apiserver.requests(resource="configmaps", verb="LIST")


def test_cache_reads_again_when_another_pod_references_the_object(
    agents: Callable[..., Agent], kube: Kube, apiserver: ApiServer
) -> None:
    config_map(kube, "conf")
    agent = agents(strategy=Strategy.CACHE)  # TTL and syncFrequency: a minute
    ref = volumes({"configMap": {"name": "conf"}})
    agent.start(pod(kube, "first", volumes=ref))
    agent.wait_object("conf")
    assert gets(apiserver, "conf") == 1
    kube.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
    agent.worker.on_broadcast(PodStatusUpdated(pod(kube, "second", volumes=ref)))
    agent.wait_object("conf", lambda m: m.strings == {"key": "two"})
    assert gets(apiserver, "conf") == 2
