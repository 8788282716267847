"""The sync loop and the pod-objects worker's readings: a changed ConfigMap, Secret, token
or Service list syncs exactly the pods that need it; an unchanged reading syncs none;
housekeeping forgets what no pod references."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.apimodel.references import ObjectKey
from pkletd.ipc.bus.messages import ServicesListed
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.objects import ApiObjects, ObjectUnavailable
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.syncloop import SyncLoop
from pkletd.supervisor.pods.types import PodRuntime, SyncResult, Waiting, WaitingReason

from tests.supervisor.pods.setup.object_helpers import CM, config_map, port, secret, service, token
from tests.supervisor.pods.unit_helpers import RecordingWorkers, sync_loop

CONTAINER = {"name": "c", "image": "busybox:1.36"}


def api_pod(uid: str, namespace: str = "shop", **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": uid, "namespace": namespace, "uid": uid},
        "spec": {"containers": [dict(CONTAINER)], **spec},
    }


PODS = [
    api_pod("with-volume", volumes=[{"name": "cfg", "configMap": {"name": "settings"}}]),
    api_pod(
        "with-env",
        containers=[{**CONTAINER, "envFrom": [{"secretRef": {"name": "creds"}}]}],
    ),
    api_pod(
        "with-token",
        volumes=[
            {"name": "t", "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]}}
        ],
    ),
    api_pod("plain"),
    api_pod("elsewhere", namespace="other"),
]


def synced_loop(
    pods_raw: list[dict[str, Any]], tmp_path: Path, objects: ApiObjects
) -> tuple[SyncLoop, RecordingWorkers, Pods]:
    """A sync loop whose API pods were each synced once (nothing waits), with pod workers
    that only record which pods got work."""
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    pods.set_source("api", pods_raw)
    for raw in pods_raw:
        uid = PodUID(raw["metadata"]["uid"])
        pods.admit(uid)
        pods.record(SyncResult(uid, PodRuntime(uid)))  # synced once: nothing waits
    workers = RecordingWorkers()
    return sync_loop(tmp_path, pods, workers, objects=objects), workers, pods


@pytest.fixture
def loop(tmp_path: Path) -> tuple[SyncLoop, RecordingWorkers, ApiObjects, Pods]:
    objects = ApiObjects()
    sync, workers, pods = synced_loop(PODS, tmp_path, objects)
    return sync, workers, objects, pods


def test_a_changed_object_syncs_the_pods_that_reference_it(loop: Any) -> None:
    sync, workers, objects, _ = loop
    sync.on_object_fetched(config_map("settings", {"a": "1"}))
    assert workers.updates == ["with-volume"]
    assert objects.get(ObjectKey(CM, "shop", "settings")).strings == {"a": "1"}

    sync.on_object_fetched(config_map("settings", {"a": "1"}))  # the same reading again
    assert workers.updates == ["with-volume"]
    sync.on_object_fetched(config_map("settings", {"a": "2"}))
    sync.on_object_fetched(secret("creds", {"pw": b"x"}))
    assert workers.updates == ["with-volume", "with-volume", "with-env"]
    sync.on_object_fetched(config_map("unreferenced", {"a": "1"}))
    assert workers.updates[-1] == "with-env"


def test_a_refreshed_token_syncs_its_pod(loop: Any) -> None:
    sync, workers, _, _ = loop
    sync.on_token_issued(token("with-token", "jwt-1"))
    sync.on_token_issued(token("with-token", "jwt-1"))
    sync.on_token_issued(token("with-token", "jwt-2"))
    sync.on_token_issued(token("with-token", "jwt-3", audience="vault"))  # not this pod's
    assert workers.updates == ["with-token", "with-token"]


def test_services_sync_the_waiting_pods_of_their_namespace(loop: Any) -> None:
    sync, workers, _, pods = loop
    waiting = {"c": Waiting(WaitingReason.CREATE_CONTAINER_CONFIG_ERROR, "services ...")}
    for uid in ("plain", "elsewhere"):
        pods.record(SyncResult(PodUID(uid), PodRuntime(PodUID(uid)), waiting))
    sync.on_services_listed(ServicesListed("shop", [service("db", "10.96.0.9", port(1))]))
    assert workers.updates == ["plain"]
    master = service("kubernetes", "10.96.0.1", port(443))
    sync.on_services_listed(ServicesListed("default", [master]))
    assert workers.updates == ["plain", "plain", "elsewhere"]
    sync.on_services_listed(ServicesListed("default", [master]))  # unchanged
    assert len(workers.updates) == 3


def test_housekeeping_forgets_what_no_pod_references(loop: Any) -> None:
    sync, _, objects, pods = loop
    sync.on_object_fetched(config_map("settings", {"a": "1"}))
    sync.on_object_fetched(config_map("unreferenced", {"a": "1"}))
    sync.on_services_listed(ServicesListed("gone", []))
    sync.on_services_listed(ServicesListed("shop", []))
    sync.housekeeping()
    assert objects.get(ObjectKey(CM, "shop", "settings")).strings == {"a": "1"}
    assert objects.services("shop") == []
    with pytest.raises(ObjectUnavailable) as unread:
        objects.get(ObjectKey(CM, "shop", "unreferenced"))
    assert unread.value.pending
    with pytest.raises(ObjectUnavailable):
        objects.services("gone")

    pods.set_source("api", [p for p in PODS if p["metadata"]["uid"] != "with-volume"])
    sync.housekeeping()  # a pod that terminates needs nothing any more
    with pytest.raises(ObjectUnavailable):
        objects.get(ObjectKey(CM, "shop", "settings"))
