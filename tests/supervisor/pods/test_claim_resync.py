"""A pod on a claim waits for every object the claim leads to, and syncs as each arrives:
the claim, then its volume, then the volume's CSIDriver (each read only once the one
before it names it), not at the next volume retry 10 s later."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.syncloop import SyncLoop

from tests.supervisor.pods.test_objects_resync import synced_loop
from tests.supervisor.pods.unit_helpers import RecordingWorkers

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
    sync, workers, _ = synced_loop(pods_raw, tmp_path, ApiObjects(node="n"))
    return sync, workers


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
