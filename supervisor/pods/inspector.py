"""Reading what the runtime has for a pod (the kubelet's PodStatus), cheaply.

A sync reads its pod's state before it acts and again after each step. Two
things the runtime reports never change, so ``PodInspector`` reads each once: an
exited container's status (exit code, times, reason, and its message with what the
container left at its termination message path, ``terminationlog``), and a ready
sandbox's network (its IP, and whether it shares the node's namespace). A read then
costs the two list calls plus one ContainerStatus per live container.

Each pod is read by one pod worker at a time (the pod workers serialize a
pod's syncs), so the per-pod caches need no lock.
"""

from __future__ import annotations

import dataclasses

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.runtime.cri import (
    ContainerID,
    ContainerInfo,
    ContainerState,
    SandboxInfo,
    SandboxState,
    unless_gone,
)
from pkletd.supervisor.pods.runtime import Runtime
from pkletd.supervisor.pods.setup import terminationlog
from pkletd.supervisor.pods.types import PodRuntime


class PodInspector:
    def __init__(self, runtime: Runtime) -> None:
        self._runtime = runtime
        self._exited: dict[PodUID, dict[ContainerID, ContainerInfo]] = {}  # uid -> id -> status
        self._networks: dict[PodUID, SandboxInfo] = {}  # uid -> its newest ready sandbox's status

    def inspect(self, uid: PodUID) -> PodRuntime:
        listed = self._runtime.list_sandboxes(uid)
        sandboxes = sorted(listed, key=lambda s: s.created_at, reverse=True)
        if sandboxes and sandboxes[0].state is SandboxState.READY:
            sandboxes[0] = self._ready_sandbox(uid, sandboxes[0])
        containers = self._containers(uid)
        containers.sort(key=lambda c: (c.attempt, c.created_at), reverse=True)
        return PodRuntime(uid, tuple(sandboxes), tuple(containers))

    def forget(self, uid: PodUID) -> None:
        self._exited.pop(uid, None)
        self._networks.pop(uid, None)

    def _ready_sandbox(self, uid: PodUID, listed: SandboxInfo) -> SandboxInfo:
        known = self._networks.get(uid)
        if known is None or known.id != listed.id:
            known = self._networks[uid] = self._runtime.sandbox_status(listed.id)
        return dataclasses.replace(listed, ip=known.ip, host_network=known.host_network)

    def _containers(self, uid: PodUID) -> list[ContainerInfo]:
        known = self._exited.get(uid, {})
        exited: dict[ContainerID, ContainerInfo] = {}
        containers = []
        for listed in self._runtime.list_containers(uid):
            status = known.get(listed.id) or self._status(listed)
            if status is None:
                continue  # removed between the list and the status call
            if status.state is ContainerState.EXITED:
                exited[status.id] = status
            containers.append(status)
        self._exited[uid] = exited  # only what is still listed: removed ones drop out
        return containers

    def _status(self, listed: ContainerInfo) -> ContainerInfo | None:
        status = unless_gone(self._runtime.container_status, listed)
        if status is None or status.state is not ContainerState.EXITED:
            return status
        return dataclasses.replace(status, message=terminationlog.message(status))
