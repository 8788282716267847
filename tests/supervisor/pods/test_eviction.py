"""Choosing the pod to evict as the kubelet does (ranking, critical pods, grace period,
message), admission under pressure, and the sync loop evicting one pod."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.bus.messages import EvictionNeeded, PodStatusUpdated, PodUsage
from pkletd.supervisor.pods import admission, eviction
from pkletd.supervisor.pods.events import Reason

from tests.supervisor.pods.test_syncloop_unit import loop_with_running_pod
from tests.supervisor.pods.unit_helpers import UID

MI = 2**20


def pod(
    name: str,
    memory: str | None = None,
    priority: int | None = None,
    source: str = "api",
    **spec: Any,
) -> Pod:
    container: dict[str, Any] = {"name": "c", "image": "busybox"}
    if memory is not None:
        container["resources"] = {"requests": {"memory": memory}}
    raw: dict[str, Any] = {
        "metadata": {"name": name, "namespace": "default", "uid": name},
        "spec": {"containers": [container], **spec},
    }
    if source != "api":
        raw["metadata"]["annotations"] = {"kubernetes.io/config.source": source}
    if priority is not None:
        raw["spec"]["priority"] = priority
    return parse_pod(raw)


def needed(resource: str = "memory", hard: bool = True, **usage: int) -> EvictionNeeded:
    pods = [PodUsage(uid=uid, usage=used, containers={"c": used}) for uid, used in usage.items()]
    signal = {"memory": "memory.available", "pids": "pid.available"}.get(
        resource, "nodefs.available"
    )
    return EvictionNeeded(signal, resource, hard, "1Gi", "512Mi", pods)


def ranked(pods: list[Pod], wanted: EvictionNeeded) -> list[str]:
    return [p.name for p in eviction.rank(pods, wanted, admission.requests)]


def test_memory_ranking_usage_above_request_then_priority_then_usage() -> None:
    pods = [
        pod("within", memory="1Gi"),  # uses less than it asked for
        pod("over-small", memory="100Mi"),
        pod("over-big", memory="100Mi"),
        pod("over-important", memory="100Mi", priority=1000),
        pod("unmeasured", memory="1Gi"),
    ]
    wanted = needed(
        within=500 * MI,
        **{"over-small": 150 * MI, "over-big": 400 * MI, "over-important": 900 * MI},
    )
    assert ranked(pods, wanted) == [
        "unmeasured",  # no stats: first, as the kubelet's
        "over-big",
        "over-small",
        "over-important",
        "within",
    ]


def test_disk_ranking_uses_the_ephemeral_storage_request() -> None:
    big = pod("big")
    asked = pod("asked")
    asked.raw["spec"]["containers"][0]["resources"] = {"requests": {"ephemeral-storage": "1Gi"}}
    wanted = needed("ephemeral-storage", big=600 * MI, asked=800 * MI)
    assert ranked([asked, big], wanted) == ["big", "asked"]


def test_pid_ranking_is_priority_then_processes() -> None:
    pods = [pod("few"), pod("many"), pod("low", priority=-10)]
    wanted = needed("pids", few=3, many=30, low=1)
    assert ranked(pods, wanted) == ["low", "many", "few"]


def test_critical_pods_are_never_chosen() -> None:
    static = pod("static", source="file")
    system = pod("system", priorityClassName="system-cluster-critical")
    plain = pod("plain", memory="1Gi")
    wanted = needed(static=900 * MI, system=900 * MI, plain=10 * MI)
    chosen = eviction.choose([static, system, plain], wanted, admission.requests, 0)
    assert chosen is not None and chosen.pod.name == "plain"
    assert eviction.choose([static, system], wanted, admission.requests, 0) is None


def test_grace_period_hard_soft_and_floor() -> None:
    slow = pod("slow", terminationGracePeriodSeconds=60)
    assert eviction.grace(slow, hard=True, max_pod_grace_s=30) == 1
    assert eviction.grace(slow, hard=False, max_pod_grace_s=30) == 30
    assert eviction.grace(pod("quick", terminationGracePeriodSeconds=5), False, 30) == 5
    assert eviction.grace(slow, hard=False, max_pod_grace_s=0) == 1  # never below 1 s


def test_message_is_the_kubelets() -> None:
    hog = pod("hog", memory="100Mi")
    wanted = needed(hog=600 * MI)
    chosen = eviction.choose([hog], wanted, admission.requests, 0)
    assert chosen is not None
    assert chosen.message == (
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
        "Container c was using 600Mi, request is 100Mi, has larger consumption of memory. "
    )
    modest = eviction.choose(
        [pod("modest", memory="1Gi")], needed(modest=MI), admission.requests, 0
    )
    assert modest is not None and modest.message == (
        "The node was low on resource: memory. Threshold quantity: 1Gi, available: 512Mi. "
    )
    best_effort = eviction.choose([pod("be")], needed(be=1000), admission.requests, 0)
    assert best_effort is not None
    # a byte count under 1Ki is printed in decimal SI, as Go's Quantity prints it
    assert "Container c was using 1k, request is 0," in best_effort.message


# --- admission under pressure -------------------------------------------------------------


@pytest.mark.parametrize(
    ("candidate", "conditions", "refused"),
    [
        (pod("be"), (), False),
        (pod("be"), ("MemoryPressure",), True),
        (pod("burstable", memory="64Mi"), ("MemoryPressure",), False),
        (pod("burstable", memory="64Mi"), ("DiskPressure",), True),
        (pod("burstable", memory="64Mi"), ("MemoryPressure", "PIDPressure"), True),
        (pod("static", source="file"), ("MemoryPressure", "DiskPressure"), False),
        (
            pod(
                "tolerant",
                tolerations=[{"key": "node.kubernetes.io/memory-pressure", "operator": "Exists"}],
            ),
            ("MemoryPressure",),
            False,
        ),
        (pod("everything", tolerations=[{"operator": "Exists"}]), ("MemoryPressure",), False),
        (
            pod("other", tolerations=[{"key": "node.kubernetes.io/disk-pressure"}]),
            ("MemoryPressure",),
            True,
        ),
        (
            pod("execute", tolerations=[{"operator": "Exists", "effect": "NoExecute"}]),
            ("MemoryPressure",),
            True,
        ),
    ],
)
def test_admission_under_pressure(
    candidate: Pod, conditions: tuple[str, ...], refused: bool
) -> None:
    rejection = admission.under_pressure(candidate, conditions)
    assert (rejection is not None) is refused
    if rejection is not None:
        assert rejection.reason is Reason.EVICTED
        assert rejection.message == f"The node had condition: [{' '.join(conditions)}]. "


# --- the sync loop evicts one pod ---------------------------------------------------------


def test_the_loop_fails_the_chosen_pod_and_stops_it(tmp_path: Path) -> None:
    loop, workers, _ = loop_with_running_pod(tmp_path)
    published: list[Any] = []
    loop._publish = published.append
    loop.evict(needed(**{UID: 600 * MI}), max_pod_grace_s=0)
    assert workers.updates == [UID]  # a sync stops its containers
    assert loop._pods.kill_grace(UID) == 1
    (update,) = published
    assert isinstance(update, PodStatusUpdated)
    status = update.pod["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "Evicted")
    assert status["message"].startswith("The node was low on resource: memory. ")
    target = [c for c in status["conditions"] if c["type"] == "DisruptionTarget"]
    assert target[0]["reason"] == "TerminationByKubelet"
    (event,) = [e for e in loop._events.recent() if e["reason"] == "Evicted"]
    assert event["type"] == "Warning" and event["message"] == status["message"]
    # nothing more to evict: the only pod is failed
    loop.evict(needed(**{UID: 600 * MI}), max_pod_grace_s=0)
    assert workers.updates == [UID]
