"""The pod-objects worker follows the cluster's RuntimeClasses as the kubelet's RuntimeClass
manager does (one list+watch of all of them, with the node's own credentials), against the
local API server: nothing before the first list, then every class's handler, again when a
class comes or goes, and never twice the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
from pkletd.ipc.bus.messages import RuntimeClassesListed
from pkletd.workers.podobjects import Options

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.workers.podobjects.test_podobjects import NODE, Agent


@pytest.fixture
def classes_api(apiserver: ApiServer) -> Iterator[kubernetes.client.NodeV1Api]:
    admin = Kube(apiserver)
    admin.core.create_node({"metadata": {"name": NODE}})
    yield kubernetes.client.NodeV1Api(admin.api)
    admin.close()


@pytest.fixture
def agent(apiserver: ApiServer, classes_api: Any) -> Iterator[Agent]:
    found = Agent(apiserver, Options(NODE))
    yield found
    found.close()


def create(api: kubernetes.client.NodeV1Api, name: str, handler: str) -> None:
    api.create_runtime_class({"metadata": {"name": name}, "handler": handler})


def listed(agent: Agent) -> list[dict[str, str]]:
    return [m.handlers for m in agent.bus.sent if isinstance(m, RuntimeClassesListed)]


def test_every_class_is_sent_once_listed_and_again_when_one_comes_or_goes(
    agent: Agent, classes_api: kubernetes.client.NodeV1Api
) -> None:
    create(classes_api, "fast", "runc")
    agent.start()
    # the first list, at resourceVersion 0, may be served from the server's cache a moment
    # old, as kube-apiserver's: then the watch brings the class
    agent.run_until(lambda: {"fast": "runc"} in listed(agent), "the class listed")
    create(classes_api, "test", "runc-test")
    both = {"fast": "runc", "test": "runc-test"}
    agent.run_until(lambda: listed(agent)[-1] == both, "the new class")
    classes_api.delete_runtime_class("fast")
    agent.run_until(lambda: listed(agent)[-1] == {"test": "runc-test"}, "the class gone")
    sent = listed(agent)
    assert sent[-3:] == [{"fast": "runc"}, both, {"test": "runc-test"}]
    assert all(a != b for a, b in zip(sent, sent[1:], strict=False))  # never twice the same


def test_an_empty_cluster_is_sent_as_no_classes(agent: Agent) -> None:
    agent.start()
    agent.run_until(lambda: listed(agent), "the first list")
    assert listed(agent) == [{}]  # read: a pod naming a class finds it missing, not pending
