"""Readiness gates on a real pkletd joined to the real control plane with real containerd: a pod
whose gate condition another client writes (``kubectl patch --subresource=status``) is Ready
only once the gate is True, and ``kubectl get``/``describe`` show the kubelet's conditions,
in its order, with its reasons and messages, and no reason left over from before."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

GATE = "example.com/lb-ready"
RUN = "trap 'exit 0' TERM; while true; do sleep 1; done"
KUBELET_ORDER = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"]


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane) -> Iterator[Pkletd]:
    yield join(pkletd, control_plane)


def gated_pod(name: str) -> dict[str, Any]:
    container = {"name": "app", "image": BUSYBOX, "imagePullPolicy": "Never"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeName": "testnode",
            "terminationGracePeriodSeconds": 1,
            "automountServiceAccountToken": False,
            "readinessGates": [{"conditionType": GATE}],
            "containers": [{**container, "command": ["sh", "-c", RUN]}],
        },
    }


def conditions(kube: Kube, name: str) -> list[dict[str, Any]]:
    pod = json.loads(kube.kubectl("get", "pod", name, "-o", "json").stdout)
    found: list[dict[str, Any]] = pod["status"].get("conditions") or []
    return found


def shown(found: list[dict[str, Any]], kind: str) -> tuple[str, str | None, str | None]:
    c = next((c for c in found if c["type"] == kind), {})
    return c.get("status", ""), c.get("reason"), c.get("message")


def wait_ready(kube: Kube, name: str, want: tuple[str, str | None, str | None]) -> None:
    wait_for(
        f"{name} Ready {want}",
        lambda: shown(conditions(kube, name), "Ready") == want or None,
        timeout=30,
    )


def set_gate(kube: Kube, name: str, status: str) -> None:
    patch = {"status": {"conditions": [{"type": GATE, "status": status}]}}
    kube.kubectl("patch", "pod", name, "--subresource=status", "-p", json.dumps(patch))


def test_a_gate_turned_true_by_a_status_patch_makes_the_pod_ready(node: Pkletd, kube: Kube) -> None:
    kube.kubectl("create", "-f", "-", input=json.dumps(gated_pod("gated")))
    wait_ready(
        kube,
        "gated",
        (
            "False",
            "ReadinessGatesNotReady",
            f'corresponding condition of pod readiness gate "{GATE}" does not exist.',
        ),
    )
    assert shown(conditions(kube, "gated"), "ContainersReady") == ("True", None, None)

    set_gate(kube, "gated", "False")
    wait_ready(
        kube,
        "gated",
        (
            "False",
            "ReadinessGatesNotReady",
            f'the status of pod readiness gate "{GATE}" is not "True", but False',
        ),
    )

    set_gate(kube, "gated", "True")
    wait_ready(kube, "gated", ("True", None, None))
    found = conditions(kube, "gated")
    assert [c["type"] for c in found] == [GATE, *KUBELET_ORDER, "PodScheduled"]
    for kind in KUBELET_ORDER:
        assert shown(found, kind) == ("True", None, None), kind  # no reason left over
    assert all(c["lastProbeTime"] is None for c in found)

    described = kube.kubectl("describe", "pod", "gated").stdout
    gates = described.split("Readiness Gates:")[1].split("Conditions:")[0].split()
    assert gates == ["Type", "Status", GATE, "True"]
    table = described.split("Conditions:")[1].split("Volumes:")[0].split()
    assert table == ["Type", "Status"] + [
        w for k in [GATE, *KUBELET_ORDER, "PodScheduled"] for w in (k, "True")
    ]
    wide = kube.kubectl("get", "pod", "gated", "-o", "wide").stdout.splitlines()
    assert wide[0].split()[-1] == "GATES" and wide[1].split()[-1] == "1/1"

    set_gate(kube, "gated", "False")  # a gate can take it back
    wait_ready(
        kube,
        "gated",
        (
            "False",
            "ReadinessGatesNotReady",
            f'the status of pod readiness gate "{GATE}" is not "True", but False',
        ),
    )
    assert shown(conditions(kube, "gated"), "ContainersReady") == ("True", None, None)
