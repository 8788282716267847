"""Registering one plugin socket, as the kubelet's plugin manager and CSI plugin do
(``operation_generator.go``, ``csi_plugin.go``), and undoing it.

``register``: dial the registration socket (``DIAL_S``: a socket just made may not listen
yet), ``GetInfo`` (1 s); refuse anything but a ``CSIPlugin`` (device and DRA plugins are
not served by pkletd) and versions the rules of ``versions`` refuse; ``NodeGetInfo`` on the
driver's endpoint (the registration socket itself when it names none); write the driver
on the node's objects (``nodeinfo``); then ``NotifyRegistrationStatus(true)``, or
``(false, why)`` when any step failed. ``deregister``: the driver registered from that
socket comes off the node's objects (a driver of that name registered since from another
socket stays). ``healthy``: one ``GetInfo``.

All of it runs on the watcher's one job thread, in order, so the drivers map needs no lock.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Protocol

from pkletd.ipc.apiclient.jsonapi import ApiCallFailed
from pkletd.ipc.bus.messages import CsiDriverInfo
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.csi.client import CsiClient, CsiError, NodeInfo, PluginInfo, RegistrationClient
from pkletd.workers.pluginwatcher.nodeinfo import DriverOnNode, NodeInfoManager, NodeInfoRefused
from pkletd.workers.pluginwatcher.versions import (
    Version,
    VersionRefused,
    highest_supported,
    replaces,
)

log = logging.getLogger(__name__)

DIAL_S = 10.0  # the kubelet's dial timeout for a registration socket
DIAL_RETRY_S = 0.1


class PluginType(enum.StrEnum):
    """``PluginInfo.type`` values (``pluginregistration/v1/constants.go``)."""

    CSI = "CSIPlugin"
    DEVICE = "DevicePlugin"
    DRA = "DRAPlugin"


class Registration(Protocol):
    """A plugin's registration socket (``ipc.csi.client.RegistrationClient``)."""

    def get_info(self, timeout: float = ...) -> PluginInfo: ...

    def notify(self, registered: bool, error: str = "", timeout: float = ...) -> None: ...

    def close(self) -> None: ...


class NodeService(Protocol):
    """A CSI driver's Node service (``ipc.csi.client.CsiClient``)."""

    def node_info(self) -> NodeInfo: ...

    def close(self) -> None: ...


class Plugins(Protocol):
    """How to reach a plugin: its registration socket, a driver's endpoint."""

    def registration(self, socket: str) -> Registration: ...

    def node_service(self, endpoint: str) -> NodeService: ...


class GrpcPlugins:
    def registration(self, socket: str) -> Registration:
        return RegistrationClient(socket)

    def node_service(self, endpoint: str) -> NodeService:
        return CsiClient(endpoint)


class PluginRefused(ValueError):
    """The plugin is not one pkletd registers (its type, name or node id)."""


class RegistrationFailed(Exception):
    """The socket's plugin was not registered; the message says which step and why."""


# what makes a registration fail after GetInfo answered
REFUSALS = (PluginRefused, VersionRefused, NodeInfoRefused, ApiCallFailed, CsiError)


@dataclass(frozen=True, slots=True)
class Registered:
    socket: str
    driver: CsiDriverInfo
    version: Version  # the highest supported one


class Registrar:
    def __init__(self, plugins: Plugins, nodes: NodeInfoManager, clock: Clock = SYSTEM_CLOCK):
        self._plugins = plugins
        self._nodes = nodes
        self._clock = clock
        self._drivers: dict[str, Registered] = {}  # by driver name

    @property
    def drivers(self) -> Mapping[str, Registered]:
        return self._drivers

    def initialize(self) -> None:
        """The node's CSINode, made with no drivers when missing (``ApiCallFailed``)."""
        self._nodes.initialize()

    def register(self, socket: str) -> CsiDriverInfo:
        """The driver behind ``socket``, registered; else ``RegistrationFailed``."""
        client = self._plugins.registration(socket)
        try:
            try:
                info = self._dial(client)
            except CsiError as exc:
                raise RegistrationFailed(f"GetInfo failed: {exc}") from exc
            try:
                found = self._register(socket, info)
            except REFUSALS as exc:
                why = f"plugin {info.name!r} ({info.type}) not registered: {exc}"
                _notify(client, socket, False, why)
                raise RegistrationFailed(why) from exc
            _notify(client, socket, True, "")
            return found.driver
        finally:
            client.close()

    def deregister(self, socket: str) -> str | None:
        """The name of the driver registered from ``socket``, now deregistered; None if
        none was."""
        found = next((r for r in self._drivers.values() if r.socket == socket), None)
        if found is None:
            return None
        name = found.driver["name"]
        del self._drivers[name]
        try:
            self._nodes.uninstall(name)
        except (ApiCallFailed, NodeInfoRefused) as exc:
            log.error("CSI driver left on the node's objects driver=%s error=%s", name, exc)
        return name

    def healthy(self, socket: str) -> str:
        """Why the plugin on ``socket`` does not answer GetInfo; "" when it does."""
        client = self._plugins.registration(socket)
        try:
            client.get_info()
            return ""
        except CsiError as exc:
            return f"GetInfo failed: {exc}"
        finally:
            client.close()

    def prune(self) -> list[str]:
        """Take the drivers not registered now off the node's objects; their names."""
        return self._nodes.prune(set(self._drivers))

    def listed(self) -> list[CsiDriverInfo]:
        return [self._drivers[name].driver for name in sorted(self._drivers)]

    # --- inside ---------------------------------------------------------------------------

    def _dial(self, client: Registration) -> PluginInfo:
        """GetInfo, tried again while the socket does not answer, for up to ``DIAL_S``."""
        deadline = self._clock.monotonic() + DIAL_S
        while True:
            try:
                return client.get_info()
            except CsiError as exc:
                if exc.code != "UNAVAILABLE" or self._clock.monotonic() >= deadline:
                    raise
            self._clock.sleep(DIAL_RETRY_S)

    def _register(self, socket: str, info: PluginInfo) -> Registered:
        _check_type(info)
        version = highest_supported(info.versions)
        before = self._drivers.get(info.name)
        replaces(version, before.version if before is not None else None, info.name)
        endpoint = info.endpoint or socket
        node = self._node_info(endpoint)
        self._nodes.install(DriverOnNode(info.name, node.node_id, node.topology, node.max_volumes))
        driver = CsiDriverInfo(
            name=info.name,
            endpoint=endpoint,
            node_id=node.node_id,
            max_volumes=node.max_volumes,
            topology=dict(node.topology),
            versions=list(info.versions),
        )
        found = Registered(socket, driver, version)
        self._drivers[info.name] = found
        return found

    def _node_info(self, endpoint: str) -> NodeInfo:
        service = self._plugins.node_service(endpoint)
        try:
            node = service.node_info()
        finally:
            service.close()
        if not node.node_id:
            raise PluginRefused("NodeGetInfo gave an empty node id")
        return node


def _check_type(info: PluginInfo) -> None:
    if not info.name:
        raise PluginRefused("GetInfo gave an empty plugin name")
    if info.type == PluginType.CSI:
        return
    if info.type in (PluginType.DEVICE, PluginType.DRA):
        raise PluginRefused(
            f"plugin type {info.type} is not served by pkletd (it registers CSI drivers only)"
        )
    raise PluginRefused(f"no handler for plugin type {info.type!r}")


def _notify(client: Registration, socket: str, registered: bool, error: str) -> None:
    try:
        client.notify(registered, error)
    except CsiError as exc:
        log.warning("registration status not delivered socket=%s error=%s", socket, exc)
