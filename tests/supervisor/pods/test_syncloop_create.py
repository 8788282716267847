"""A pod's first sync is counted as ``create`` in kubelet_pod_worker_duration_seconds even
when a later sync replaces its queued work before a pod worker runs it (the kubelet's pod
workers keep SyncPodCreate). Found under load: the Prometheus scrape test waited in vain
for ``operation_type="create"``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pkletd.ipc.bus.messages import PodsListed
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.podmetrics import PodMetrics
from pkletd.supervisor.pods.proberesults import ProbeResults

from tests.supervisor.pods.unit_helpers import pod_dict, sync_loop


class QueueingWorkers:
    """Stands in for PodWorkers: keeps the last work queued per pod, runs it on demand."""

    def __init__(self) -> None:
        self.waiting: dict[str, Callable[[], Any]] = {}

    def update(self, uid: str, work: Callable[[], Any], urgent: bool = False) -> None:
        self.waiting[uid] = work

    def busy(self, uid: str) -> bool:
        return uid in self.waiting

    def run_all(self) -> None:
        for work in self.waiting.values():
            work()
        self.waiting.clear()


def operations(metrics: PodMetrics) -> dict[str, int]:
    family = metrics.sync_duration.family()
    return {s["labels"][0]: s["buckets"][-1] for s in family["series"]}


def test_a_first_sync_replaced_before_it_ran_is_still_a_create(tmp_path: Path) -> None:
    workers, metrics, fake = QueueingWorkers(), PodMetrics(), FakeRuntime()
    pods = Pods("10.0.0.1", ["file"], ProbeResults())
    loop = sync_loop(tmp_path, pods, workers, runtime=fake, metrics=metrics)
    loop.on_pods_listed(PodsListed("file", [pod_dict("app")]))  # its first sync, queued
    changed = pod_dict("app")
    changed["metadata"]["labels"] = {"tier": "web"}
    loop.on_pods_listed(PodsListed("file", [changed]))  # replaces it before it ran
    workers.run_all()
    assert operations(metrics) == {"create": 1}
    loop.on_pods_listed(PodsListed("file", [pod_dict("app")]))
    workers.run_all()
    assert operations(metrics) == {"create": 1, "update": 1}
