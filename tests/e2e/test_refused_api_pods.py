"""Pods from the API server that this node cannot run, on the real containerd: hostUsers:
false, and a value pkletd does not know (an AppArmor profile type from a newer API); each
Failed in the API with its reason and a Warning event, never run."""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.node import BUSYBOX, Pkletd, wait_for

pytestmark = pytest.mark.slow


def pod(name: str, node: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": node,
            "hostNetwork": True,
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


def test_pods_the_node_cannot_run_are_failed_in_the_api(
    pkletd: Pkletd, apiserver: ApiServer, kube: Kube
) -> None:
    pkletd.join_cluster(apiserver).start()
    kube.core.create_namespaced_pod("default", pod("nouserns", pkletd.node, hostUsers=False))
    newer = {"appArmorProfile": {"type": "Enforce"}}
    kube.core.create_namespaced_pod("default", pod("newer", pkletd.node, securityContext=newer))

    found = failed(kube, "nouserns")
    assert found.status.reason == "PodFeatureUnsupported"
    assert found.status.message == (
        "Pod was rejected: can't set `spec.hostUsers: false`, runtime does not support user "
        "namespaces"
    )
    found = failed(kube, "newer")
    assert found.status.reason == "InvalidPodSpec"
    assert found.status.message == (
        "Pod was rejected: spec.securityContext.appArmorProfile.type: unsupported value "
        "'Enforce': supported values: 'RuntimeDefault', 'Unconfined', 'Localhost'"
    )
    wait_for("the Warning events", lambda: {"PodFeatureUnsupported"} <= warnings(kube, "nouserns"))
    wait_for("the Warning events", lambda: {"InvalidPodSpec"} <= warnings(kube, "newer"))
    assert pkletd.pods()["nouserns"]["containers"][0]["container_id"] == ""  # never run
    assert pkletd.pods()["newer"]["containers"] == []  # its containers could not be read
    assert "refusing invalid pod source=api pod=default/newer" in pkletd.log()
