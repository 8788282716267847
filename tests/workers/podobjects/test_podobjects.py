"""The pod-objects worker against the local HTTPS API server (``tests/harness/apiserver``),
for what only its fault injection shows: watches dropped mid-stream and resumed (or
relisted after 410), and a read refused by a custom authorizer until it is allowed. The
rest runs against the real control plane (``test_podobjects_cluster.py``); the worker's
rules on their own are in ``test_podobjects_rules.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.podobjects import Options

from tests.harness.apiserver import ApiServer, Attributes, Decision
from tests.harness.apiserver.auth import default_authorizer
from tests.harness.apiserver.client import Kube
from tests.harness.node import wait_for
from tests.workers.podobjects.podobjects_helpers import NODE, Agent, config_map, pod, volumes


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


def open_watches(server: ApiServer, bucket: str, namespace: str) -> int:
    return sum(
        1
        for w in server.store.watchers()
        if w.bucket == bucket and w.namespace == namespace and not w.closed.is_set()
    )


def test_watches_resume_after_a_drop_and_relist_after_410(
    make_apiserver: Callable[..., ApiServer], agents: Callable[..., Agent]
) -> None:
    """On the test API server: kube-apiserver ends a watch only at its timeout or when it
    stops, never cut off mid-stream (``drop_watches(abrupt=True)``: the connection closed
    without the chunked stream's end) while the server goes on serving. Resuming after
    kube-apiserver restarts, and the relist after etcd's 410, are in
    ``test_podobjects_cluster.py``."""
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


def test_a_refused_read_is_an_error_until_allowed(
    agents: Callable[..., Agent], kube: Kube, apiserver: ApiServer
) -> None:
    """On the test API server: its authorizer can be swapped for one refusing secrets
    and restored, so the same pod's secret is refused and then allowed. kube-apiserver's
    Node authorizer refuses only what no pod of the node references (that case, allowed
    once a pod of the node references it, is in ``test_podobjects_cluster.py``)."""

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
