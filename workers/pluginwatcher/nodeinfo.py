"""A CSI driver on the node's API objects, as the kubelet's node info manager writes it
(``pkg/volume/csi/nodeinfomanager``).

Installing a driver: on the Node, the annotation ``csi.volume.kubernetes.io/nodeid`` (a
JSON map, driver name -> the driver's id for this node) gets the driver's key, and each of
its topology segments becomes a label (one the node already has with another value is an
error: the driver would place volumes where they cannot be reached); then the CSINode
named after the node (owned by the Node) gets the driver's entry ``{name, nodeID,
topologyKeys (sorted), allocatable.count (when the driver has a volume limit)}`` in place of
any entry of that name. Uninstalling undoes the entry and the annotation key; the labels
stay, as the kubelet leaves them. ``initialize`` makes the CSINode, with no drivers, when
there is none (the kubelet's ``initializeCSINode``); ``prune`` takes off the drivers a
restarted watcher did not find again. A write that lost a race with another
writer (409) is computed again from a fresh read, a few times. A Node not there (404: the
node-lease worker, started with ours, has not registered it yet) is ``NodeNotRegistered``,
for the caller to wait on; uninstalling from a missing Node has nothing to undo there.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apiclient.jsonapi import CONFLICT, NOT_FOUND, ApiCallFailed, Obj
from pkletd.workers.pluginwatcher.api import CsiNodeApi

NODE_ID_ANNOTATION = "csi.volume.kubernetes.io/nodeid"
CONFLICT_TRIES = 5
MAX_COUNT = 2**31 - 1  # allocatable.count is an int32


class NodeNotRegistered(ApiCallFailed):
    """The Node is not there (404): not registered yet (or deleted). Nothing an operator
    must do: the node-lease worker registers it."""

    def __init__(self, node: str, message: str) -> None:
        super().__init__(NOT_FOUND, message)
        self.node = node


class NodeInfoRefused(ValueError):
    """The node's objects do not allow the driver (a topology label taken, a bad
    annotation)."""


@dataclass(frozen=True, slots=True)
class DriverOnNode:
    name: str
    node_id: str
    topology: Mapping[str, str]
    max_volumes: int  # 0: no limit

    def csinode_entry(self) -> dict[str, Any]:
        entry: dict[str, Any] = {"name": self.name, "nodeID": self.node_id}
        if self.topology:
            entry["topologyKeys"] = sorted(self.topology)
        if self.max_volumes > 0:
            entry["allocatable"] = {"count": min(self.max_volumes, MAX_COUNT)}
        return entry


class NodeInfoManager:
    def __init__(self, api: CsiNodeApi, node_name: str) -> None:
        self._api = api
        self._node = node_name

    def initialize(self) -> None:
        """The CSINode, with no drivers, if the node has none yet."""
        try:
            self._api.get_csinode(self._node)
        except ApiCallFailed as exc:
            if exc.status != NOT_FOUND:
                raise
            _retrying(lambda: self._create_csinode([]))

    def install(self, driver: DriverOnNode) -> None:
        _retrying(lambda: self._install_on_node(driver))
        _retrying(lambda: self._install_in_csinode(driver))

    def uninstall(self, name: str) -> None:
        _retrying(lambda: self._uninstall_in_csinode(name))
        _retrying(lambda: self._uninstall_on_node(name))

    def prune(self, keep: set[str]) -> list[str]:
        """Take every driver not in ``keep`` off the node's objects (one that went while
        no watcher ran); the names taken off."""
        csinode = self._csinode()
        drivers = (csinode or {}).get("spec", {}).get("drivers") or []
        node = self._get_node()
        stale = {d.get("name", "") for d in drivers} | set(_node_ids(node))
        gone = sorted(stale - keep)
        for name in gone:
            self.uninstall(name)
        return gone

    # --- the Node ---------------------------------------------------------------------

    def _get_node(self) -> Obj:
        try:
            return self._api.get_node(self._node)
        except ApiCallFailed as exc:
            if exc.status == NOT_FOUND:
                raise NodeNotRegistered(self._node, str(exc)) from exc
            raise

    def _patch_node(self, patch: Obj) -> None:
        try:
            self._api.patch_node(self._node, patch)
        except ApiCallFailed as exc:
            if exc.status == NOT_FOUND:
                raise NodeNotRegistered(self._node, str(exc)) from exc
            raise

    def _install_on_node(self, driver: DriverOnNode) -> None:
        node = self._get_node()
        labels = node["metadata"].get("labels") or {}
        for key, value in sorted(driver.topology.items()):
            if key in labels and labels[key] != value:
                raise NodeInfoRefused(
                    f"topology label {key}={value} of driver {driver.name} conflicts with "
                    f"the node's label {key}={labels[key]}"
                )
        ids = _node_ids(node)
        added = {k: v for k, v in driver.topology.items() if k not in labels}
        if ids.get(driver.name) == driver.node_id and not added:
            return
        metadata: Obj = {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "annotations": {NODE_ID_ANNOTATION: json.dumps({**ids, driver.name: driver.node_id})},
        }
        if added:
            metadata["labels"] = added
        self._patch_node({"metadata": metadata})

    def _uninstall_on_node(self, name: str) -> None:
        try:
            node = self._get_node()
        except NodeNotRegistered:
            return  # no Node, no annotation to take the driver off
        ids = _node_ids(node)
        if name not in ids:
            return
        left = {k: v for k, v in ids.items() if k != name}
        metadata = {
            "resourceVersion": node["metadata"]["resourceVersion"],
            "annotations": {NODE_ID_ANNOTATION: json.dumps(left) if left else None},
        }
        try:
            self._patch_node({"metadata": metadata})
        except NodeNotRegistered:
            return  # deleted meanwhile: its annotation with it

    # --- the CSINode ------------------------------------------------------------------

    def _install_in_csinode(self, driver: DriverOnNode) -> None:
        entry = driver.csinode_entry()
        csinode = self._csinode()
        if csinode is None:
            self._create_csinode([entry])
            return
        drivers = csinode.setdefault("spec", {}).get("drivers") or []
        if entry in drivers:
            return
        csinode["spec"]["drivers"] = [d for d in drivers if d.get("name") != driver.name] + [entry]
        self._api.update_csinode(csinode)

    def _uninstall_in_csinode(self, name: str) -> None:
        csinode = self._csinode()
        drivers = (csinode or {}).get("spec", {}).get("drivers") or []
        if csinode is None or not any(d.get("name") == name for d in drivers):
            return
        csinode["spec"]["drivers"] = [d for d in drivers if d.get("name") != name]
        self._api.update_csinode(csinode)

    def _csinode(self) -> Obj | None:
        try:
            return self._api.get_csinode(self._node)
        except ApiCallFailed as exc:
            if exc.status == NOT_FOUND:
                return None
            raise

    def _create_csinode(self, drivers: list[dict[str, Any]]) -> None:
        node = self._get_node()
        owner = {
            "apiVersion": "v1",
            "kind": "Node",
            "name": self._node,
            "uid": node["metadata"]["uid"],
        }
        self._api.create_csinode(
            {
                "apiVersion": "storage.k8s.io/v1",
                "kind": "CSINode",
                "metadata": {"name": self._node, "ownerReferences": [owner]},
                "spec": {"drivers": drivers},
            }
        )


def _node_ids(node: Obj) -> dict[str, str]:
    """The node's ``csi.volume.kubernetes.io/nodeid`` map (empty without one)."""
    text = (node["metadata"].get("annotations") or {}).get(NODE_ID_ANNOTATION)
    if not text:
        return {}
    try:
        found = json.loads(text)
    except ValueError as exc:
        raise NodeInfoRefused(f"annotation {NODE_ID_ANNOTATION} is not JSON: {exc}") from exc
    if not isinstance(found, dict) or not all(isinstance(v, str) for v in found.values()):
        raise NodeInfoRefused(f"annotation {NODE_ID_ANNOTATION} is not a map of strings")
    return found


def _retrying(write: Callable[[], None]) -> None:
    """``write`` (a read, then a write computed from it) again after a conflict (409:
    another writer came first, or made the object meanwhile)."""
    for attempt in range(CONFLICT_TRIES):
        try:
            write()
            return
        except ApiCallFailed as exc:
            if exc.status != CONFLICT or attempt == CONFLICT_TRIES - 1:
                raise
