"""CSI plugin registration end to end: a real pkletd joined to the real control plane
(kube-apiserver with the Node authorizer and NodeRestriction), and the test host-path CSI
driver run as its own process with its registrar, as a driver pod with
node-driver-registrar would run. The driver registers through
``<root-dir>/plugins_registry`` and hears so; the node's CSINode, its nodeid annotation
and topology label appear (as kubectl shows them too); ``pkletd status`` lists the
driver; a SIGKILLed plugin-watcher loses nothing; a driver killed with its socket removed
is deregistered; started again, it registers again. A driver whose topology key
NodeRestriction refuses the node is told so and leaves nothing on the node's objects."""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.csidriver import CsiDriverProcess, DriverConfig
from tests.harness.node import NODE, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

DRIVER = "hostpath.csi.pkletd.test"
TOPOLOGY = "topology.hostpath.csi/node"
NODE_ID_KEY = "csi.volume.kubernetes.io/nodeid"


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane) -> Iterator[Pkletd]:
    yield join(pkletd, control_plane)


def run_driver(node: Pkletd, tmp_path: Path, **options: Any) -> Iterator[CsiDriverProcess]:
    """The test CSI driver for ``node``, registering through its plugins_registry."""
    config = DriverConfig.for_kubelet(
        node.root_dir,
        DRIVER,
        "hostpath-node-1",
        data_dir=tmp_path / "data",
        calls=tmp_path / "calls.jsonl",
        **options,
    )
    process = CsiDriverProcess(config)
    yield process
    process.stop()


@pytest.fixture
def driver(node: Pkletd, tmp_path: Path) -> Iterator[CsiDriverProcess]:
    yield from run_driver(node, tmp_path, max_volumes=5, topology={TOPOLOGY: NODE})


def csinode(kube: Kube) -> dict[str, Any] | None:
    """The CSINode as kubectl shows it; None while there is none. Not through the typed
    client: kube-apiserver serves a CSINode without drivers as ``"drivers": null``
    (the list is required, and protobuf has no empty list), which it refuses."""
    found = kube.kubectl("get", "csinode", NODE, "-o", "json", check=False)
    return dict(json.loads(found.stdout)) if found.returncode == 0 else None


def csinode_drivers(kube: Kube) -> list[dict[str, Any]] | None:
    """The CSINode's drivers as kubectl shows them; None while there is no CSINode."""
    found = csinode(kube)
    return None if found is None else list(found["spec"].get("drivers") or [])


def node_ids(kube: Kube) -> dict[str, str]:
    annotations = kube.core.read_node(NODE).metadata.annotations or {}
    return dict(json.loads(annotations[NODE_ID_KEY])) if NODE_ID_KEY in annotations else {}


def status_drivers(node: Pkletd) -> list[str]:
    return [d["name"] for d in node.status().get("csi_drivers", [])]


def watcher_pid(node: Pkletd) -> int:
    worker = node.workers()["plugin-watcher"]
    return int(worker["pid"]) if worker["state"] == "running" else 0


def wait_registered(node: Pkletd, kube: Kube, driver: CsiDriverProcess, times: int) -> None:
    wait_for(
        f"{times} successful registrations",
        lambda: driver.registration_status().count((True, "")) >= times,
        timeout=30,
    )
    wait_for("the driver in pkletd status", lambda: status_drivers(node) == [DRIVER])
    wait_for("the driver in the CSINode", lambda: csinode_drivers(kube) == [ENTRY])


ENTRY = {
    "name": DRIVER,
    "nodeID": "hostpath-node-1",
    "topologyKeys": [TOPOLOGY],
    "allocatable": {"count": 5},
}


def test_a_csi_driver_registers_survives_the_watcher_and_goes_and_comes_back(
    node: Pkletd, kube: Kube, driver: CsiDriverProcess
) -> None:
    # the watcher makes the CSINode, owned by the Node, before any driver comes
    wait_for("an empty CSINode", lambda: csinode_drivers(kube) == [])
    owners = (csinode(kube) or {})["metadata"]["ownerReferences"]
    node_uid = kube.core.read_node(NODE).metadata.uid
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("Node", NODE, node_uid)]
    registry = node.root_dir / "plugins_registry"
    assert oct(registry.stat().st_mode & 0o777) == oct(0o750 & ~_umask())

    driver.start()
    wait_registered(node, kube, driver, 1)
    assert driver.registration_status() == [(True, "")]
    assert node_ids(kube) == {DRIVER: "hostpath-node-1"}
    labels = kube.kubectl("get", "node", NODE, "--show-labels").stdout
    assert f"{TOPOLOGY}={NODE}" in labels
    [shown] = node.status()["csi_drivers"]
    assert shown == {
        "name": DRIVER,
        "endpoint": str(driver.config.endpoint),
        "node_id": "hostpath-node-1",
        "max_volumes": 5,
        "topology": {TOPOLOGY: NODE},
        "versions": ["1.0.0"],
    }
    table = node.cli("status").stdout
    assert any(line.split()[:3] == [DRIVER, "hostpath-node-1", "5"] for line in table.splitlines())

    # SIGKILL the watcher: the parent keeps the driver meanwhile, the new watcher reports it
    before = watcher_pid(node)
    os.kill(before, signal.SIGKILL)
    wait_for("a new plugin-watcher", lambda: watcher_pid(node) not in (0, before))
    wait_registered(node, kube, driver, 2)
    assert "plugin-watcher" in node.log("plugin-watcher")
    assert node_ids(kube) == {DRIVER: "hostpath-node-1"}

    # the driver dies and its registration socket is removed: deregistered
    driver.kill()
    driver.config.registration_socket.unlink()
    wait_for("no driver in pkletd status", lambda: status_drivers(node) == [])
    wait_for("no driver in the CSINode", lambda: csinode_drivers(kube) == [])
    assert node_ids(kube) == {}
    assert f"{TOPOLOGY}={NODE}" in kube.kubectl("get", "node", NODE, "--show-labels").stdout

    # started again, it registers again
    driver.start()
    wait_registered(node, kube, driver, 3)
    assert node_ids(kube) == {DRIVER: "hostpath-node-1"}
    assert all(w["state"] == "running" for w in node.workers().values())


GONE = "gone.csi.pkletd.test"


@pytest.fixture
def stale_csinode(kube: Kube) -> Iterator[None]:
    """The node's CSINode left from its previous run, naming a driver whose plugin went
    while the node was down; made as admin while no Node is registered (a node joining
    anew), and taken away after (it has no owner to be garbage-collected with)."""
    wait_for("no Node left from an earlier test", lambda: not _node_exists(kube))
    _delete_csinode(kube)
    wait_for("no CSINode left from an earlier test", lambda: csinode(kube) is None)
    entry = {"name": GONE, "nodeID": "old-node-id"}
    kube.storage.create_csi_node({"metadata": {"name": NODE}, "spec": {"drivers": [entry]}})
    yield
    _delete_csinode(kube)


def _node_exists(kube: Kube) -> bool:
    return kube.kubectl("get", "node", NODE, check=False).returncode == 0


def _delete_csinode(kube: Kube) -> None:
    kube.kubectl("delete", "csinode", NODE, "--ignore-not-found", "--wait=false")


def test_a_driver_gone_while_the_node_was_down_is_removed_once_the_node_registers(
    stale_csinode: None, node: Pkletd, kube: Kube
) -> None:
    """The plugin-watcher starts with node-lease, which registers the Node: the clean-up
    of the CSINode waits for the Node, tried again until it succeeds, and the wait is no
    error."""
    wait_for("the stale driver off the CSINode", lambda: csinode_drivers(kube) == [], timeout=60)
    wait_for("the Node", lambda: _node_exists(kube))
    log = node.log("plugin-watcher")
    assert f"CSI driver removed from the node's objects (not found) driver={GONE}" in log
    assert [line for line in log.splitlines() if " ERROR " in line] == []
    assert node_ids(kube) == {}
    assert all(w["state"] == "running" for w in node.workers().values())


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


RESTRICTED = "topology.pkletd.kubernetes.io/node"  # kubernetes.io, not a kubelet label


@pytest.fixture
def restricted_driver(node: Pkletd, tmp_path: Path) -> Iterator[CsiDriverProcess]:
    yield from run_driver(node, tmp_path, topology={RESTRICTED: NODE})


def test_a_driver_whose_topology_label_noderestriction_refuses_is_not_registered(
    node: Pkletd, kube: Kube, restricted_driver: CsiDriverProcess
) -> None:
    """NodeRestriction lets a node set no label under kubernetes.io but the kubelet's own:
    the driver hears it is not registered, with the API's reason, and nothing of it is
    on the node's objects."""
    wait_for("an empty CSINode", lambda: csinode_drivers(kube) == [])
    restricted_driver.start()
    refused = wait_for(
        "a refused registration",
        lambda: [e for ok, e in restricted_driver.registration_status() if not ok],
    )
    assert "is not allowed to modify labels" in refused[0], refused
    assert status_drivers(node) == [] and csinode_drivers(kube) == []
    assert node_ids(kube) == {}
    assert RESTRICTED not in (kube.core.read_node(NODE).metadata.labels or {})
