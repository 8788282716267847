"""Resources: parsing and validation, the kubelet's cpu arithmetic, containers' CRI
resources and pods' cgroup values (ResourceConfigForPod)."""

from __future__ import annotations

from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.ipc.runtime import cri
from pkletd.supervisor.pods.cgroups import resources
from pkletd.supervisor.pods.cgroups.resources import CgroupValues
from pkletd.supervisor.pods.setup import runtimespec

from tests.supervisor.pods.unit_helpers import resource_pod

MI = 2**20
GI = 2**30


pod = resource_pod


def res(requests: dict[str, Any] | None = None, limits: dict[str, Any] | None = None) -> Any:
    return {"requests": requests or {}, "limits": limits or {}}


# --- parsing ----------------------------------------------------------------------------


def test_a_limit_alone_is_the_request() -> None:
    c = pod(res(limits={"cpu": "500m", "memory": "64Mi"}, requests={"memory": "32Mi"})).containers[
        0
    ]
    assert c.resources.request("cpu") == Fraction(1, 2)
    assert c.resources.request("memory") == 32 * MI
    assert c.resources.limit("memory") == 64 * MI
    assert pod(None).containers[0].resources.requests == ()


@pytest.mark.parametrize(
    ("resources_", "message"),
    [
        (
            {"limits": {"cpu": "lots"}},
            "spec.containers[0].resources.limits[cpu]: invalid value 'lots': quantities must match",
        ),
        (
            {"requests": {"memory": "-1Mi"}},
            "spec.containers[0].resources.requests[memory]: invalid value '-1Mi': must be greater "
            "than or equal to 0",
        ),
        (
            {"requests": {"cpu": "2"}, "limits": {"cpu": "1"}},
            "spec.containers[0].resources.requests: invalid value '2': must be less than or equal "
            "to cpu limit of 1",
        ),
        (
            {"requests": {"cpu": "1500m"}, "limits": {"cpu": 1}},
            "spec.containers[0].resources.requests: invalid value '1500m': must be less than or "
            "equal to cpu limit of 1",
        ),
        (
            {"limits": {"gpus": "1"}},
            "spec.containers[0].resources.limits[gpus]: invalid value 'gpus': must be a standard "
            "resource for containers",
        ),
        (
            {"requests": {"example.com/dongle": "1"}},
            "spec.containers[0].resources.limits: required value: Limit must be set for non "
            "overcommitable resources",
        ),
        (
            {"requests": {"example.com/dongle": "1"}, "limits": {"example.com/dongle": "2"}},
            "spec.containers[0].resources.requests: invalid value '1': must be equal to "
            "example.com/dongle limit of 2",
        ),
        (
            {"limits": {"example.com/dongle": "500m"}},
            "spec.containers[0].resources.limits[example.com/dongle]: invalid value '500m': must "
            "be an integer",
        ),
        (
            {"limits": {"hugepages-2Mi": "4Mi"}},
            "spec.containers[0].resources: forbidden: HugePages require cpu or memory",
        ),
        ({"limits": []}, "spec.containers[0].resources.limits: must be a mapping, got list"),
    ],
)
def test_invalid_resources_name_the_field(resources_: Any, message: str) -> None:
    raw = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
    raw["spec"]["containers"][0]["resources"] = resources_
    with pytest.raises(InvalidPod) as failure:
        parse_pod(raw)
    assert str(failure.value).startswith(message)


def test_init_container_resources_are_checked_too() -> None:
    raw = {
        "metadata": {"name": "p"},
        "spec": {
            "containers": [{"name": "c", "image": "i"}],
            "initContainers": [{"name": "i", "image": "i", "resources": {"limits": {"cpu": "x"}}}],
        },
    }
    with pytest.raises(InvalidPod, match=r"^spec\.initContainers\[0\]\.resources\.limits\[cpu\]"):
        parse_pod(raw)


# --- the kubelet's arithmetic -------------------------------------------------------------


@pytest.mark.parametrize(
    ("milli", "shares"),
    [(0, 2), (1, 2), (2, 2), (3, 3), (10, 10), (100, 102), (250, 256), (500, 512), (1000, 1024),
     (1500, 1536), (4000, 4096), (256000, 262144), (300000, 262144)],
)  # fmt: skip
def test_milli_cpu_to_shares(milli: int, shares: int) -> None:
    assert resources.milli_cpu_to_shares(milli) == shares


@pytest.mark.parametrize(
    ("milli", "quota"),
    [(0, 0), (1, 1000), (5, 1000), (9, 1000), (10, 1000), (11, 1100), (200, 20000),
     (250, 25000), (500, 50000), (1000, 100000), (1500, 150000), (4000, 400000)],
)  # fmt: skip
def test_milli_cpu_to_quota(milli: int, quota: int) -> None:
    assert resources.milli_cpu_to_quota(milli) == quota


@pytest.mark.parametrize(
    ("shares", "weight"), [(2, 1), (3, 1), (29, 2), (256, 10), (1024, 39), (262144, 10000)]
)
def test_shares_to_weight(shares: int, weight: int) -> None:
    assert resources.shares_to_weight(shares) == weight


# --- containers: CRI LinuxContainerResources ------------------------------------------------


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        (None, cri.ContainerResources(2, 0, 100000, 0, 1000)),
        (res({"cpu": "250m"}), cri.ContainerResources(256, 0, 100000, 0, 999)),
        (res(limits={"cpu": "500m"}), cri.ContainerResources(512, 50000, 100000, 0, 999)),
        (res({"cpu": "100m"}, {"cpu": "2"}), cri.ContainerResources(102, 200000, 100000, 0, 999)),
        (res({"cpu": "0"}, {"cpu": "1"}), cri.ContainerResources(2, 100000, 100000, 0, 999)),
        (res({"memory": "1Gi"}), cri.ContainerResources(2, 0, 100000, 0, 750)),
        (
            res(limits={"cpu": "1", "memory": "64Mi"}),
            cri.ContainerResources(1024, 100000, 100000, 64 * MI, -997),
        ),
        (
            res({"cpu": "1", "memory": "64Mi"}, {"cpu": "1", "memory": "128Mi"}),
            cri.ContainerResources(1024, 100000, 100000, 128 * MI, 985),
        ),
        (res(limits={"memory": "1.5"}), cri.ContainerResources(2, 0, 100000, 2, 1000 - 1)),
    ],
)
def test_container_resources(spec: Any, expected: cri.ContainerResources) -> None:
    p = pod(spec)
    got = resources.container_resources(p, p.containers[0], memory_capacity=4 * GI, cgroup_v2=False)
    assert got == expected


def test_cgroup_v2_kills_the_whole_container_on_oom() -> None:
    p = pod(None)
    got = resources.container_resources(p, p.containers[0], memory_capacity=GI, cgroup_v2=True)
    assert got.unified == (("memory.oom.group", "1"),)


def test_the_cri_gets_the_resources_and_the_cgroup_parent() -> None:
    p = pod(res({"cpu": "250m", "memory": "32Mi"}, {"cpu": "500m", "memory": "64Mi"}), uid="abc")
    spec = runtimespec.container_spec(p, p.containers[0], 0)
    assert spec.resources is not None
    linux = cri._container_config(spec).linux.resources
    assert (linux.cpu_shares, linux.cpu_quota, linux.cpu_period) == (256, 50000, 100000)
    assert linux.memory_limit_in_bytes == 64 * MI
    assert 3 <= linux.oom_score_adj <= 999
    assert not linux.hugepage_limits
    sandbox = cri._sandbox_config(runtimespec.sandbox_spec(p, 0, Path("/var/log/pods")))
    assert sandbox.linux.cgroup_parent == "/kubepods/burstable/podabc"


# --- pods: ResourceConfigForPod ---------------------------------------------------------------


def test_guaranteed_pod_values() -> None:
    each = res(limits={"cpu": "500m", "memory": "64Mi"})
    assert resources.pod_cgroup_values(pod(each, each)) == CgroupValues(
        cpu_shares=1024, cpu_quota=100000, cpu_period=100000, memory=128 * MI
    )


def test_burstable_pod_gets_limits_only_where_every_container_has_one() -> None:
    limited = res({"cpu": "250m", "memory": "32Mi"}, {"cpu": "500m", "memory": "64Mi"})
    cpu_only = res({"cpu": "100m"}, {"cpu": "100m"})
    assert resources.pod_cgroup_values(pod(limited, res({"cpu": "100m"}))) == CgroupValues(
        cpu_shares=358  # (250 + 100) * 1024 / 1000
    )
    assert resources.pod_cgroup_values(pod(limited, cpu_only)) == CgroupValues(
        cpu_shares=358, cpu_quota=60000, cpu_period=100000
    )
    assert resources.pod_cgroup_values(pod(limited, limited)) == CgroupValues(
        cpu_shares=512, cpu_quota=100000, cpu_period=100000, memory=128 * MI
    )


def test_init_containers_set_the_floor() -> None:
    app = res({"cpu": "100m", "memory": "16Mi"}, {"cpu": "1", "memory": "512Mi"})
    big_init = res({"cpu": "2", "memory": "1Gi"}, {"cpu": "2", "memory": "1Gi"})
    values = resources.pod_cgroup_values(pod(app, init=(big_init,)))
    assert values == CgroupValues(
        cpu_shares=2048, cpu_quota=200000, cpu_period=100000, memory=GI
    )  # the init container's requests and limits are larger than the app's
    assert resources.pod_cgroup_values(pod(app, init=(None,))) == CgroupValues(cpu_shares=102)


def test_sidecars_add_up_and_cover_later_init_containers() -> None:
    app = res({"cpu": "100m"}, {"cpu": "1", "memory": "64Mi"})
    sidecar = (res({"cpu": "200m"}, {"cpu": "500m", "memory": "32Mi"}), "Always")
    values = resources.pod_cgroup_values(pod(app, init=(sidecar, None)))
    # The bare init container runs beside the sidecar, whose limits it is seen with.
    assert values == CgroupValues(
        cpu_shares=307, cpu_quota=150000, cpu_period=100000, memory=96 * MI
    )
    assert resources.pod_requests(pod(app, init=(sidecar, None)))["cpu"] == Fraction(3, 10)


def test_best_effort_pod_values_and_the_pids_limit() -> None:
    assert resources.pod_cgroup_values(pod(None)) == CgroupValues(cpu_shares=2)
    assert resources.pod_cgroup_values(pod(None), pids_limit=100) == CgroupValues(2, pids=100)
    assert resources.pod_cgroup_values(pod(None), pids_limit=-1).pids is None
