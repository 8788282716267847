"""Which pod to evict, with what grace period and message, as the kubelet's eviction
manager chooses (``pkg/kubelet/eviction/helpers.go``, ``eviction_manager.go``), from
what the eviction worker measured (``EvictionNeeded``).

Ranking (``rank``), the first evicted first, by the resource to reclaim:

- memory: pods using more than their memory request, then lower priority, then the
  larger use above the request (``rankMemoryPressure``);
- ephemeral-storage and inodes: the same with the disk use the worker measured and the
  ephemeral-storage request (``rankDiskPressureFunc``);
- pids: lower priority, then more processes (``rankPIDPressure``).

A pod the worker has no figures for goes first. Requests are the pod's effective
requests (``admission.requests``). A critical pod (``qos.critical``: static, mirror,
system priority) is never evicted: the next one in the ranking is (``choose``). A hard
threshold's pod gets 1 s to stop (``immediateEvictionGracePeriodSeconds``), a soft
one's the lower of ``evictionMaxPodGracePeriod`` and its own grace period; never less
than 1 s, as the kubelet's pod workers give. The message is the kubelet's: ``The node
was low on resource: memory. Threshold quantity: 100Mi, available: 90Mi. Container
hog was using 600Mi, request is 0, has larger consumption of memory. ``.

Pods over their local storage limits (``EvictionNeeded.limits``, ``over_limits``) are
each evicted, with a 1 s grace period and the message the worker wrote, unless critical;
unlike a threshold's, such an eviction is no disruption (no ``DisruptionTarget``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.podspec import DEFAULT_GRACE_S, Pod, PodUID
from pkletd.ipc.bus.messages import EvictionNeeded, LimitExceeded, PodUsage
from pkletd.supervisor.pods.cgroups import qos

IMMEDIATE_GRACE_S = 1  # the kubelet's immediateEvictionGracePeriodSeconds
MINIMUM_GRACE_S = 1  # its pod workers never give less
DISK = ("ephemeral-storage", "inodes")

RequestsOf = Callable[[Pod], Mapping[str, int]]


@dataclass(frozen=True, slots=True)
class Eviction:
    pod: Pod
    grace_s: int
    message: str
    disruption: bool = True  # the kubelet adds DisruptionTarget for a threshold's only


def rank(pods: Iterable[Pod], needed: EvictionNeeded, requests_of: RequestsOf) -> list[Pod]:
    """The pods in the order the kubelet evicts them for ``needed.resource``."""
    usage = {u["uid"]: u for u in needed.pods}
    resource = needed.resource

    def key(pod: Pod) -> tuple[Any, ...]:
        measured = usage.get(pod.uid)
        if resource == "pids":
            return (pod.priority, measured is not None, -measured["usage"] if measured else 0)
        if measured is None:
            return (False, 0, pod.priority, 0)
        requests = requests_of(pod)
        used = measured["usage"]
        exceeds = used > requests.get(resource, 0)
        relative = used - requests.get("ephemeral-storage" if resource in DISK else "memory", 0)
        return (True, not exceeds, pod.priority, -relative)

    return sorted(pods, key=key)


def choose(
    pods: Iterable[Pod], needed: EvictionNeeded, requests_of: RequestsOf, max_pod_grace_s: int
) -> Eviction | None:
    """The first pod of the ranking that may be evicted; None if none may."""
    usage = {u["uid"]: u for u in needed.pods}
    for pod in rank(pods, needed, requests_of):
        if not qos.critical(pod):
            return Eviction(
                pod, grace(pod, needed.hard, max_pod_grace_s), message(pod, needed, usage)
            )
    return None


def over_limits(
    pods: Iterable[Pod], limits: Iterable[LimitExceeded]
) -> tuple[list[Eviction], list[Pod]]:
    """The evictions of the active pods over their local storage limits, and the
    critical ones among them, which are not evicted."""
    active = {pod.uid: pod for pod in pods}
    evictions, critical = [], []
    for exceeded in limits:
        pod = active.get(PodUID(exceeded["uid"]))
        if pod is None:
            continue
        if qos.critical(pod):
            critical.append(pod)
        else:
            evictions.append(Eviction(pod, IMMEDIATE_GRACE_S, exceeded["message"], False))
    return evictions, critical


def grace(pod: Pod, hard: bool, max_pod_grace_s: int) -> int:
    if hard:
        return IMMEDIATE_GRACE_S
    own = pod.raw.get("spec", {}).get("terminationGracePeriodSeconds", DEFAULT_GRACE_S)
    return max(MINIMUM_GRACE_S, min(max_pod_grace_s, int(own)))


def message(pod: Pod, needed: EvictionNeeded, usage: Mapping[str, PodUsage]) -> str:
    """The kubelet's eviction message (``evictionMessage``)."""
    text = f"The node was low on resource: {needed.resource}. "
    if needed.threshold and needed.available:
        text += f"Threshold quantity: {needed.threshold}, available: {needed.available}. "
    measured = usage.get(pod.uid)
    spec = pod.raw.get("spec", {})
    containers = {c.get("name"): c for c in (spec.get("containers") or [])}
    for c in spec.get("initContainers") or []:
        containers.setdefault(c.get("name"), c)
    for name, used in (measured["containers"] if measured else {}).items():
        container = containers.get(name)
        if container is None:
            continue
        request = _request_text(container, needed.resource)
        if used > quantity.parse(request):
            shown = quantity.canonical(used, quantity.Format.BINARY_SI)
            canonical = quantity.canonical(quantity.parse(request), quantity.format_of(request))
            text += (
                f"Container {name} was using {shown}, request is {canonical}, "
                f"has larger consumption of {needed.resource}. "
            )
    return text


def _request_text(container: Mapping[str, Any], resource: str) -> str:
    """The container's request as written (a lone limit is the request), else ``0``."""
    resources = container.get("resources") or {}
    for part in ("requests", "limits"):
        value = (resources.get(part) or {}).get(resource)
        if value is not None:
            return str(value)
    return "0"
