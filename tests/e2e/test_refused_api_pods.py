"""Pods from the API server that this node cannot run, on the real containerd: hostUsers:
false (from the real control plane), and a value pkletd does not know (an AppArmor profile
type from a newer API, which only the test API server lets through); each Failed in the API
with its reason and a Warning event, never run."""

from __future__ import annotations

import json
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

NEWER = {"appArmorProfile": {"type": "Enforce"}}


@pytest.fixture
def cluster_node(cluster_kube: Kube, pkletd: Pkletd, control_plane: ControlPlane) -> Pkletd:
    """Joined to the real control plane; stopped before the cluster is cleaned (it would
    register again)."""
    return join(pkletd, control_plane)


def pod(name: str, node: str, host_network: bool = True, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "hostNetwork": host_network,
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [{"name": "c", "image": BUSYBOX, "command": ["sleep", "3600"]}],
            **spec,
        },
    }


def failed(kube: Kube, name: str) -> Any:
    def check() -> Any:
        try:
            found = kube.core.read_namespaced_pod(name, "default")
        except ApiException:
            return None
        return found if found.status.phase == "Failed" else None

    return wait_for(f"{name} Failed in the API", check, timeout=30)


def warnings(kube: Kube, name: str) -> set[str]:
    events = kube.core.list_namespaced_event("default").items
    return {e.reason for e in events if e.involved_object.name == name and e.type == "Warning"}


def test_a_pod_without_host_users_is_failed_in_the_api(
    cluster_node: Pkletd, cluster_kube: Kube
) -> None:
    """The real API server forbids hostNetwork with ``hostUsers: false``: the pod has its
    own network (the test API server let both through)."""
    kube = cluster_kube
    no_userns = pod("nouserns", cluster_node.node, host_network=False, hostUsers=False)
    kube.core.create_namespaced_pod("default", no_userns)
    found = failed(kube, "nouserns")
    assert found.status.reason == "PodFeatureUnsupported"
    assert found.status.message == (
        "Pod was rejected: can't set `spec.hostUsers: false`, runtime does not support user "
        "namespaces"
    )
    wait_for("the Warning event", lambda: {"PodFeatureUnsupported"} <= warnings(kube, "nouserns"))
    assert cluster_node.pods()["nouserns"]["containers"][0]["container_id"] == ""  # never run


def test_the_real_api_server_refuses_a_value_it_does_not_know(cluster_kube: Kube) -> None:
    """Why the next test runs on the test API server: kube-apiserver validates the profile
    type itself, so no node of it ever sees a value from a newer API."""
    newer = pod("newer", "testnode", securityContext=NEWER)
    refused = cluster_kube.kubectl("create", "-f", "-", input=json.dumps(newer), check=False)
    assert refused.returncode != 0
    assert "spec.securityContext.appArmorProfile.type: Unsupported value" in refused.stderr


def test_a_value_pkletd_does_not_know_is_failed_in_the_api(
    pkletd: Pkletd, apiserver: ApiServer, kube: Kube
) -> None:
    """On the test API server: the real one refuses the pod itself (the test above), while a
    node must still refuse what a newer API server than its own lets through."""
    pkletd.join_cluster(apiserver).start()
    kube.core.create_namespaced_pod("default", pod("newer", pkletd.node, securityContext=NEWER))
    found = failed(kube, "newer")
    assert found.status.reason == "InvalidPodSpec"
    assert found.status.message == (
        "Pod was rejected: spec.securityContext.appArmorProfile.type: unsupported value "
        "'Enforce': supported values: 'RuntimeDefault', 'Unconfined', 'Localhost'"
    )
    wait_for("the Warning event", lambda: {"InvalidPodSpec"} <= warnings(kube, "newer"))
    assert pkletd.pods()["newer"]["containers"] == []  # its containers could not be read
    assert "refusing invalid pod source=api pod=default/newer" in pkletd.log()
