"""The parent's view of PLEG: the kubelet's health thresholds by mode (3 minutes since the
last relist, 10 while runtime events flow), and the ``pleg:`` line of ``pkletd status``."""

from __future__ import annotations

from pkletd.ipc.bus.messages import PlegMode, PlegModeChanged
from pkletd.ipc.clock import FakeClock
from pkletd.supervisor.cli import format_status
from pkletd.supervisor.node.cluster import EVENTED_PLEG_HEALTHY_S, PLEG_HEALTHY_S, NodeState
from pkletd.supervisor.pods.events import EventRecorder

EVENTED = PlegModeChanged(PlegMode.EVENTED)
LOST = PlegModeChanged(PlegMode.RELISTING, "UNAVAILABLE: connection refused")


def node(clock: FakeClock) -> NodeState:
    return NodeState("n1", False, EventRecorder(), clock)


def test_relisting_pleg_is_healthy_for_three_minutes_after_a_relist() -> None:
    clock = FakeClock(mono=100.0)
    state = node(clock)
    clock.mono += PLEG_HEALTHY_S - 1
    assert state.pleg_ok()
    clock.mono += 1
    assert not state.pleg_ok()
    state.relisted()
    assert state.pleg_ok()


def test_evented_pleg_is_healthy_for_ten_minutes_after_a_relist() -> None:
    clock = FakeClock(mono=100.0)
    state = node(clock)
    state.pleg_mode(EVENTED)
    clock.mono += EVENTED_PLEG_HEALTHY_S - 1
    assert state.pleg_ok()
    clock.mono += 1
    assert not state.pleg_ok()


def test_a_fallback_applies_the_relisting_threshold_at_once() -> None:
    """As the kubelet's evented PLEG does when it falls back to the generic one."""
    clock = FakeClock(mono=100.0)
    state = node(clock)
    state.pleg_mode(EVENTED)
    clock.mono += 240  # a relist is due every 5 minutes
    assert state.pleg_ok()
    state.pleg_mode(LOST)
    assert not state.pleg_ok()
    state.relisted()  # the fallback's first relist
    assert state.pleg_ok()


def test_status_says_the_mode_why_it_relists_and_when_it_last_did() -> None:
    clock = FakeClock(mono=100.0)
    state = node(clock)
    state.pleg_mode(LOST)
    clock.mono += 2
    shown = state.status()["pleg"]
    assert shown == {
        "mode": "relisting",
        "reason": "UNAVAILABLE: connection refused",
        "relisted_s_ago": 2.0,
        "healthy": True,
    }


def status_with(pleg: dict[str, object]) -> list[str]:
    node_status = {"name": "n1", "joined": False, "pleg": pleg}
    return format_status({"node": node_status, "workers": [], "pods": []}).splitlines()


def test_the_status_line_of_an_evented_pleg() -> None:
    pleg = {"mode": "evented", "reason": "", "relisted_s_ago": 123.4, "healthy": True}
    assert status_with(pleg)[1] == "pleg: evented, relisted 2m3s ago"


def test_the_status_line_of_a_relisting_pleg_says_why_and_when_unhealthy() -> None:
    pleg = {"mode": "relisting", "reason": "runtime events off", "relisted_s_ago": 200.0}
    line = status_with({**pleg, "healthy": False})[1]
    assert line == "pleg: relisting (runtime events off), relisted 3m20s ago, NOT HEALTHY"
