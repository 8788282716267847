"""The API pod source forwards a readiness gate's condition, which another client writes in
the pod's status, and nothing else of the status: the parent computes Ready again when a
gate turns, and the echo of its own status writes still sends nothing."""

from __future__ import annotations

from typing import Any

from pkletd.workers.apiwatcher import source_view

from tests.workers.test_apiwatcher_unit import api_pod, changed, deliver, listed, sets, watcher

GATE = "example.com/lb-ready"


def gated(uid: str, rv: str, *conditions: dict[str, Any]) -> dict[str, Any]:
    pod = api_pod(uid, rv=rv, phase="Running")
    pod["spec"]["readinessGates"] = [{"conditionType": GATE}]
    pod["status"]["conditions"] = [
        {"type": "Ready", "status": "False", "reason": "ReadinessGatesNotReady"},
        *conditions,
    ]
    return pod


def gate(status: str) -> dict[str, Any]:
    return {"type": GATE, "status": status, "lastTransitionTime": "2026-01-01T00:00:00Z"}


def test_a_gated_pod_shows_the_parent_its_gates_conditions_only() -> None:
    view = source_view(gated("a", "1", gate("False"), {"type": "Other", "status": "True"}))
    assert view["status"] == {"conditions": [gate("False")]}


def test_a_pod_without_gates_shows_no_conditions() -> None:
    pod = api_pod("a", phase="Running")
    pod["status"]["conditions"] = [gate("True")]
    assert "status" not in source_view(pod)


def test_a_gate_turning_is_sent_and_our_own_writes_are_not() -> None:
    worker, bus, inbox = watcher()
    deliver(worker, inbox, listed([gated("a", "1")]))
    deliver(worker, inbox, changed("MODIFIED", gated("a", "2", gate("False"))))
    ours = gated("a", "3", gate("False"))
    ours["status"]["conditions"][0]["status"] = "True"  # the status manager's Ready
    deliver(worker, inbox, changed("MODIFIED", ours))
    deliver(worker, inbox, changed("MODIFIED", gated("a", "4", gate("True"))))
    assert sets(bus) == [["a"], ["a"], ["a"]]
    last = bus.sent[-1].pods[0]  # type: ignore[union-attr]
    assert last["status"]["conditions"] == [gate("True")]
