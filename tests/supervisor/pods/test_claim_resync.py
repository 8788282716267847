"""A pod on a claim waits for every object the claim leads to, and syncs as each arrives:
the claim, then its volume, then the volume's CSIDriver (each read only once the one
before it names it), not at the next volume retry 10 s later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.supervisor.pods import admission
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.podmetrics import PodMetrics
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.syncloop import Parts, SyncLoop
from pkletd.supervisor.pods.types import PodRuntime, SyncResult

from tests.supervisor.pods.test_syncloop_unit import RecordingWorkers
from tests.supervisor.pods.unit_helpers import fake_syncer

DRIVER = "hostpath.csi.example"


def claimed_pod(uid: str, claim: str) -> dict[str, Any]:
    volume = {"name": "data", "persistentVolumeClaim": {"claimName": claim}}
    return {
        "metadata": {"name": uid, "namespace": "shop", "uid": uid},
        "spec": {"containers": [{"name": "c", "image": "busybox:1.36"}], "volumes": [volume]},
    }


def reading(kind: ObjectKind, namespace: str, name: str, spec: dict[str, Any]) -> ObjectFetched:
    return ObjectFetched(kind, namespace, name, body={"metadata": {}, "spec": spec, "status": {}})


def loop_with(pods_raw: list[dict[str, Any]], tmp_path: Path) -> tuple[SyncLoop, RecordingWorkers]:
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    pods.set_source("api", pods_raw)
    for raw in pods_raw:
        uid = PodUID(raw["metadata"]["uid"])
        pods.admit(uid)
        pods.record(SyncResult(uid, PodRuntime(uid)))
    workers = RecordingWorkers()
    fake = FakeRuntime()
    parts = Parts(
        runtime=fake,
        syncer=fake_syncer(fake, tmp_path),
        pod_workers=workers,  # type: ignore[arg-type]
        pods=pods,
        probes=ProbeResults(),
        events=EventRecorder(),
        admitter=admission.Admitter(
            admission.Node("n", 110, {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30})
        ),
        sync_frequency=60.0,
        objects=ApiObjects(node="n"),
        metrics=PodMetrics(),
    )
    return SyncLoop(parts, lambda message: None), workers


def test_the_volume_and_driver_of_a_claim_sync_the_pod_when_they_arrive(tmp_path: Path) -> None:
    sync, workers = loop_with([claimed_pod("db", "data"), claimed_pod("other", "logs")], tmp_path)
    sync.on_object_fetched(
        reading(ObjectKind.PERSISTENT_VOLUME_CLAIM, "shop", "data", {"volumeName": "pv-1"})
    )
    assert workers.updates == ["db"]
    csi = {"driver": DRIVER, "volumeHandle": "vol-1"}
    sync.on_object_fetched(reading(ObjectKind.PERSISTENT_VOLUME, "", "pv-1", {"csi": csi}))
    assert workers.updates == ["db", "db"]
    sync.on_object_fetched(reading(ObjectKind.CSI_DRIVER, "", DRIVER, {"attachRequired": False}))
    assert workers.updates == ["db", "db", "db"]
    sync.on_object_fetched(reading(ObjectKind.PERSISTENT_VOLUME, "", "pv-2", {"csi": csi}))
    assert workers.updates == ["db", "db", "db"]  # no pod's claim leads to pv-2
