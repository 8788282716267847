"""The pods as the http worker holds them (API pod dicts with status), and where their
cgroups are.

A pod's cgroup is ``/kubepods[/burstable|/besteffort]/pod<uid>`` (the parent's
``podcgroups``; its QoS class is looked up on disk, so a pod whose status has no
``qosClass`` yet is still found); a container's is ``<pod cgroup>/<container id>``, as the
runtime puts a container below its sandbox's ``cgroup_parent``. The other directories
below the pod's cgroup are its sandboxes.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pkletd.ipc.nodestats.cgroupstats import CgroupReader

ROOT = "/kubepods"
QOS_PARENTS = (ROOT, f"{ROOT}/burstable", f"{ROOT}/besteffort")

PodDict = Mapping[str, Any]


@dataclass(frozen=True, slots=True)
class ContainerRef:
    name: str
    id: str
    image: str
    started_at: float | None  # seconds since the epoch
    cgroup: str


@dataclass(frozen=True, slots=True)
class PodRef:
    name: str
    namespace: str
    uid: str
    start_time: float | None
    cgroup: str
    containers: tuple[ContainerRef, ...]
    sandboxes: tuple[str, ...]  # cgroups


def parse_time(value: str | None) -> float | None:
    """An API timestamp (RFC 3339) as seconds since the epoch."""
    if not value:
        return None
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def container_id(status: Mapping[str, Any]) -> str:
    """``containerd://<id>`` -> ``<id>``."""
    return str(status.get("containerID", "")).partition("://")[2]


def pod_cgroup(cgroups: CgroupReader, uid: str) -> str | None:
    for parent in QOS_PARENTS:
        name = f"{parent}/pod{uid}"
        if cgroups.exists(name):
            return name
    return None


def _running(pod: PodDict) -> Iterable[Mapping[str, Any]]:
    status = pod.get("status", {})
    for key in ("initContainerStatuses", "containerStatuses"):
        for c in status.get(key) or ():
            if "running" in (c.get("state") or {}) and container_id(c):
                yield c


def resolve(cgroups: CgroupReader, pod: PodDict) -> PodRef | None:
    """The pod with the cgroups of its running containers; None without a pod cgroup."""
    meta = pod["metadata"]
    cgroup = pod_cgroup(cgroups, meta["uid"])
    if cgroup is None:
        return None
    containers = tuple(
        ContainerRef(
            name=c["name"],
            id=container_id(c),
            image=c.get("image", ""),
            started_at=parse_time(c["state"]["running"].get("startedAt")),
            cgroup=f"{cgroup}/{container_id(c)}",
        )
        for c in _running(pod)
        if cgroups.exists(f"{cgroup}/{container_id(c)}")
    )
    ids = {c.id for c in containers} | {container_id(c) for c in _all_statuses(pod)}
    sandboxes = tuple(f"{cgroup}/{d}" for d in cgroups.children(cgroup) if d not in ids)
    return PodRef(
        name=meta["name"],
        namespace=meta.get("namespace", "default"),
        uid=meta["uid"],
        start_time=parse_time(pod.get("status", {}).get("startTime")),
        cgroup=cgroup,
        containers=containers,
        sandboxes=sandboxes,
    )


def _all_statuses(pod: PodDict) -> Iterable[Mapping[str, Any]]:
    status = pod.get("status", {})
    for key in ("initContainerStatuses", "containerStatuses"):
        yield from status.get(key) or ()


def resolve_all(cgroups: CgroupReader, pods: Iterable[PodDict]) -> list[PodRef]:
    found = (resolve(cgroups, p) for p in pods)
    return sorted((p for p in found if p is not None), key=lambda p: (p.namespace, p.name, p.uid))
