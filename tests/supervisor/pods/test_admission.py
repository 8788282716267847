"""Admission: pods the node cannot take are Failed with the kubelet's reason and never run."""

from __future__ import annotations

from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import parse_pod
from pkletd.supervisor.pods import admission
from pkletd.supervisor.pods.events import Reason

from tests.harness.node import Pkletd, api_pod, pod_manifest, wait_for

NODE = admission.Node(
    "node1",
    max_pods=3,
    allocatable={"cpu": 2000, "memory": 2**30, "ephemeral-storage": 2**34},
    labels={"kubernetes.io/hostname": "node1", "kubernetes.io/os": "linux"},
)


def pod(name: str, **spec: Any) -> Any:
    raw = pod_manifest(name)
    raw["metadata"]["uid"] = f"uid-{name}"
    raw["spec"].update(spec)
    return parse_pod(raw)


def with_requests(name: str, cpu: str = "0", memory: str = "0", **spec: Any) -> Any:
    raw = pod_manifest(name)
    raw["metadata"]["uid"] = f"uid-{name}"
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": cpu, "memory": memory}}
    raw["spec"].update(spec)
    return parse_pod(raw)


def test_effective_requests_count_init_containers_and_sidecars() -> None:
    raw = pod_manifest("mix")
    raw["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "500m"}}
    raw["spec"]["initContainers"] = [
        {
            "name": "side",
            "image": "i",
            "restartPolicy": "Always",
            "resources": {"limits": {"cpu": "100m"}},
        },
        {"name": "big", "image": "i", "resources": {"requests": {"cpu": "1500m", "memory": "1Gi"}}},
    ]
    assert admission.requests(parse_pod(raw)) == {
        "cpu": 1600,
        "memory": 2**30,
        "ephemeral-storage": 0,
    }


@pytest.mark.parametrize(
    ("candidate", "others", "reason", "message"),
    [
        (
            with_requests("x", cpu="1500m"),
            [with_requests("y", cpu="1")],
            Reason.OUT_OF_CPU,
            "Node didn't have enough resource: cpu, requested: 1500, used: 1000, capacity: 2000",
        ),
        (
            with_requests("x", memory="2Gi"),
            [],
            Reason.OUT_OF_MEMORY,
            "memory, requested: 2147483648",
        ),
        (
            pod("x"),
            [pod("a"), pod("b"), pod("c")],
            Reason.OUT_OF_PODS,
            "pods, requested: 1, used: 3, capacity: 3",
        ),
        (
            pod("x", nodeSelector={"disk": "ssd"}),
            [],
            Reason.NODE_AFFINITY,
            "didn't match Pod's node affinity/selector",
        ),
        (
            pod("x", nodeName="elsewhere"),
            [],
            Reason.NODE_NAME,
            "didn't match the requested node name",
        ),
        (
            pod("x", os={"name": "windows"}),
            [],
            Reason.POD_OS_NOT_SUPPORTED,
            "OS field doesn't match node OS",
        ),
    ],
)
def test_rejections(candidate: Any, others: list[Any], reason: Reason, message: str) -> None:
    rejection = admission.admit(candidate, others, NODE)
    assert rejection is not None and rejection.reason is reason and message in rejection.message


def test_node_affinity_expressions_and_fields() -> None:
    def term(*expressions: dict[str, Any], fields: tuple[dict[str, Any], ...] = ()) -> Any:
        affinity = {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": list(expressions), "matchFields": list(fields)}
                    ]
                }
            }
        }
        return pod("x", affinity=affinity)

    linux = {"key": "kubernetes.io/os", "operator": "In", "values": ["linux"]}
    missing = {"key": "gpu", "operator": "Exists"}
    by_name = {"key": "metadata.name", "operator": "In", "values": ["node1"]}
    assert admission.admit(term(linux), [], NODE) is None
    assert admission.admit(term(linux, fields=(by_name,)), [], NODE) is None
    assert admission.admit(term(missing), [], NODE) is not None


def test_host_port_clash() -> None:
    def ported(name: str, ip: str = "") -> Any:
        raw = pod_manifest(name)
        raw["metadata"]["uid"] = f"uid-{name}"
        raw["spec"]["containers"][0]["ports"] = [
            {"containerPort": 80, "hostPort": 8080, **({"hostIP": ip} if ip else {})}
        ]
        return parse_pod(raw)

    clash = admission.admit(ported("b"), [ported("a")], NODE)
    assert clash is not None and clash.reason is Reason.NODE_PORTS
    assert admission.admit(ported("b", "127.0.0.2"), [ported("a", "127.0.0.1")], NODE) is None


def test_a_refusal_comes_after_every_other_check() -> None:
    admitter = admission.Admitter(NODE)
    shutdown = admission.Rejection(Reason.NODE_SHUTDOWN, "the node is shutting down")
    admitter.refusal = shutdown
    assert admitter.admit(pod("a"), []) is shutdown
    greedy = with_requests("b", cpu="3")
    rejection = admitter.admit(greedy, [])
    assert rejection is not None and rejection.reason is Reason.OUT_OF_CPU
    admitter.refusal = None
    assert admitter.admit(pod("a"), []) is None


@pytest.mark.slow
def test_rejected_pod_is_failed_and_never_runs(pkletd: Pkletd) -> None:
    huge = pod_manifest("huge")
    huge["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "100000"}}
    pkletd.put("huge", huge)
    pkletd.put("fine", pod_manifest("fine"))
    pkletd.start()
    pkletd.wait_running("fine")
    rejected = wait_for(
        "huge rejected",
        lambda: (p := api_pod(pkletd, "huge")) and p["status"]["phase"] == "Failed" and p,
    )
    assert rejected["status"]["reason"] == "OutOfcpu"
    assert rejected["status"]["message"].startswith(
        "Pod was rejected: Node didn't have enough resource: cpu, requested: 100000000"
    )
    assert pkletd.pod("huge")["containers"][0]["container_id"] == ""
    reasons = [e["reason"] for e in pkletd.events()]
    assert "OutOfcpu" in reasons
