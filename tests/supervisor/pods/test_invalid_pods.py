"""A pod with a field pkletd cannot read (an unknown value, the wrong type) is refused with
the field's path in its status, not dropped in silence; an invalid change of a running pod
leaves it running as it was."""

from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.bus.messages import Message, PodsListed, PodStatusUpdated
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.events import EventRecorder
from pkletd.supervisor.pods.proberesults import ProbeResults
from pkletd.supervisor.pods.stage import PodStage
from pkletd.supervisor.pods.syncloop import SyncLoop

from tests.supervisor.pods.unit_helpers import UID, RecordingWorkers, pod_dict, sync_loop


def loop(tmp: Path) -> tuple[SyncLoop, RecordingWorkers, list[Message], EventRecorder]:
    workers, published, events = RecordingWorkers(), [], EventRecorder()
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    loop = sync_loop(tmp, pods, workers, publish=published.append, events=events)
    return loop, workers, published, events


@pytest.mark.parametrize(
    ("spec", "message"),
    [
        ({"hostPID": "yes"}, "spec.hostPID: must be true or false, got 'yes'"),
        (
            {"securityContext": {"appArmorProfile": {"type": "Enforce"}}},
            "spec.securityContext.appArmorProfile.type: unsupported value 'Enforce': "
            "supported values: 'RuntimeDefault', 'Unconfined', 'Localhost'",
        ),
        ({"containers": [{"name": "app"}]}, "spec.containers[0].image: required value"),
    ],
)
def test_an_invalid_api_pod_is_failed_with_the_field(
    tmp_path: Path, spec: dict[str, Any], message: str
) -> None:
    sync, workers, published, events = loop(tmp_path)
    sync.on_pods_listed(PodsListed("api", [pod_dict(**spec)]))
    assert workers.updates == []  # never run
    (update,) = published
    assert isinstance(update, PodStatusUpdated)
    status = update.pod["status"]
    assert (status["phase"], status["reason"]) == ("Failed", "InvalidPodSpec")
    assert status["message"] == f"Pod was rejected: {message}"
    (event,) = events.recent()
    assert (event["reason"], event["message"]) == ("InvalidPodSpec", message)
    assert sync.status(events=False)["pods"][0]["phase"] == "Failed"


def test_an_invalid_change_leaves_the_pod_as_it_was(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    sync, workers, _, _ = loop(tmp_path)
    sync.on_pods_listed(PodsListed("api", [pod_dict()]))
    assert workers.updates == [UID]
    caplog.set_level(logging.ERROR)
    for _ in range(3):
        sync.on_pods_listed(PodsListed("api", [pod_dict(hostIPC="no")]))
    assert workers.updates == [UID]  # neither synced again nor terminated
    assert sync._pods.stage(UID) is PodStage.ACTIVE
    assert sync._pods.get(UID).namespaces.host_ipc is False  # type: ignore[union-attr]
    logged = [r.getMessage() for r in caplog.records]
    assert logged == [
        "ignored invalid change source=api pod=default/web "
        "reason=spec.hostIPC: must be true or false, got 'no'"
    ]  # once, not at every set the source sends


def test_a_pod_without_an_identity_is_dropped_and_said_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    caplog.set_level(logging.ERROR)
    nameless = {"metadata": {"uid": "u-2"}, "spec": {"containers": []}}
    for _ in range(2):
        change = pods.set_source("api", [nameless])
        assert change.sync == () and change.terminate == ()
    assert [r.getMessage() for r in caplog.records] == [
        "dropped invalid pod from source=api reason=metadata.name: required value"
    ]


def test_a_refused_invalid_pod_deleted_in_the_api_is_let_go() -> None:
    pods = Pods("10.0.0.1", ["api"], ProbeResults())
    invalid = pod_dict(hostPID="yes")
    (refused,) = pods.set_source("api", [invalid]).sync
    pods.reject(refused.uid, "InvalidPodSpec", refused.invalid)
    invalid["metadata"]["deletionTimestamp"] = "2026-11-24T10:00:00Z"
    change = pods.set_source("api", [invalid])
    assert [p.uid for p in change.terminate] == [UID]
