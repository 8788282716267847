"""QoS classes as the API's GetPodQOS computes them, and the kubelet's OOM score policy."""

from __future__ import annotations

from typing import Any

import pytest
from pkletd.supervisor.pods.cgroups import qos

from tests.supervisor.pods.unit_helpers import resource_pod

GI = 2**30
CAPACITY = 4 * GI


def res(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> Any:
    out: dict[str, Any] = {}
    if requests is not None:
        out["requests"] = requests
    if limits is not None:
        out["limits"] = limits
    return out


GUARANTEED = res(limits={"cpu": "1", "memory": "1Gi"})


pod = resource_pod


@pytest.mark.parametrize(
    ("containers", "init", "expected"),
    [
        ((None,), (), "BestEffort"),
        ((None, None), (), "BestEffort"),
        ((res(requests={"cpu": "0", "memory": "0"}),), (), "BestEffort"),  # only > 0 counts
        ((res(limits={"ephemeral-storage": "1Gi"}),), (), "BestEffort"),  # only cpu, memory
        ((res(requests={"cpu": "100m"}),), (), "Burstable"),
        ((res(requests={"memory": "1Mi"}), None), (), "Burstable"),
        ((GUARANTEED, None), (), "Burstable"),
        ((res(limits={"cpu": "1"}),), (), "Burstable"),
        ((res(limits={"memory": "1Gi"}),), (), "Burstable"),
        ((res(requests={"cpu": "1"}, limits={"cpu": "2", "memory": "1Gi"}),), (), "Burstable"),
        (
            (res(requests={"memory": "512Mi"}, limits={"cpu": "1", "memory": "1Gi"}),),
            (),
            "Burstable",
        ),
        ((GUARANTEED,), (), "Guaranteed"),  # a limit alone is the request
        ((GUARANTEED, GUARANTEED), (), "Guaranteed"),
        # compared as quantities, not as strings
        (
            (res({"cpu": "1000m", "memory": "1024Mi"}, {"cpu": "1", "memory": "1Gi"}),),
            (),
            "Guaranteed",
        ),
        (
            (res({"cpu": 1, "memory": "1073741824"}, {"cpu": "1", "memory": "1Gi"}),),
            (),
            "Guaranteed",
        ),
        ((res({"cpu": "0.5"}, {"cpu": "500m", "memory": "1e9"}),), (), "Guaranteed"),
        ((res({"cpu": "999m"}, {"cpu": "1", "memory": "1Gi"}),), (), "Burstable"),
        # hugepages and extended resources do not count
        (
            (res(limits={"cpu": "1", "memory": "1Gi", "hugepages-2Mi": "4Mi", "x.io/gpu": "1"}),),
            (),
            "Guaranteed",
        ),
        # init containers count
        ((GUARANTEED,), (None,), "Burstable"),
        ((GUARANTEED,), (GUARANTEED,), "Guaranteed"),
        ((None,), (res(requests={"cpu": "10m"}),), "Burstable"),
        ((GUARANTEED,), ((GUARANTEED, "Always"),), "Guaranteed"),
        ((GUARANTEED,), ((None, "Always"),), "Burstable"),
    ],
)
def test_pod_qos(containers: tuple[Any, ...], init: tuple[Any, ...], expected: str) -> None:
    assert qos.pod_qos(pod(*containers, init=init)) == expected


def test_summed_requests_must_equal_summed_limits() -> None:
    # Each container limits both; one requests less: the sums differ.
    one = res({"cpu": "500m", "memory": "1Gi"}, {"cpu": "1", "memory": "1Gi"})
    assert qos.pod_qos(pod(GUARANTEED, one)) == "Burstable"


@pytest.mark.parametrize(
    ("memory_request", "expected"),
    [
        (None, 999),  # 1000 is BestEffort's: a Burstable container gets one less
        (CAPACITY // 2, 500),
        (CAPACITY // 10, 901),  # 1000 * request // capacity is 99: integer division
        (CAPACITY // 1000, 999),
        (CAPACITY - 1, 3),  # 1000 - 999: kept above Guaranteed (1000 - 997)
        (CAPACITY, 3),
        (2 * CAPACITY, 3),
    ],
)
def test_burstable_oom_score_adj(memory_request: int | None, expected: int) -> None:
    requests = {"cpu": "100m"} if memory_request is None else {"memory": str(memory_request)}
    p = pod(res(requests=requests))
    assert qos.oom_score_adj(p, p.containers[0], CAPACITY) == expected


def test_oom_score_adj_by_class() -> None:
    guaranteed = pod(GUARANTEED)
    assert qos.oom_score_adj(guaranteed, guaranteed.containers[0], CAPACITY) == -997
    best_effort = pod(None)
    assert qos.oom_score_adj(best_effort, best_effort.containers[0], CAPACITY) == 1000
    critical = pod(None, priorityClassName="system-node-critical")  # a static pod
    assert qos.oom_score_adj(critical, critical.containers[0], CAPACITY) == -997


def test_sidecar_oom_score_adj_is_at_most_the_regular_containers() -> None:
    half = res(requests={"memory": str(CAPACITY // 2)})
    p = pod(half, res(requests={"memory": str(CAPACITY // 4)}), init=((None, "Always"), None))
    sidecar, plain_init = p.init_containers
    assert qos.oom_score_adj(p, sidecar, CAPACITY) == 750  # as the one requesting least
    assert qos.oom_score_adj(p, plain_init, CAPACITY) == 999  # a plain init container: its own
    assert qos.oom_score_adj(p, p.containers[0], CAPACITY) == 500
