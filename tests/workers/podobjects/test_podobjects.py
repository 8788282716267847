"""The pod-objects worker against the local HTTPS API server (``tests/harness/apiserver``):
the worker object on its real client, reflector threads and job threads, driven as its
lifecycle loop drives it, with what it sends the parent captured; checked against
what the API holds and the server's open watches and request log."""

from __future__ import annotations

import base64
import json
import logging
import select
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
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.ipc.bus.messages import (
    Hello,
    Message,
    ObjectFetched,
    PodForgotten,
    PodStatusUpdated,
    ServicesListed,
    Snapshot,
    SnapshotRequest,
    TokenIssued,
)
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.bus.sockets import ParentBus
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock, FakeClock
from pkletd.workers.podobjects import Options, PodObjects, Strategy, build
from pkletd.workers.podobjects.calls import ApiCalls
from pkletd.workers.podobjects.nodettl import TTL_ANNOTATION, object_ttl
from pkletd.workers.podobjects.outbox import Outbox
from pkletd.workers.podobjects.reading import MAX_DATA_BYTES, failure, reading
from pkletd.workers.podobjects.services import summary
from pkletd.workers.podobjects.tokens import Issued, refresh_at, requires_refresh

from tests.harness.apiserver import ApiServer, Attributes, Decision
from tests.harness.apiserver.auth import default_authorizer
from tests.harness.apiserver.client import Kube
from tests.harness.node import wait_for

NODE = "testnode"
NODE_USER = f"system:node:{NODE}"
SECRET_VALUE = "hunter2-never-logged"
Obj = dict[str, Any]


class Agent:
    """The worker as its process runs it: ``tick``, then what its fds have waiting."""

    def __init__(
        self,
        server: ApiServer,
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


@pytest.fixture
def kube(apiserver: ApiServer) -> Iterator[Kube]:
    admin = Kube(apiserver)
    admin.core.create_node({"metadata": {"name": NODE}})
    yield admin
    admin.close()


@pytest.fixture
def agents(apiserver: ApiServer, kube: Kube) -> Iterator[Callable[..., Agent]]:
    made: list[Agent] = []

    def make(server: ApiServer = apiserver, clock: Clock = SYSTEM_CLOCK, **options: Any) -> Agent:
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
        wait_for(
            "the relist logged",
            lambda: len(server.requests(resource="configmaps", verb="LIST")) == lists + 1,
        )
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
    wait_for("the second GET logged", lambda: gets(apiserver, "conf") >= 2)  # once it ended
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
    wait_for("the GET logged", lambda: gets(apiserver, "conf") == 1)  # once it ended
    kube.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
    agent.worker.on_broadcast(PodStatusUpdated(pod(kube, "second", volumes=ref)))
    agent.wait_object("conf", lambda m: m.strings == {"key": "two"})
    wait_for("the second GET logged", lambda: gets(apiserver, "conf") == 2)


# --- service account tokens ----------------------------------------------------------


def token_volume(*sources: Obj) -> Obj:
    return {"projected": {"sources": [{"serviceAccountToken": s} for s in sources]}}


def claims(token: str) -> Obj:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_tokens_are_bound_to_the_pod_and_refreshed_at_80_percent(
    agents: Callable[..., Agent], kube: Kube, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    clock = FakeClock(wall=time.time())
    agent = agents(clock=clock)
    sources = ({"audience": "vault", "expirationSeconds": 600, "path": "t"}, {"path": "api"})
    web = pod(kube, "web", volumes=volumes(token_volume(*sources)))
    agent.start(web)
    agent.run_until(lambda: len(agent.tokens()) == 2, "two tokens")
    by_audience = {t.audience: t for t in agent.tokens()}
    vault, api = by_audience["vault"], by_audience[""]
    assert (vault.expiration_seconds, api.expiration_seconds) == (600, 3600)
    assert not vault.error and vault.expires_at == pytest.approx(clock.wall + 600, abs=5)
    assert claims(vault.token)["aud"] == ["vault"]
    bound = claims(vault.token)["kubernetes.io"]
    assert bound["pod"] == {"name": "web", "uid": web["metadata"]["uid"]}
    assert bound["serviceaccount"]["name"] == "default"
    assert claims(api.token)["aud"] == ["https://kubernetes.default.svc.cluster.local"]

    clock.step(0.79 * 600)  # not yet: 80 % of its lifetime has not passed
    agent.run_until(lambda: True, "a turn")
    assert len(agent.tokens()) == 2
    clock.step(0.02 * 600)
    agent.run_until(lambda: len(agent.tokens()) == 3, "the vault token refreshed")
    fresh = agent.tokens()[-1]
    assert fresh.audience == "vault" and fresh.token != vault.token and not fresh.error
    for token in (vault.token, api.token, fresh.token):
        assert token not in caplog.text


def test_a_failed_token_request_is_reported_and_retried(
    agents: Callable[..., Agent], kube: Kube
) -> None:
    kube.core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
    web = pod(kube, "web", serviceAccountName="robot", volumes=volumes(token_volume({"path": "t"})))
    kube.core.delete_namespaced_service_account("robot", "default")
    agent = agents()
    agent.start(web)
    failed = agent.run_until(lambda: agent.tokens(), "the token's answer")[-1]
    assert (failed.token, failed.error) == ("", 'serviceaccounts "robot" not found')
    kube.core.create_namespaced_service_account("default", {"metadata": {"name": "robot"}})
    agent.run_until(lambda: agent.tokens()[-1].token, "the token after the back-off")


# --- Services ----------------------------------------------------------------------------


def service(kube: Kube, name: str, namespace: str, cluster_ip: str = "", port: int = 80) -> None:
    spec: Obj = {"ports": [{"name": "web", "port": port}]}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    kube.core.create_namespaced_service(namespace, {"metadata": {"name": name}, "spec": spec})


def test_services_are_sent_for_the_pods_namespaces_and_default(
    agents: Callable[..., Agent], kube: Kube
) -> None:
    for namespace in ("shop", "elsewhere"):
        kube.core.create_namespace({"metadata": {"name": namespace}})
    service(kube, "cart", "shop", port=8080)
    service(kube, "peers", "shop", cluster_ip="None")  # headless: no variables
    service(kube, "hidden", "elsewhere")
    agent = agents()
    agent.start(pod(kube, "web", "shop"))
    agent.run_until(lambda: agent.services("shop") and agent.services("default"), "both")
    (shop,) = agent.services("shop")
    assert [s["name"] for s in shop.services] == ["cart"]
    cart = shop.services[0]
    assert cart["clusterIP"] and cart["ports"] == [{"name": "web", "port": 8080, "protocol": "TCP"}]
    (default,) = agent.services("default")
    assert default.services == [
        {
            "name": "kubernetes",
            "clusterIP": "10.96.0.1",
            "ports": [{"name": "https", "port": 443, "protocol": "TCP"}],
        }
    ]
    assert not agent.services("elsewhere")

    service(kube, "noise", "elsewhere")
    service(kube, "search", "shop")
    agent.run_until(lambda: len(agent.services("shop")) == 2, "the shop's new service")
    assert [s["name"] for s in agent.services("shop")[-1].services] == ["cart", "search"]
    assert len(agent.services("default")) == 1 and not agent.services("elsewhere")


# --- the rules, on their own ---------------------------------------------------------------


def test_refresh_decision_follows_the_token_manager() -> None:
    hour = Issued("t", expires_at=10_000.0 + 3600, lifetime=3600)
    assert refresh_at(hour) == 10_000.0 + 0.8 * 3600
    assert not requires_refresh(hour, 10_000.0 + 0.8 * 3600 - 1)
    assert requires_refresh(hour, 10_000.0 + 0.8 * 3600)
    assert not requires_refresh(hour, 10_000.0 - 1)  # the API server's clock is ahead: kept
    year = Issued("t", expires_at=10_000.0 + 365 * 86400, lifetime=365 * 86400)
    assert refresh_at(year) == 10_000.0 + 86400  # a day old at most
    assert not requires_refresh(year, 10_000.0 + 86399)
    assert requires_refresh(year, 10_000.0 + 86400)


def test_a_reading_decodes_and_refuses_what_is_too_large() -> None:
    key = ObjectKey(ObjectKind.SECRET, "default", "big")
    small = {"metadata": {"resourceVersion": "7"}, "type": "kubernetes.io/tls"}
    small["data"] = {"tls.key": base64.b64encode(b"k").decode()}
    read = reading(key, small)
    assert (read.data, read.secret_type, read.resource_version) == (
        {"tls.key": b"k"},
        "kubernetes.io/tls",
        "7",
    )
    large = {"data": {"blob": base64.b64encode(b"x" * MAX_DATA_BYTES).decode()}}
    refused = reading(key, large)
    assert refused.error == (
        f'secret "big" is too large: {MAX_DATA_BYTES + 4} bytes of data, '
        f"pkletd takes at most {MAX_DATA_BYTES}"
    )
    assert not refused.missing and not refused.data
    bad = reading(key, {"data": {"k": "not base64!"}})
    assert bad.error == 'secret "big" has data that is not valid base64'
    assert reading(key, None).error == 'secret "big" not found'


def test_object_ttl_and_service_summaries() -> None:
    assert object_ttl({"metadata": {"annotations": {TTL_ANNOTATION: "15"}}}) == 15.0
    assert object_ttl({"metadata": {"annotations": {TTL_ANNOTATION: "soon"}}}) is None
    assert object_ttl({"metadata": {}}) is None
    assert summary({"metadata": {"name": "db"}, "spec": {"clusterIP": "None"}}) is None
    assert summary({"metadata": {"name": "db"}, "spec": {"clusterIP": ""}}) is None
    found = summary(
        {
            "metadata": {"name": "db"},
            "spec": {"clusterIP": "10.0.0.5", "ports": [{"port": 5432}], "type": "ClusterIP"},
        }
    )
    assert found == {
        "name": "db",
        "clusterIP": "10.0.0.5",
        "ports": [{"name": "", "port": 5432, "protocol": "TCP"}],
    }


# --- the worker process --------------------------------------------------------------------

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


def test_a_killed_worker_process_sends_everything_again(
    apiserver: ApiServer, kube: Kube, tmp_path: Path
) -> None:
    config_map(kube, "conf")
    secret = base64.b64encode(SECRET_VALUE.encode()).decode()
    kube.core.create_namespaced_secret(
        "default", {"metadata": {"name": "creds"}, "data": {"pw": secret}}
    )
    refs = volumes(
        {"configMap": {"name": "conf"}},
        {"secret": {"secretName": "creds"}},
        token_volume({"path": "t"}),
    )
    web = pod(kube, "web", volumes=refs)
    kubeconfig = apiserver.kubeconfig(user=NODE_USER, groups=["system:nodes"])
    run_dir = Path(tempfile.mkdtemp(prefix="po-", dir="/tmp"))  # ipc:// paths stay short
    parent = Parent(run_dir, [web])
    children: list[subprocess.Popen[bytes]] = []

    def spawn() -> None:
        with open(tmp_path / f"worker-{len(children)}.log", "wb") as log:
            children.append(
                subprocess.Popen(
                    [sys.executable, "-c", CHILD, str(run_dir), str(kubeconfig)],
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    try:
        spawn()
        first = parent.pump(lambda: everything(parent.heard), "everything sent")
        children[0].kill()  # SIGKILL: no goodbye
        children[0].wait()
        start = len(parent.heard)
        spawn()
        again = parent.pump(lambda: everything(parent.since(start)), "everything sent again")
        assert sum(isinstance(m, Hello) for m in parent.since(start)) == 1
        for name in ("conf", "creds", "services/default"):
            assert again[name] == first[name]
        assert isinstance(again["token"], TokenIssued) and again["token"].token
    finally:
        for child in children:
            if child.poll() is None:
                child.terminate()
            child.wait()
        parent.close()
        shutil.rmtree(run_dir, ignore_errors=True)
    logs = b"".join((tmp_path / f"worker-{i}.log").read_bytes() for i in range(len(children)))
    assert b"object read kind=Secret namespace=default name=creds" in logs
    for token in (first["token"], again["token"]):
        assert isinstance(token, TokenIssued) and token.token.encode() not in logs
    assert SECRET_VALUE.encode() not in logs and secret.encode() not in logs


def test_the_outbox_keeps_a_reading_over_a_failure_and_holds_what_the_bus_refuses() -> None:
    bus = FakeSender()
    outbox = Outbox(bus)
    key = ObjectKey(ObjectKind.CONFIG_MAP, "default", "conf")
    fresh = failure(key, "HTTP 500")
    outbox.put_object(key, fresh)  # never read: the failure is the news
    read = reading(key, {"metadata": {"resourceVersion": "3"}, "data": {"a": "1"}})
    outbox.put_object(key, read)
    outbox.put_object(key, failure(key, "HTTP 503"))  # read before: kept
    outbox.put_object(key, read)  # the same again: nothing to send
    assert bus.sent == [fresh, read]
    bus.refusing = True
    gone = reading(key, None)
    outbox.put_object(key, gone)  # missing replaces a reading, once the bus takes it
    assert outbox.owed() and bus.sent == [fresh, read]
    bus.refusing = False
    outbox.flush()
    assert not outbox.owed() and bus.sent == [fresh, read, gone]
    outbox.resend()
    assert bus.sent == [fresh, read, gone, gone]
