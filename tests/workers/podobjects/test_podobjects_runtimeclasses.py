"""The pod-objects worker follows the cluster's RuntimeClasses as the kubelet's RuntimeClass
manager does (one list+watch of all of them, with the node's own credentials), against the
real control plane (kube-apiserver's Node authorizer lets a node read RuntimeClasses; its
audit log shows the node's list): nothing before the first list, then every class's
handler, again when a class comes or goes, and never twice the same."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import kubernetes.client
import pytest
from pkletd.ipc.bus.messages import RuntimeClassesListed
from pkletd.workers.podobjects import Options

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.workers.podobjects.podobjects_helpers import NODE, NODE_USER, Agent

pytestmark = pytest.mark.slow


@pytest.fixture
def classes_api(cluster_kube: Kube) -> kubernetes.client.NodeV1Api:
    cluster_kube.core.create_node({"metadata": {"name": NODE}})
    return kubernetes.client.NodeV1Api(cluster_kube.api)


@pytest.fixture
def agent(control_plane: ControlPlane, classes_api: Any) -> Iterator[Agent]:
    found = Agent(control_plane, Options(NODE))
    yield found
    found.close()


def node_lists(plane: ControlPlane) -> int:
    """The node's completed lists of RuntimeClasses, as the audit log has them."""
    return len(plane.audit_events("runtimeclasses", user=NODE_USER, verb="list"))


def create(api: kubernetes.client.NodeV1Api, name: str, handler: str) -> None:
    api.create_runtime_class({"metadata": {"name": name}, "handler": handler})


def listed(agent: Agent) -> list[dict[str, str]]:
    return [m.handlers for m in agent.bus.sent if isinstance(m, RuntimeClassesListed)]


def test_every_class_is_sent_once_listed_and_again_when_one_comes_or_goes(
    agent: Agent, classes_api: kubernetes.client.NodeV1Api, control_plane: ControlPlane
) -> None:
    lists_before = node_lists(control_plane)
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
    assert node_lists(control_plane) == lists_before + 1  # then the watch alone


def test_an_empty_cluster_is_sent_as_no_classes(agent: Agent) -> None:
    agent.start()
    agent.run_until(lambda: listed(agent), "the first list")
    assert listed(agent) == [{}]  # read: a pod naming a class finds it missing, not pending
