"""The parent's copy of every probe's last result: the truth for ready and started.

The prober reports each run (``ProbeResult``); the parent keeps the last one per
(pod, container, probe type), acts on a change of ``result``, and hands the table
back to a restarted prober in its snapshot. A result counts only for the
container instance it was taken on: a new container starts from the kubelet's
initial results (not ready until readiness passes; not started until startup
passes; live until liveness fails).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from pkletd.ipc.apimodel.podspec import Container, PodUID
from pkletd.ipc.apimodel.probespec import ProbeType
from pkletd.ipc.bus.messages import ProbeResult, ProbeVerdict
from pkletd.ipc.runtime.cri import ContainerID

Key = tuple[PodUID, str, ProbeType]  # pod, container name, probe type


class ProbeResults:
    def __init__(self) -> None:
        self._results: dict[Key, ProbeResult] = {}
        self.metrics: list[dict[str, Any]] = []

    def record(self, result: ProbeResult) -> bool:
        """Keep ``result``; True if it changed the probe's state for its container."""
        key = (result.pod_uid, result.container, result.probe)
        before = self._results.get(key)
        self._results[key] = result
        if before is None or before.container_id != result.container_id:
            return True
        return before.result != result.result

    def _passed(
        self, uid: PodUID, container: Container, container_id: str, kind: ProbeType
    ) -> bool:
        if container.probe(kind) is None:
            return True
        result = self._results.get((uid, container.name, kind))
        return (
            result is not None
            and result.container_id == container_id
            and result.result is ProbeVerdict.SUCCESS
        )

    def started(self, uid: PodUID, container: Container, container_id: str) -> bool:
        return self._passed(uid, container, container_id, ProbeType.STARTUP)

    def ready(self, uid: PodUID, container: Container, container_id: str) -> bool:
        return self.started(uid, container, container_id) and self._passed(
            uid, container, container_id, ProbeType.READINESS
        )

    def passed_startup(self, uid: PodUID) -> frozenset[ContainerID]:
        """Ids of the pod's containers whose startup probe succeeded."""
        return frozenset(
            ContainerID(r.container_id)
            for (u, _, kind), r in self._results.items()
            if u == uid and kind is ProbeType.STARTUP and r.result is ProbeVerdict.SUCCESS
        )

    def of_container(self, uid: PodUID, name: str, container_id: str) -> dict[str, str]:
        """Probe type -> result, for ``pkletd status``."""
        return {
            kind: r.result
            for (u, n, kind), r in sorted(self._results.items())
            if u == uid and n == name and r.container_id == container_id
        }

    def forget(self, uid: PodUID) -> None:
        self._results = {k: v for k, v in self._results.items() if k[0] != uid}

    def snapshot(self) -> list[dict[str, Any]]:
        return [
            {f.name: getattr(r, f.name) for f in dataclasses.fields(r)}
            for r in self._results.values()
        ]
