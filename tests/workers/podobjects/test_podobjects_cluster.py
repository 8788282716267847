"""The pod-objects worker against the real control plane (kube-apiserver's Node
authorizer and NodeRestriction, kube-controller-manager's TTL controller), with the node's
own credentials: the worker object on its real client, reflector threads and job threads,
driven as its lifecycle loop drives it, with what it sends the parent captured; checked
against what the API holds and what kube-apiserver's audit log shows of the node's
requests (``Requests``: the watches still open, the lists and gets made). Watches
resume after kube-apiserver restarts, and relist after etcd's 410 (a control plane of the
test's own, without the watch cache).

What the real server legitimately does otherwise than the test API server, taken as the
expectation here: kube-controller-manager's TTL controller gives the node its
``node.alpha.kubernetes.io/ttl`` (0 in a small cluster), so the Cache strategy's period
is the sync frequency; a watch ends in the audit log only when it is closed."""

from __future__ import annotations

import base64
import json
import logging
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import Hello, PodForgotten, PodStatusUpdated, TokenIssued
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock, FakeClock
from pkletd.workers.podobjects import Options, Strategy
from pkletd.workers.podobjects.nodettl import TTL_ANNOTATION

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import wait_for
from tests.workers.podobjects.podobjects_helpers import (
    CHILD,
    NODE,
    NODE_USER,
    SECRET_VALUE,
    Agent,
    Obj,
    Parent,
    claims,
    config_map,
    everything,
    pod,
    token_volume,
    volumes,
)

pytestmark = pytest.mark.slow


@dataclass
class Requests:
    """The node's requests in kube-apiserver's audit log since ``start`` (its line count
    when the test began): those it completed, and the watches it still has open."""

    plane: ControlPlane
    start: int

    @classmethod
    def since_now(cls, plane: ControlPlane) -> Requests:
        return cls(plane, len(cls._lines(plane)))

    @staticmethod
    def _lines(plane: ControlPlane) -> list[str]:
        try:
            return plane.audit_log_path.read_text().splitlines()
        except FileNotFoundError:
            return []

    def _events(self) -> list[dict[str, Any]]:
        events = []
        for line in self._lines(self.plane)[self.start :]:
            try:
                event = json.loads(line)
            except ValueError:  # the last line, being written
                continue
            if event.get("user", {}).get("username") == NODE_USER:
                events.append(event)
        return events

    def made(
        self, resource: str, verb: str, namespace: str | None = None, name: str | None = None
    ) -> list[dict[str, Any]]:
        """The completed ``verb`` requests for ``resource`` (in ``namespace``, for ``name``)."""
        return [
            e
            for e in self._events()
            if e["stage"] == "ResponseComplete"
            and e["verb"] == verb
            and e["objectRef"].get("resource") == resource
            and namespace in (None, e["objectRef"].get("namespace"))
            and name in (None, e["objectRef"].get("name"))
        ]

    def open_watches(self, resource: str, namespace: str) -> int:
        """The node's watches of ``resource`` in ``namespace`` started and not ended."""
        started, ended = set(), set()
        for e in self._events():
            ref = e["objectRef"]
            if e["verb"] != "watch" or (ref.get("resource"), ref.get("namespace")) != (
                resource,
                namespace,
            ):
                continue
            (started if e["stage"] == "ResponseStarted" else ended).add(e["auditID"])
        return len(started - ended)


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    cluster_kube.core.create_node({"metadata": {"name": NODE}})
    return cluster_kube


@pytest.fixture
def requests(control_plane: ControlPlane, kube: Kube) -> Requests:
    return Requests.since_now(control_plane)


@pytest.fixture
def agents(control_plane: ControlPlane, kube: Kube) -> Iterator[Callable[..., Agent]]:
    made: list[Agent] = []

    def make(clock: Clock = SYSTEM_CLOCK, **options: Any) -> Agent:
        agent = Agent(control_plane, Options(NODE, **options), clock)
        made.append(agent)
        return agent

    yield make
    for agent in made:
        agent.close()


def gets(requests: Requests, name: str) -> int:
    return len(requests.made("configmaps", "get", name=name))


def node_ttl(kube: Kube) -> str | None:
    """The node's object TTL as kube-controller-manager's TTL controller annotates it."""
    annotations = kube.core.read_node(NODE).metadata.annotations or {}
    return annotations.get(TTL_ANNOTATION)


def service(kube: Kube, name: str, namespace: str, cluster_ip: str = "", port: int = 80) -> None:
    spec: Obj = {"ports": [{"name": "web", "port": port}]}
    if cluster_ip:
        spec["clusterIP"] = cluster_ip
    kube.core.create_namespaced_service(namespace, {"metadata": {"name": name}, "spec": spec})


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
    agents: Callable[..., Agent], kube: Kube, requests: Requests
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
    agent.run_until(lambda: requests.open_watches("configmaps", "default"), "the watch")
    assert requests.open_watches("configmaps", "frozen") == 0
    agent.close()
    # the watch of "moving" ends in the audit log when the worker closes it
    wait_for("the watch ended", lambda: requests.made("configmaps", "watch", "default"))
    frozen = [e["verb"] for e in requests.made("configmaps", "list", "frozen")]
    frozen += [e["verb"] for e in requests.made("configmaps", "watch", "frozen")]
    assert frozen == ["list"]


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


def test_forgetting_the_last_pod_stops_its_watches(
    agents: Callable[..., Agent], kube: Kube, requests: Requests
) -> None:
    config_map(kube, "shared")
    first = pod(kube, "first", volumes=volumes({"configMap": {"name": "shared"}}))
    second = pod(kube, "second", volumes=volumes({"configMap": {"name": "shared"}}))
    agent = agents()
    agent.start(first, second)
    agent.wait_object("shared")
    agent.run_until(lambda: requests.open_watches("configmaps", "default") == 1, "one watch")
    agent.worker.on_broadcast(PodForgotten(first["metadata"]["uid"]))
    agent.run_until(lambda: True, "a turn")
    assert requests.open_watches("configmaps", "default") == 1  # second still uses it
    agent.worker.on_broadcast(PodForgotten(second["metadata"]["uid"]))
    agent.run_until(lambda: requests.open_watches("configmaps", "default") == 0, "no watch")
    sent = len(agent.objects("shared"))
    kube.core.patch_namespaced_config_map("shared", "default", {"data": {"key": "two"}})
    agent.run_until(lambda: True, "a turn")
    assert len(agent.objects("shared")) == sent


@pytest.mark.parametrize("strategy", [Strategy.CACHE, Strategy.GET])
def test_polled_objects_are_read_again_after_their_period(
    agents: Callable[..., Agent], kube: Kube, requests: Requests, strategy: Strategy
) -> None:
    wait_for("the TTL controller's annotation", lambda: node_ttl(kube) == "0")
    config_map(kube, "conf")
    # Cache: every max(TTL 0 s, syncFrequency 0.5 s); Get: every syncFrequency.
    agent = agents(strategy=strategy, sync_frequency=0.5)
    refs = volumes({"configMap": {"name": "conf"}}, {"secret": {"secretName": "nowhere"}})
    agent.start(pod(kube, "web", volumes=refs))
    agent.wait_object("conf")
    assert agent.wait_object("nowhere").missing
    kube.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
    changed = time.monotonic()
    agent.wait_object("conf", lambda m: m.strings == {"key": "two"})
    assert time.monotonic() - changed < 2.5
    wait_for("the second GET logged", lambda: gets(requests, "conf") >= 2)  # once it ended
    assert not requests.made("configmaps", "watch")
    assert not requests.made("configmaps", "list")


def test_cache_reads_again_when_another_pod_references_the_object(
    agents: Callable[..., Agent], kube: Kube, requests: Requests
) -> None:
    config_map(kube, "conf")
    agent = agents(strategy=Strategy.CACHE)  # TTL and syncFrequency: a minute
    ref = volumes({"configMap": {"name": "conf"}})
    agent.start(pod(kube, "first", volumes=ref))
    agent.wait_object("conf")
    wait_for("the GET logged", lambda: gets(requests, "conf") == 1)  # once it ended
    kube.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
    agent.worker.on_broadcast(PodStatusUpdated(pod(kube, "second", volumes=ref)))
    agent.wait_object("conf", lambda m: m.strings == {"key": "two"})
    wait_for("the second GET logged", lambda: gets(requests, "conf") == 2)


def token_requests(requests: Requests, account: str) -> list[int]:
    """The response codes of the node's TokenRequests for ``account``, in order."""
    made = requests.made("serviceaccounts", "create", "default", account)
    return [e["responseStatus"]["code"] for e in made if e["objectRef"]["subresource"] == "token"]


def test_tokens_are_bound_to_the_pod_and_refreshed_at_80_percent(
    agents: Callable[..., Agent],
    kube: Kube,
    requests: Requests,
    caplog: pytest.LogCaptureFixture,
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
    assert bound["node"]["name"] == NODE  # kube-apiserver binds it to the pod's node too
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
    wait_for("three requests", lambda: token_requests(requests, "default") == [201] * 3)


def test_a_failed_token_request_is_reported_and_retried(
    agents: Callable[..., Agent], kube: Kube, requests: Requests
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
    wait_for("the token issued", lambda: token_requests(requests, "robot")[-1:] == [201])
    assert token_requests(requests, "robot")[0] == 404  # the first, for the account gone


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


def test_a_killed_worker_process_sends_everything_again(
    control_plane: ControlPlane, kube: Kube, tmp_path: Path
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
    kubeconfig = control_plane.kubeconfig(user=NODE_USER, groups=["system:nodes"])
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


def test_a_secret_the_node_authorizer_refuses_is_an_error_until_a_pod_of_the_node_uses_it(
    agents: Callable[..., Agent], kube: Kube, requests: Requests
) -> None:
    """The worker hears of a pod the Node authorizer does not tie to the node (bound to
    another one): its secret is refused (403), an error, not missing; once a pod of the
    node references it, the read after the back-off gets it."""
    kube.core.create_namespaced_secret("default", {"metadata": {"name": "locked"}})
    locked = [{"name": "locked"}]
    elsewhere = pod(kube, "elsewhere", nodeName="other-node", imagePullSecrets=locked)
    agent = agents()
    agent.start(elsewhere)
    refused = agent.wait_object("locked")
    assert not refused.missing
    assert refused.error.startswith(
        'secrets "locked" is forbidden: User "system:node:testnode" cannot list resource'
    )
    assert refused.error.endswith("no relationship found between node 'testnode' and this object")
    pod(kube, "web", imagePullSecrets=locked)
    agent.run_until(lambda: not agent.objects("locked")[-1].error, "read after the back-off", 35)
    codes = [e["responseStatus"]["code"] for e in requests.made("secrets", "list", "default")]
    assert codes[0] == 403 and codes[-1] == 200


# --- watches across kube-apiserver restarts ---------------------------------------------


def test_watches_resume_after_a_restart_and_relist_after_410(
    make_control_plane: Callable[..., ControlPlane],
) -> None:
    """kube-apiserver ends its watches when it stops: the worker resumes from where it was
    (no new list), and once etcd has compacted that revision (no watch cache: etcd's own
    ``410 Gone``) it lists again."""
    plane = make_control_plane(watch_cache=False)
    admin = Kube(plane)
    agent: Agent | None = None
    try:
        admin.core.create_node({"metadata": {"name": NODE}})
        config_map(admin, "conf")
        requests = Requests.since_now(plane)
        agent = Agent(plane, Options(NODE))
        agent.start(pod(admin, "web", volumes=volumes({"configMap": {"name": "conf"}})))
        agent.wait_object("conf")
        agent.run_until(lambda: requests.open_watches("configmaps", "default"), "the watch")
        lists = len(requests.made("configmaps", "list", "default"))

        plane.restart_apiserver()
        admin.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "two"}})
        agent.run_until(lambda: latest_strings(agent, "conf") == {"key": "two"}, "two", 30)
        assert len(requests.made("configmaps", "list", "default")) == lists  # resumed

        config_map(admin, "bystander", "kube-system")  # history moves on...
        plane.compact()  # ...and is forgotten: resuming the watch gets 410
        plane.restart_apiserver()
        admin.core.patch_namespaced_config_map("conf", "default", {"data": {"key": "three"}})
        agent.run_until(lambda: latest_strings(agent, "conf") == {"key": "three"}, "three", 30)
        wait_for(
            "the relist",
            lambda: len(requests.made("configmaps", "list", "default")) == lists + 1,
        )
    finally:
        if agent is not None:
            agent.close()
        admin.close()


def latest_strings(agent: Agent, name: str) -> dict[str, str] | None:
    sent = agent.objects(name)
    return sent[-1].strings if sent else None
