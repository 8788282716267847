"""The node's Ready during a graceful node shutdown: False with the kubelet's message,
after the runtime's errors and before missing capacity, and the status thread woken at
once when the parent says a shutdown started or ended."""

from __future__ import annotations

from pkletd.workers.nodelease.conditions import (
    SHUTTING_DOWN,
    Limits,
    ParentHealth,
    RuntimeState,
    after_status,
    ready_errors,
)
from pkletd.workers.nodelease.nodestatus import Observed, initial_node, updated_node
from pkletd.workers.nodelease.reporter import Inputs

from tests.workers.nodelease.nodelease_helpers import (
    CNI_DOWN,
    READY_CONDITIONS,
    T0,
    conditions_of,
    template,
)

RUNNING = after_status(RuntimeState(), READY_CONDITIONS, now=0.0)
CAPACITY = {"cpu": "2", "memory": "1Gi", "pods": "110", "ephemeral-storage": "10Gi"}


def observed(parent: ParentHealth, at: float) -> Observed:
    return Observed(RUNNING, parent, Limits(), (), 50, T0 + at, at)


def test_shutting_down_comes_after_the_network_and_before_missing_capacity() -> None:
    parent = ParentHealth(alive_at=1.0).heard(1.0, True, True, shutting_down=True)
    assert ready_errors(RUNNING, parent, Limits(), 1.0, CAPACITY) == [SHUTTING_DOWN]
    no_network = after_status(RUNNING, (READY_CONDITIONS[0], CNI_DOWN), now=0.5)
    errors = ready_errors(no_network, parent, Limits(), 1.0, {})
    assert errors[-2] == SHUTTING_DOWN and errors[-1].startswith("Missing node capacity")
    assert "network" in errors[-3]


def test_the_node_turns_not_ready_with_the_kubelets_message_and_back() -> None:
    calm = ParentHealth(alive_at=1.0)
    node = initial_node(template(), observed(calm, 1.0))
    assert conditions_of(node)["Ready"]["status"] == "True"
    down = calm.heard(2.0, True, True, shutting_down=True)
    node, changed = updated_node(node, template(), observed(down, 2.0))
    ready = conditions_of(node)["Ready"]
    assert changed
    assert (ready["status"], ready["reason"], ready["message"]) == (
        "False",
        "KubeletNotReady",
        "node is shutting down",
    )
    node, _ = updated_node(node, template(), observed(down.heard(3.0, True, True), 3.0))
    assert conditions_of(node)["Ready"]["status"] == "True"


def test_the_inputs_say_when_a_shutdown_starts_or_ends() -> None:
    inputs = Inputs(template(), ParentHealth(alive_at=0.0))
    assert not inputs.heard_parent(1.0, True, True)
    assert inputs.heard_parent(2.0, True, True, shutting_down=True)
    assert not inputs.heard_parent(3.0, True, True, shutting_down=True)
    assert inputs.read()[1].shutting_down
    assert inputs.heard_parent(4.0, True, True)
