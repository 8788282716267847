"""``localStorageCapacityIsolation``: on by default; off, the node reports no
ephemeral-storage (as the kubelet's container manager leaves it out), its Ready does not
wait for it, and the eviction worker enforces no local storage limits."""

from __future__ import annotations

import threading
from pathlib import Path

from pkletd.ipc.clock import FakeClock
from pkletd.supervisor.node.facts import compose_node
from pkletd.supervisor.workeroptions import eviction_options, node_lease_options
from pkletd.workers.nodelease.conditions import ParentHealth
from pkletd.workers.nodelease.options import NodeLeaseOptions
from pkletd.workers.nodelease.reporter import Inputs, StatusReporter
from pkletd.workers.nodelease.runtime import RuntimeProbe

from tests.supervisor.node.test_node_facts import MACHINE, RUNTIME, kubelet_config
from tests.supervisor.test_config import HEADER, load, write
from tests.workers.nodelease.nodelease_helpers import (
    NODE,
    FakeNodeApi,
    FakeRuntime,
    conditions_of,
    template,
)


def test_on_by_default_off_from_the_file_or_the_flag(tmp_path: Path) -> None:
    assert load().config.local_storage_capacity_isolation is True
    path = write(tmp_path, "localStorageCapacityIsolation: false\n", HEADER)
    result = load("--config", path)
    assert result.config.local_storage_capacity_isolation is False
    assert result.warnings == ()  # implemented: no "not implemented" warning
    flag = load("--config", path, "--local-storage-capacity-isolation", "true")
    assert flag.config.local_storage_capacity_isolation is True


def test_the_node_reports_ephemeral_storage_only_with_it() -> None:
    on = compose_node(kubelet_config(), MACHINE, "10.0.0.7", RUNTIME)["status"]
    assert on["capacity"]["ephemeral-storage"] == "100Gi"
    assert "ephemeral-storage" in on["allocatable"]
    config = kubelet_config(local_storage_capacity_isolation=False)
    off = compose_node(config, MACHINE, "10.0.0.7", RUNTIME)["status"]
    assert "ephemeral-storage" not in off["capacity"]
    assert "ephemeral-storage" not in off["allocatable"]
    assert off["capacity"]["cpu"] == "2"


def test_the_workers_are_told() -> None:
    config = kubelet_config(local_storage_capacity_isolation=False)
    assert node_lease_options(config).local_storage is False
    assert eviction_options(config).local_storage is False
    assert node_lease_options(kubelet_config()).local_storage is True
    assert eviction_options(kubelet_config()).local_storage is True


def ready_without_storage_capacity(local_storage: bool) -> dict[str, str]:
    """The Ready condition a node-lease worker writes for a Node with no ephemeral-storage."""
    api, clock, runtime = FakeNodeApi(), FakeClock(mono=0.0), FakeRuntime()
    probe = RuntimeProbe(runtime, clock, 5.0)
    node = template()
    del node["status"]["capacity"]["ephemeral-storage"]
    del node["status"]["allocatable"]["ephemeral-storage"]
    inputs = Inputs(node, ParentHealth(alive_at=0.0))
    options = NodeLeaseOptions(update_frequency=10.0, local_storage=local_storage)
    reporter = StatusReporter(api, probe, inputs, options, clock, lambda _: None)
    probe.check()
    inputs.heard_parent(clock.monotonic(), sync_loop_ok=True, pleg_ok=True)
    reporter.sync(threading.Event())
    ready: dict[str, str] = conditions_of(api.nodes[NODE])["Ready"]
    return ready


def test_ready_needs_ephemeral_storage_capacity_only_with_it() -> None:
    assert ready_without_storage_capacity(local_storage=False)["status"] == "True"
    ready = ready_without_storage_capacity(local_storage=True)
    assert ready["status"] == "False"
    assert ready["message"].endswith("Missing node capacity for resources: ephemeral-storage")
