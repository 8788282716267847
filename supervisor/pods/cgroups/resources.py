"""CPU and memory arithmetic of the kubelet: containers' CRI resources and pods' cgroup values.

- ``milli_cpu_to_shares`` / ``milli_cpu_to_quota`` / ``shares_to_weight``: the
  kubelet's ``MilliCPUToShares`` (0 is 2, at least 2, at most 262144),
  ``MilliCPUToQuota`` (period 100000 us, at least 1000 us, 0 for no limit) and the
  cgroup v2 ``cpu.weight`` of a share count (``1 + (shares - 2) * 9999 / 262142``).
- ``container_resources``: ``generateLinuxContainerResources`` for the CRI:
  cpu shares from the request (from the limit when only a limit is set), quota
  from the limit with the period always set (``cpuCFSQuota`` is on), the memory
  limit, the OOM score adjustment (``qos.oom_score_adj`` against the machine's
  memory) and, on cgroup v2, ``memory.oom.group`` (``singleProcessOOMKill`` is off
  there by default). No hugepage limits.
- ``pod_requests`` / ``pod_limits``: the API's ``PodRequests`` / ``PodLimits``: the
  regular containers plus the sidecars, or any one init container with the
  sidecars started before it, whichever is larger; plus the pod's ``overhead`` (its
  RuntimeClass's), in the requests, and in the limits of the resources that have one.
- ``sandbox_resources`` / ``overhead_resources``: the CRI sandbox config's ``resources``
  (the pod's totals without its overhead) and ``overhead`` (requests = limits), as the
  kubelet's ``applySandboxResources`` computes them.
- ``pod_cgroup_values``: ``ResourceConfigForPod``: cpu shares from the summed
  requests; for Guaranteed also the quota and the memory limit; for Burstable the
  quota only if every container has a cpu limit and the memory limit only if every
  one has a memory limit; for BestEffort 2 shares and nothing else. Plus
  ``podPidsLimit`` when positive.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.apimodel.resourcespec import Amounts
from pkletd.ipc.runtime.cri import ContainerResources
from pkletd.supervisor.pods import nodeinfo
from pkletd.supervisor.pods.cgroups import qos

MIN_SHARES = 2
MAX_SHARES = 262144
SHARES_PER_CPU = 1024
QUOTA_PERIOD = 100000  # us
MIN_QUOTA_PERIOD = 1000  # us
MAX_WEIGHT = 10000
OOM_GROUP = "memory.oom.group"


def milli_cpu_to_shares(milli_cpu: int) -> int:
    if milli_cpu == 0:
        return MIN_SHARES
    shares = (milli_cpu * SHARES_PER_CPU) // 1000
    return min(max(shares, MIN_SHARES), MAX_SHARES)


def milli_cpu_to_quota(milli_cpu: int, period: int = QUOTA_PERIOD) -> int:
    if milli_cpu == 0:
        return 0
    return max((milli_cpu * period) // 1000, MIN_QUOTA_PERIOD)


def shares_to_weight(shares: int) -> int:
    """The kubelet's ``CPUSharesToCPUWeight`` (cgroup v1 shares to v2 weight)."""
    shares = min(max(shares, MIN_SHARES), MAX_SHARES)
    return 1 + ((shares - 2) * 9999) // 262142


@functools.cache
def machine_memory() -> int:
    """The machine's memory in bytes (``MemTotal``), as cAdvisor reports MemoryCapacity."""
    return quantity.ceil_int(nodeinfo.memory_capacity())


@functools.cache
def host_cgroup_v2() -> bool:
    return Path("/sys/fs/cgroup/cgroup.controllers").exists()


def container_resources(
    pod: Pod,
    container: Container,
    memory_capacity: int | None = None,
    cgroup_v2: bool | None = None,
) -> ContainerResources:
    """The container's CRI resources; the host's memory and cgroup version unless given."""
    capacity = machine_memory() if memory_capacity is None else memory_capacity
    v2 = host_cgroup_v2() if cgroup_v2 is None else cgroup_v2
    cpu_request = container.resources.request("cpu")
    cpu_limit = container.resources.limit("cpu") or Fraction(0)
    memory_limit = container.resources.limit("memory") or Fraction(0)
    shares_from = cpu_request if cpu_request is not None else cpu_limit
    return ContainerResources(
        cpu_shares=milli_cpu_to_shares(quantity.milli(shares_from)),
        cpu_quota=milli_cpu_to_quota(quantity.milli(cpu_limit)),
        cpu_period=QUOTA_PERIOD,
        memory_limit_in_bytes=quantity.ceil_int(memory_limit),
        oom_score_adj=qos.oom_score_adj(pod, container, capacity),
        unified=((OOM_GROUP, "1"),) if v2 else (),
    )


# --- pod totals ---------------------------------------------------------------------


def _add(into: dict[str, Fraction], amounts: dict[str, Fraction]) -> None:
    for name, amount in amounts.items():
        into[name] = into.get(name, Fraction(0)) + amount


def _aggregate(
    pod: Pod,
    pick: Callable[[Container], Amounts],
    each: Callable[[dict[str, Fraction]], None] = lambda _: None,
) -> dict[str, Fraction]:
    """``AggregateContainerRequests``/``Limits``; ``each`` sees every container's
    effective amounts (``ContainerFn``): a sidecar's with the sidecars before it, an
    init container's with the sidecars started before it."""
    total: dict[str, Fraction] = {}
    for container in pod.containers:
        own = dict(pick(container))
        each(own)
        _add(total, own)
    sidecars: dict[str, Fraction] = {}
    init_peak: dict[str, Fraction] = {}
    for container in pod.init_containers:
        own = dict(pick(container))
        if container.sidecar:
            _add(total, own)
            _add(sidecars, own)
            effective = dict(sidecars)
        else:
            effective = dict(own)
            _add(effective, sidecars)
        each(effective)
        for name, amount in effective.items():
            init_peak[name] = max(init_peak.get(name, Fraction(0)), amount)
    for name, amount in init_peak.items():
        total[name] = max(total.get(name, Fraction(0)), amount)
    return total


def pod_requests(pod: Pod, overhead: bool = True) -> dict[str, Fraction]:
    total = _aggregate(pod, lambda c: c.resources.requests)
    if overhead:
        _add(total, dict(pod.overhead))
    return total


def pod_limits(pod: Pod, overhead: bool = True) -> dict[str, Fraction]:
    return _with_overhead(pod, _aggregate(pod, lambda c: c.resources.limits), overhead)


def _with_overhead(pod: Pod, limits: dict[str, Fraction], overhead: bool) -> dict[str, Fraction]:
    """The overhead added to the limits the containers set (none is no limit)."""
    if overhead:
        for name, amount in pod.overhead:
            if name in limits:
                limits[name] += amount
    return limits


def sandbox_resources(pod: Pod, cgroup_v2: bool | None = None) -> ContainerResources:
    """``calculateSandboxResources``: the pod's requests and limits without its overhead."""
    requests, limits = pod_requests(pod, overhead=False), pod_limits(pod, overhead=False)
    zero = Fraction(0)
    return _linux_resources(
        requests.get("cpu"), limits.get("cpu", zero), limits.get("memory", zero), cgroup_v2
    )


def overhead_resources(pod: Pod, cgroup_v2: bool | None = None) -> ContainerResources | None:
    """``convertOverheadToLinuxResources``: the overhead as requests = limits (None: none)."""
    if not pod.overhead:
        return None
    amounts = dict(pod.overhead)
    cpu, memory = amounts.get("cpu", Fraction(0)), amounts.get("memory", Fraction(0))
    return _linux_resources(cpu, cpu, memory, cgroup_v2)


def _linux_resources(
    cpu_request: Fraction | None, cpu_limit: Fraction, memory_limit: Fraction, v2: bool | None
) -> ContainerResources:
    """``calculateLinuxResources``: shares from the request (the limit when only it is
    set), the quota from the limit, the memory limit; ``memory.oom.group`` on cgroup v2."""
    shares_from = cpu_request if cpu_request is not None else cpu_limit
    unified = host_cgroup_v2() if v2 is None else v2
    return ContainerResources(
        cpu_shares=milli_cpu_to_shares(quantity.milli(shares_from)),
        cpu_quota=milli_cpu_to_quota(quantity.milli(cpu_limit)),
        cpu_period=QUOTA_PERIOD,
        memory_limit_in_bytes=quantity.ceil_int(memory_limit),
        unified=((OOM_GROUP, "1"),) if unified else (),
    )


@dataclass(frozen=True, slots=True)
class CgroupValues:
    """The kubelet's ``ResourceConfig``: what a cgroup is given; None leaves it alone."""

    cpu_shares: int | None = None
    cpu_quota: int | None = None  # us per period; -1: no limit
    cpu_period: int | None = None  # us
    memory: int | None = None  # bytes
    pids: int | None = None


def pod_cgroup_values(pod: Pod, pids_limit: int = -1) -> CgroupValues:
    declared = {"cpu": True, "memory": True}

    def note(amounts: dict[str, Fraction]) -> None:
        for name in declared:
            if not amounts.get(name):
                declared[name] = False

    limits = _with_overhead(pod, _aggregate(pod, lambda c: c.resources.limits, note), True)
    requests = pod_requests(pod)
    shares = milli_cpu_to_shares(quantity.milli(requests.get("cpu", Fraction(0))))
    quota = milli_cpu_to_quota(quantity.milli(limits.get("cpu", Fraction(0))))
    memory = quantity.ceil_int(limits.get("memory", Fraction(0)))
    pids = pids_limit if pids_limit > 0 else None
    klass = qos.pod_qos(pod)
    if klass == qos.GUARANTEED:
        return CgroupValues(shares, quota, QUOTA_PERIOD, memory, pids)
    if klass == qos.BURSTABLE:
        return CgroupValues(
            shares,
            quota if declared["cpu"] else None,
            QUOTA_PERIOD if declared["cpu"] else None,
            memory if declared["memory"] else None,
            pids,
        )
    return CgroupValues(cpu_shares=MIN_SHARES, pids=pids)
