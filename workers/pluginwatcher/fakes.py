"""Fakes of the plugin watcher's seams, for tests: the API (``FakeCsiNodeApi``: a Node and
its CSINode in memory, with resourceVersions, merge patches and injected failures) and the
plugins (``FakePlugins``: registration sockets and driver endpoints that record calls)."""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

from pkletd.ipc.apiclient.jsonapi import CONFLICT, NOT_FOUND, ApiCallFailed, Obj
from pkletd.ipc.csi.client import CsiError, NodeInfo, PluginInfo
from pkletd.workers.pluginwatcher.api import CsiNodeApi
from pkletd.workers.pluginwatcher.registrar import NodeService, Plugins, Registration


class FakeCsiNodeApi(CsiNodeApi):  # declared, so the type checker proves it fits
    def __init__(self, node_name: str = "n1", labels: dict[str, str] | None = None) -> None:
        self.node: Obj | None = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {"name": node_name, "uid": "node-uid-1", "labels": dict(labels or {})},
        }
        self.csinode: Obj | None = None
        self.version = 1
        self.conflicts = 0  # the next writes that fail with 409
        self.failing: ApiCallFailed | None = None  # every call fails so while set
        self.writes: list[str] = []
        self._stamp(self.node)

    def get_node(self, name: str) -> Obj:
        return copy.deepcopy(self._found(self.node, "nodes", name))

    def patch_node(self, name: str, patch: Obj) -> Obj:
        node = self._found(self.node, "nodes", name)
        self._write("patch node", node, patch["metadata"].get("resourceVersion"))
        metadata = node["metadata"]
        for key in ("labels", "annotations"):
            values = metadata.setdefault(key, {})
            for k, v in (patch["metadata"].get(key) or {}).items():
                if v is None:
                    values.pop(k, None)
                else:
                    values[k] = v
        self._stamp(node)
        return copy.deepcopy(node)

    def get_csinode(self, name: str) -> Obj:
        return copy.deepcopy(self._found(self.csinode, "csinodes", name))

    def create_csinode(self, csinode: Obj) -> Obj:
        self._write("create csinode", None, None)
        if self.csinode is not None:
            raise ApiCallFailed(CONFLICT, "csinodes already exists")
        self.csinode = copy.deepcopy(csinode)
        self._stamp(self.csinode)
        return copy.deepcopy(self.csinode)

    def update_csinode(self, csinode: Obj) -> Obj:
        found = self._found(self.csinode, "csinodes", csinode["metadata"]["name"])
        self._write("update csinode", found, csinode["metadata"].get("resourceVersion"))
        self.csinode = copy.deepcopy(csinode)
        self._stamp(self.csinode)
        return copy.deepcopy(self.csinode)

    def close(self) -> None:
        pass

    # --- for tests ----------------------------------------------------------------------

    def node_ids(self) -> str | None:
        assert self.node is not None
        return (self.node["metadata"].get("annotations") or {}).get(
            "csi.volume.kubernetes.io/nodeid"
        )

    def labels(self) -> dict[str, str]:
        assert self.node is not None
        return dict(self.node["metadata"].get("labels") or {})

    def drivers(self) -> list[dict[str, Any]]:
        assert self.csinode is not None
        return list(self.csinode["spec"].get("drivers") or [])

    # --- inside -------------------------------------------------------------------------

    def _found(self, obj: Obj | None, kind: str, name: str) -> Obj:
        if self.failing is not None:
            raise self.failing
        if obj is None or obj["metadata"]["name"] != name:
            raise ApiCallFailed(NOT_FOUND, f"{kind} {name!r} not found")
        return obj

    def _write(self, what: str, obj: Obj | None, version: str | None) -> None:
        if self.failing is not None:
            raise self.failing
        if self.conflicts > 0:
            self.conflicts -= 1
            raise ApiCallFailed(CONFLICT, f"{what}: the object has been modified")
        stale = obj is not None and version not in (None, obj["metadata"]["resourceVersion"])
        if stale:
            raise ApiCallFailed(CONFLICT, f"{what}: the object has been modified")
        self.writes.append(what)

    def _stamp(self, obj: Obj) -> None:
        self.version += 1
        obj["metadata"]["resourceVersion"] = str(self.version)


@dataclass
class FakePlugin:
    """One registration socket and what its plugin says."""

    info: PluginInfo
    get_info_error: CsiError | None = None
    notify_error: CsiError | None = None
    notified: list[tuple[bool, str]] = field(default_factory=list)
    get_infos: int = 0


class _FakeRegistration(Registration):
    def __init__(self, plugin: FakePlugin | None, socket: str) -> None:
        self._plugin = plugin
        self._socket = socket

    def get_info(self, timeout: float = 1.0) -> PluginInfo:
        if self._plugin is None:
            raise CsiError("GetInfo", "UNAVAILABLE", f"no listener on {self._socket}")
        self._plugin.get_infos += 1
        if self._plugin.get_info_error is not None:
            raise self._plugin.get_info_error
        return self._plugin.info

    def notify(self, registered: bool, error: str = "", timeout: float = 5.0) -> None:
        assert self._plugin is not None
        self._plugin.notified.append((registered, error))
        if self._plugin.notify_error is not None:
            raise self._plugin.notify_error

    def close(self) -> None:
        pass


class _FakeNodeService(NodeService):
    def __init__(self, answer: NodeInfo | CsiError) -> None:
        self._answer = answer

    def node_info(self) -> NodeInfo:
        if isinstance(self._answer, CsiError):
            raise self._answer
        return self._answer

    def close(self) -> None:
        pass


class FakePlugins(Plugins):
    """Registration sockets by path and driver endpoints by path; an endpoint not set
    answers UNAVAILABLE."""

    def __init__(self) -> None:
        self.sockets: dict[str, FakePlugin] = {}
        self.endpoints: dict[str, NodeInfo | CsiError] = {}
        self.node_info_calls: list[str] = []

    def add(
        self,
        socket: str,
        name: str,
        node_id: str = "node-1",
        versions: tuple[str, ...] = ("1.0.0",),
        endpoint: str = "",
        kind: str = "CSIPlugin",
        topology: dict[str, str] | None = None,
        max_volumes: int = 0,
    ) -> FakePlugin:
        plugin = FakePlugin(PluginInfo(kind, name, endpoint, versions))
        self.sockets[socket] = plugin
        self.endpoints[endpoint or socket] = NodeInfo(node_id, max_volumes, dict(topology or {}))
        return plugin

    def registration(self, socket: str) -> Registration:
        return _FakeRegistration(self.sockets.get(socket), socket)

    def node_service(self, endpoint: str) -> NodeService:
        self.node_info_calls.append(endpoint)
        found = self.endpoints.get(endpoint)
        if found is None:
            return _FakeNodeService(CsiError("NodeGetInfo", "UNAVAILABLE", "no listener"))
        return _FakeNodeService(found)
