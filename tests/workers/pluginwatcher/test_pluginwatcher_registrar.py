"""Registering one plugin socket as the kubelet does: what is refused and with what message
(sent back through NotifyRegistrationStatus), the CSI version rules, and what a registered
driver writes on the node's objects (the CSINode entry, the nodeid annotation, the topology
labels) and what its deregistration takes back."""

from __future__ import annotations

import json
import logging

import pytest
from pkletd.ipc.apiclient.jsonapi import ApiCallFailed
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.csi.client import CsiError
from pkletd.workers.pluginwatcher.fakes import FakeCsiNodeApi, FakePlugins
from pkletd.workers.pluginwatcher.nodeinfo import NodeInfoManager, NodeNotRegistered
from pkletd.workers.pluginwatcher.registrar import DIAL_S, Registrar, RegistrationFailed
from pkletd.workers.pluginwatcher.versions import VersionRefused, highest_supported

SOCK = "/var/lib/kubelet/plugins_registry/hostpath.csi.k8s.io-reg.sock"
ENDPOINT = "/var/lib/kubelet/plugins/hostpath.csi.k8s.io/csi.sock"
DRIVER = "hostpath.csi.k8s.io"


class Parts:
    def __init__(self, labels: dict[str, str] | None = None) -> None:
        self.api = FakeCsiNodeApi("n1", labels)
        self.plugins = FakePlugins()
        self.clock = FakeClock()
        self.registrar = Registrar(self.plugins, NodeInfoManager(self.api, "n1"), self.clock)


@pytest.fixture
def parts() -> Parts:
    return Parts()


def test_a_csi_driver_registers_and_is_written_on_the_node(parts: Parts) -> None:
    plugin = parts.plugins.add(
        SOCK,
        DRIVER,
        node_id="node-abc",
        endpoint=ENDPOINT,
        topology={"topology.hostpath.csi/node": "n1", "topology.hostpath.csi/a-zone": "z1"},
        max_volumes=7,
    )
    driver = parts.registrar.register(SOCK)
    assert driver == {
        "name": DRIVER,
        "endpoint": ENDPOINT,
        "node_id": "node-abc",
        "max_volumes": 7,
        "topology": {"topology.hostpath.csi/node": "n1", "topology.hostpath.csi/a-zone": "z1"},
        "versions": ["1.0.0"],
    }
    assert plugin.notified == [(True, "")]
    assert parts.plugins.node_info_calls == [ENDPOINT]
    assert json.loads(parts.api.node_ids() or "") == {DRIVER: "node-abc"}
    assert parts.api.labels() == {
        "topology.hostpath.csi/node": "n1",
        "topology.hostpath.csi/a-zone": "z1",
    }
    assert parts.api.csinode is not None
    assert parts.api.csinode["metadata"]["ownerReferences"] == [
        {"apiVersion": "v1", "kind": "Node", "name": "n1", "uid": "node-uid-1"}
    ]
    assert parts.api.drivers() == [
        {
            "name": DRIVER,
            "nodeID": "node-abc",
            "topologyKeys": ["topology.hostpath.csi/a-zone", "topology.hostpath.csi/node"],
            "allocatable": {"count": 7},
        }
    ]
    assert parts.registrar.listed() == [driver]


def test_an_empty_endpoint_means_the_registration_socket_and_no_limit_no_allocatable(
    parts: Parts,
) -> None:
    parts.plugins.add(SOCK, DRIVER)
    assert parts.registrar.register(SOCK)["endpoint"] == SOCK
    assert parts.plugins.node_info_calls == [SOCK]
    assert parts.api.drivers() == [{"name": DRIVER, "nodeID": "node-1"}]


@pytest.mark.parametrize(
    ("kind", "why"),
    [
        ("DevicePlugin", "plugin type DevicePlugin is not served by pkletd"),
        ("DRAPlugin", "plugin type DRAPlugin is not served by pkletd"),
        ("Whatever", "no handler for plugin type 'Whatever'"),
    ],
)
def test_other_plugin_types_are_refused_and_told_why(parts: Parts, kind: str, why: str) -> None:
    plugin = parts.plugins.add(SOCK, "gpu.example.com", kind=kind)
    with pytest.raises(RegistrationFailed, match=why):
        parts.registrar.register(SOCK)
    [(registered, error)] = plugin.notified
    assert not registered and why in error and "gpu.example.com" in error
    assert parts.api.writes == [] and parts.plugins.node_info_calls == []


@pytest.mark.parametrize(
    ("versions", "why"),
    [
        ((), "offers no supported versions"),
        (("0.3.0",), "highest supported version is 0.3.0, must be v1.x"),
        (("2.0.0",), r"none of the versions \['2.0.0'\] is supported"),
        (("banana",), "is not MAJOR.MINOR"),
    ],
)
def test_versions_without_a_1_x_are_refused(
    parts: Parts, versions: tuple[str, ...], why: str
) -> None:
    plugin = parts.plugins.add(SOCK, DRIVER, versions=versions)
    with pytest.raises(RegistrationFailed, match=why):
        parts.registrar.register(SOCK)
    assert plugin.notified[0][0] is False
    assert parts.api.writes == []


def test_the_highest_1_x_version_counts() -> None:
    assert highest_supported(["0.3.0", "v1.2.0", "1.10", "2.0.0", "junk"]) == (1, 10)
    with pytest.raises(VersionRefused):
        highest_supported(["1"])  # a major alone is not a version


def test_a_same_named_driver_must_offer_a_higher_version(parts: Parts) -> None:
    parts.plugins.add(SOCK, DRIVER, versions=("1.5.0",), node_id="old")
    parts.registrar.register(SOCK)
    other = "/r/other-reg.sock"
    same = parts.plugins.add(other, DRIVER, versions=("1.5.0",), node_id="new")
    with pytest.raises(RegistrationFailed, match="already registered with a higher or equal"):
        parts.registrar.register(other)
    assert same.notified[0][0] is False
    newer = parts.plugins.add(other, DRIVER, versions=("1.6.0",), node_id="new")
    assert parts.registrar.register(other)["node_id"] == "new"
    assert newer.notified == [(True, "")]
    assert parts.api.drivers() == [{"name": DRIVER, "nodeID": "new"}]
    # the old socket going away does not take the newer driver with it
    assert parts.registrar.deregister(SOCK) is None
    assert [d["name"] for d in parts.registrar.listed()] == [DRIVER]


def test_a_conflicting_topology_label_is_refused() -> None:
    parts = Parts(labels={"topology.hostpath.csi/node": "elsewhere"})
    plugin = parts.plugins.add(SOCK, DRIVER, topology={"topology.hostpath.csi/node": "n1"})
    with pytest.raises(RegistrationFailed, match="conflicts with the node's label"):
        parts.registrar.register(SOCK)
    assert plugin.notified[0][0] is False
    assert parts.api.node_ids() is None
    assert parts.registrar.listed() == []


def test_node_get_info_failing_fails_the_registration(parts: Parts) -> None:
    plugin = parts.plugins.add(SOCK, DRIVER, endpoint=ENDPOINT)
    parts.plugins.endpoints[ENDPOINT] = CsiError("NodeGetInfo", "INTERNAL", "boom")
    with pytest.raises(RegistrationFailed, match="NodeGetInfo: INTERNAL: boom"):
        parts.registrar.register(SOCK)
    assert plugin.notified[0][0] is False
    assert parts.registrar.listed() == []


def test_an_api_failure_fails_the_registration_and_the_plugin_hears_it(parts: Parts) -> None:
    plugin = parts.plugins.add(SOCK, DRIVER)
    parts.api.failing = ApiCallFailed(0, "GET /api/v1/nodes/n1: cannot reach the API server")
    with pytest.raises(RegistrationFailed, match="cannot reach the API server"):
        parts.registrar.register(SOCK)
    assert plugin.notified[0][0] is False
    assert parts.registrar.listed() == []


def test_a_node_not_registered_yet_fails_the_registration_as_such(parts: Parts) -> None:
    plugin = parts.plugins.add(SOCK, DRIVER)
    parts.api.node = None
    with pytest.raises(RegistrationFailed, match="not found") as failed:
        parts.registrar.register(SOCK)
    assert isinstance(failed.value.__cause__, NodeNotRegistered)
    assert failed.value.__cause__.node == "n1"
    assert plugin.notified[0][0] is False
    with pytest.raises(NodeNotRegistered):
        parts.registrar.initialize()
    with pytest.raises(NodeNotRegistered):
        parts.registrar.prune()


def test_deregistering_from_a_node_gone_takes_back_the_csinode_entry(
    parts: Parts, caplog: pytest.LogCaptureFixture
) -> None:
    parts.plugins.add(SOCK, DRIVER)
    parts.registrar.register(SOCK)
    parts.api.node = None  # deleted: its annotation with it
    assert parts.registrar.deregister(SOCK) == DRIVER
    assert parts.api.drivers() == []
    assert [r for r in caplog.records if r.levelno >= logging.WARNING] == []


def test_a_write_that_lost_a_race_is_made_again(parts: Parts) -> None:
    parts.plugins.add(SOCK, DRIVER)
    parts.api.conflicts = 2
    parts.registrar.register(SOCK)
    assert json.loads(parts.api.node_ids() or "") == {DRIVER: "node-1"}
    assert parts.api.drivers() == [{"name": DRIVER, "nodeID": "node-1"}]


def test_a_socket_that_never_answers_is_given_up_after_the_dial_timeout(parts: Parts) -> None:
    start = parts.clock.monotonic()
    with pytest.raises(RegistrationFailed, match="GetInfo failed: GetInfo: UNAVAILABLE"):
        parts.registrar.register("/r/dead.sock")
    assert parts.clock.monotonic() - start == pytest.approx(DIAL_S, abs=0.2)


def test_deregistering_takes_back_the_entry_and_the_annotation_key(parts: Parts) -> None:
    parts.plugins.add(SOCK, DRIVER, node_id="a", topology={"topology.hostpath.csi/node": "n1"})
    parts.plugins.add("/r/b-reg.sock", "b.csi.example.com", node_id="b")
    parts.registrar.register(SOCK)
    parts.registrar.register("/r/b-reg.sock")
    assert parts.registrar.deregister(SOCK) == DRIVER
    assert json.loads(parts.api.node_ids() or "") == {"b.csi.example.com": "b"}
    assert parts.api.drivers() == [{"name": "b.csi.example.com", "nodeID": "b"}]
    assert parts.api.labels() == {"topology.hostpath.csi/node": "n1"}  # labels stay
    assert parts.registrar.deregister("/r/b-reg.sock") == "b.csi.example.com"
    assert parts.api.node_ids() is None  # the last key takes the annotation with it
    assert parts.api.drivers() == []
    assert parts.registrar.deregister("/r/b-reg.sock") is None


def test_initialize_makes_an_empty_csinode_once(parts: Parts) -> None:
    parts.registrar.initialize()
    parts.registrar.initialize()
    assert parts.api.writes == ["create csinode"]
    assert parts.api.drivers() == []


def test_a_driver_registered_again_is_written_again_with_no_duplicate(parts: Parts) -> None:
    parts.plugins.add(SOCK, DRIVER, topology={"k": "v"})
    parts.registrar.register(SOCK)
    writes = list(parts.api.writes)
    parts.registrar.deregister(SOCK)
    parts.api.writes.clear()
    parts.registrar.register(SOCK)
    assert writes == ["patch node", "create csinode"]
    assert parts.api.writes == ["patch node", "update csinode"]


def test_health_is_one_get_info(parts: Parts) -> None:
    plugin = parts.plugins.add(SOCK, DRIVER)
    assert parts.registrar.healthy(SOCK) == ""
    plugin.get_info_error = CsiError("GetInfo", "DEADLINE_EXCEEDED", "slow")
    assert parts.registrar.healthy(SOCK) == "GetInfo failed: GetInfo: DEADLINE_EXCEEDED: slow"
