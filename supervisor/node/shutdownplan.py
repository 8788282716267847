"""Which pods a node shutdown stops, in what order and with what grace: the kubelet's
shutdown groups, as pure functions.

The groups come from ``shutdownGracePeriodByPodPriority``, or, without it, from
``shutdownGracePeriod`` and ``shutdownGracePeriodCriticalPods`` as the kubelet migrates
them: pods of any priority below the system classes' get the total less the critical
part, the rest the critical part. Groups are stopped from the lowest priority up; a pod
belongs to the group of the highest priority at or below its own (a pod below every
group's priority, to the lowest group), and is stopped with the group's period, or its
own ``terminationGracePeriodSeconds`` when that is shorter. No group: the feature is off.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.apimodel.priority import SYSTEM_CRITICAL

REGULAR_PRIORITY = 0  # the API's DefaultPriorityWhenNoDefaultClassExists


@dataclass(frozen=True, slots=True)
class Group:
    """Pods from ``priority`` up to the next group's, stopped within ``grace_s``."""

    priority: int
    grace_s: int


def groups(
    period_s: float, critical_s: float, by_priority: Sequence[tuple[int, int]]
) -> tuple[Group, ...]:
    """The configuration's groups, lowest priority first; empty when the feature is off."""
    found = [Group(priority, seconds) for priority, seconds in by_priority]
    if not found and period_s > 0:
        found = [
            Group(REGULAR_PRIORITY, int(period_s - critical_s)),
            Group(SYSTEM_CRITICAL, int(critical_s)),
        ]
    return tuple(sorted(found, key=lambda g: g.priority))


def requested_s(plan: Sequence[Group]) -> int:
    """How long a shutdown may take in all: what logind's delay must allow."""
    return sum(g.grace_s for g in plan)


def group_of(plan: Sequence[Group], priority: int) -> int:
    """The index of the group a pod of this priority belongs to."""
    below = [i for i, g in enumerate(plan) if g.priority <= priority]
    if not below:
        return 0
    top = plan[below[-1]].priority
    return next(i for i in below if plan[i].priority == top)  # the first of equals


def assign(plan: Sequence[Group], pods: Iterable[Pod]) -> list[list[Pod]]:
    """The pods of each group, in the plan's order."""
    members: list[list[Pod]] = [[] for _ in plan]
    for pod in pods:
        members[group_of(plan, pod.priority)].append(pod)
    return members


def pod_grace(pod: Pod, group: Group) -> int:
    """The group's period, or the pod's own grace period when that is shorter."""
    return min(pod.grace_period_s, group.grace_s)  # an active pod's is its spec's
