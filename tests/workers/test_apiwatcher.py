"""Pods from the API server on the real containerd: bound pods run, and every way the
watch can break (a dropped stream, a compacted history, a restarted API server, a
restarted watcher) loses and duplicates nothing."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.node import BUSYBOX, Pkletd, wait_for

pytestmark = pytest.mark.slow


def bound_pod(name: str, node: str = "testnode", grace: int = 2) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": node,
            "automountServiceAccountToken": False,  # tokens: issue 10
            "hostNetwork": True,
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                }
            ],
        },
    }


def names(agent: Pkletd) -> list[str]:
    return sorted(agent.pods())


def test_bound_pods_run_and_other_nodes_pods_do_not(
    pkletd: Pkletd, apiserver: ApiServer, kube: Kube
) -> None:
    api = kube.core
    pkletd.join_cluster(apiserver).start()
    api.create_namespaced_pod("default", bound_pod("mine"))
    api.create_namespaced_pod("default", bound_pod("theirs", node="othernode"))
    pkletd.wait_api_pod("mine")
    assert names(pkletd) == ["mine"]


def test_a_deleted_pod_is_stopped_within_its_grace(
    pkletd: Pkletd, apiserver: ApiServer, kube: Kube
) -> None:
    api = kube.core
    pkletd.join_cluster(apiserver).start()
    api.create_namespaced_pod("default", bound_pod("doomed", grace=30))
    pkletd.wait_api_pod("doomed")
    api.delete_namespaced_pod("doomed", "default", grace_period_seconds=3)
    wait_for("the deleted pod stopped", lambda: "doomed" not in pkletd.pods(), timeout=20)
    assert "pod stage pod=default/doomed" in pkletd.log() and "deleted in the API" in pkletd.log()


def test_broken_watches_lose_and_duplicate_nothing(
    pkletd: Pkletd, apiserver: ApiServer, kube: Kube
) -> None:
    api = kube.core
    pkletd.join_cluster(apiserver).start()
    api.create_namespaced_pod("default", bound_pod("first"))
    pkletd.wait_api_pod("first")

    def kill_watcher() -> None:
        os.kill(pkletd.workers()["api-watcher"]["pid"], signal.SIGKILL)

    breakages = (apiserver.drop_watches, apiserver.compact, apiserver.restart, kill_watcher)
    for step, breakage in enumerate(breakages):
        breakage()
        api.create_namespaced_pod("default", bound_pod(f"after-{step}"))
        pkletd.wait_api_pod(f"after-{step}")
    api.delete_namespaced_pod("first", "default", grace_period_seconds=1)
    wait_for("first stopped", lambda: "first" not in pkletd.pods(), timeout=20)
    assert names(pkletd) == [f"after-{i}" for i in range(4)]
    restarts = {p["name"]: p["containers"][0]["restart_count"] for p in pkletd.status()["pods"]}
    assert set(restarts.values()) == {0}  # nothing started twice
