"""The conditions the status manager writes read in the API exactly as the parent computed
them, as the kubelet's do: a reason or message dropped is dropped in the API too (the API
merges a condition field by field), in the kubelet's order, and the conditions others
wrote stay."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from pkletd.ipc.bus.messages import PodStatusUpdated, Snapshot
from pkletd.workers.statusmanager import podstatus

from tests.workers.statusmanager.statusmanager_helpers import (
    Obj,
    Rig,
    api_pod,
    condition,
    reported,
    scheduled,
)

GATE = "example.com/lb-ready"
UNREADY = {"reason": "ContainersNotReady", "message": "containers with unready status: [app]"}
KUBELET_ORDER = ["PodReadyToStartContainers", "Initialized", "Ready", "ContainersReady"]


@pytest.fixture
def rig() -> Iterator[Rig]:
    found = Rig()
    yield found
    found.close()


def unready(pod: Obj) -> Obj:
    """``pod`` reported with its containers not ready, reasons as the kubelet gives them."""
    found = reported(pod, ready=False)
    for c in found["status"]["conditions"]:
        if c["type"] in ("Ready", "ContainersReady"):
            c.update(UNREADY)
    return found


def api_conditions(rig: Rig) -> list[Obj]:
    found: list[Obj] = rig.calls.pods[("default", "web")]["status"]["conditions"]
    return found


def by_type(conditions: list[Obj], kind: str) -> Obj:
    return next(c for c in conditions if c["type"] == kind)


def start(rig: Rig, pod: Obj) -> None:
    rig.worker.on_snapshot(Snapshot(0, [], {}))
    rig.settle()
    rig.worker.on_broadcast(PodStatusUpdated(pod))
    rig.settle()


def test_a_ready_that_turns_true_keeps_no_old_reason(rig: Rig) -> None:
    pod = rig.calls.add_pod(scheduled(api_pod()))
    start(rig, unready(pod))
    assert by_type(api_conditions(rig), "Ready")["reason"] == "ContainersNotReady"
    rig.worker.on_broadcast(PodStatusUpdated(reported(pod)))
    rig.settle()
    for kind in ("Ready", "ContainersReady"):
        ready = by_type(api_conditions(rig), kind)
        assert ready["status"] == "True"
        assert "reason" not in ready and "message" not in ready, ready


def test_a_stale_reason_the_watch_shows_is_written_away(rig: Rig) -> None:
    stale = scheduled(api_pod())
    stale["status"]["conditions"].append(condition("Ready") | UNREADY)  # an older writer's
    pod = rig.calls.add_pod(stale)
    rig.worker.on_snapshot(Snapshot(0, [reported(pod)], {}))
    rig.settle()
    assert rig.calls.count("patch") == 1
    assert "reason" not in by_type(api_conditions(rig), "Ready")
    rig.advance(10.0)
    assert rig.calls.count("patch") == 1  # written once: the watch shows it as it is


def test_conditions_read_in_the_kubelets_order_with_others_kept_first(rig: Rig) -> None:
    pod = scheduled(api_pod())
    pod["spec"]["readinessGates"] = [{"conditionType": GATE}]
    gate = condition(GATE) | {"reason": "Registered"}
    pod["status"]["conditions"].append(gate)
    pod = rig.calls.add_pod(pod)
    mine = reported(pod)
    mine["status"]["conditions"].insert(0, gate)  # the parent shows the gate first
    start(rig, mine)
    found = api_conditions(rig)
    assert [c["type"] for c in found] == [GATE, *KUBELET_ORDER, "PodScheduled"]
    assert by_type(found, GATE) == gate  # another client's, untouched
    assert by_type(found, "PodScheduled")["lastTransitionTime"] == "2025-06-01T12:00:00Z"


def test_the_patch_names_every_field_and_the_order() -> None:
    status: dict[str, Any] = reported(api_pod(), ready=False)["status"]
    status["conditions"][2].update(UNREADY)
    wanted = podstatus.owned(status, with_scheduled=False)
    body = podstatus.patch("uid-1", wanted, podstatus.condition_order(status))
    sent = body["status"]["conditions"]
    assert [c["type"] for c in sent] == KUBELET_ORDER
    assert sent[0]["reason"] is None and sent[0]["message"] is None
    assert sent[2]["reason"] == "ContainersNotReady"
    order = body["status"]["$setElementOrder/conditions"]
    assert order == [{"type": t} for t in [*KUBELET_ORDER, "PodScheduled"]]
