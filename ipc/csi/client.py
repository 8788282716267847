"""The calls pkletd makes to CSI drivers and to plugin registration sockets.

``CsiClient`` speaks a driver's Identity and Node services (``csi.v1``) on its unix socket;
``RegistrationClient`` speaks the kubelet's plugin registration API
(``pluginregistration.Registration``) on a socket in ``<root-dir>/plugins_registry``. Both
keep one gRPC channel, give every call a deadline (the kubelet's where it has one) and
turn a failed call into ``CsiError`` with the gRPC status code's name.

The only module that imports the generated ``csi_pb2`` and ``pluginregistration_pb2``;
the stubs are built by hand from their descriptors, so no generated ``_grpc`` module is
needed. Secrets passed in are sent and never logged.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import ModuleType
from typing import Any

import grpc
from pkletd.ipc.csi import csi_pb2 as pb
from pkletd.ipc.csi import pluginregistration_pb2 as regpb

# Deadlines, in seconds: the kubelet's csiTimeout for stage/publish and their undoing, and
# for NodeGetInfo at registration; its registration calls (GetInfo 1 s, the status 5 s).
VOLUME_TIMEOUT = 120.0
NODE_INFO_TIMEOUT = 120.0
QUERY_TIMEOUT = 15.0
GET_INFO_TIMEOUT = 1.0
NOTIFY_TIMEOUT = 5.0

# A driver or registrar that restarts (a new socket at the same path) is reconnected to
# within a second: calls fail fast (UNAVAILABLE) meanwhile and their callers retry, where
# gRPC's default back-off would keep the channel down for up to two minutes.
CHANNEL_OPTIONS = (
    ("grpc.initial_reconnect_backoff_ms", 100),
    ("grpc.min_reconnect_backoff_ms", 100),
    ("grpc.max_reconnect_backoff_ms", 1000),
)

_MODE = pb.VolumeCapability.AccessMode.Mode
_RPC_TYPE = pb.NodeServiceCapability.RPC.Type


class NodeCapability(StrEnum):
    """The Node service capabilities pkletd acts on (CSI's RPC type names)."""

    STAGE_UNSTAGE_VOLUME = "STAGE_UNSTAGE_VOLUME"
    GET_VOLUME_STATS = "GET_VOLUME_STATS"
    VOLUME_CONDITION = "VOLUME_CONDITION"
    VOLUME_MOUNT_GROUP = "VOLUME_MOUNT_GROUP"


class CsiError(RuntimeError):
    """A call to a driver or a registration socket failed; ``code`` is the gRPC status code
    name (``NOT_FOUND``, ``UNAVAILABLE``, ``DEADLINE_EXCEEDED``...)."""

    def __init__(self, method: str, code: str, detail: str) -> None:
        super().__init__(f"{method}: {code}: {detail}")
        self.method = method
        self.code = code
        self.detail = detail


@dataclass(frozen=True, slots=True)
class VolumeAccess:
    """How a volume is to be used (CSI's ``VolumeCapability``): a filesystem of ``fs_type``
    mounted with ``mount_flags`` (and ``mount_group``, a pod's fsGroup, for drivers with
    VOLUME_MOUNT_GROUP), or a raw device when ``block``; ``access_mode`` is a CSI
    ``AccessMode.Mode`` name."""

    fs_type: str = ""
    mount_flags: tuple[str, ...] = ()
    access_mode: str = "SINGLE_NODE_WRITER"
    block: bool = False
    mount_group: str = ""

    def __post_init__(self) -> None:
        if self.access_mode not in _MODE.keys() or self.access_mode == "UNKNOWN":
            raise ValueError(f"unknown CSI access mode {self.access_mode!r}")


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """A driver's ``NodeGetInfo``: its id for this node, how many of its volumes the node
    may hold (0: no limit) and the node's topology segments."""

    node_id: str
    max_volumes: int
    topology: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class VolumeStats:
    """A volume's ``NodeGetVolumeStats``: bytes and inodes (0 where the driver gave none),
    and its condition (``abnormal`` with the driver's ``message``)."""

    available_bytes: int = 0
    capacity_bytes: int = 0
    used_bytes: int = 0
    inodes_free: int = 0
    inodes: int = 0
    inodes_used: int = 0
    abnormal: bool = False
    message: str = ""


@dataclass(frozen=True, slots=True)
class PluginInfo:
    """What a registration socket's ``GetInfo`` says: the plugin type (``CSIPlugin``...),
    its name, its own socket (empty: the registration socket) and API versions."""

    type: str
    name: str
    endpoint: str
    versions: tuple[str, ...]


def grpc_target(endpoint: str) -> str:
    """A socket path or a ``unix://`` address as a gRPC target."""
    if endpoint.startswith("unix:"):
        return endpoint
    return f"unix://{endpoint}" if endpoint.startswith("/") else f"unix:{endpoint}"


def volume_capability(access: VolumeAccess) -> Any:
    """``access`` as a ``csi.v1.VolumeCapability``."""
    mode = pb.VolumeCapability.AccessMode(mode=_MODE.Value(access.access_mode))
    if access.block:
        return pb.VolumeCapability(block=pb.VolumeCapability.BlockVolume(), access_mode=mode)
    mount = pb.VolumeCapability.MountVolume(
        fs_type=access.fs_type,
        mount_flags=list(access.mount_flags),
        volume_mount_group=access.mount_group,
    )
    return pb.VolumeCapability(mount=mount, access_mode=mode)


def volume_stats(reply: Any) -> VolumeStats:
    """A ``NodeGetVolumeStatsResponse`` as ``VolumeStats``."""
    usage = {entry.unit: entry for entry in reply.usage}
    size = usage.get(pb.VolumeUsage.BYTES, pb.VolumeUsage())
    inodes = usage.get(pb.VolumeUsage.INODES, pb.VolumeUsage())
    condition = reply.volume_condition  # unset: normal
    return VolumeStats(
        available_bytes=size.available,
        capacity_bytes=size.total,
        used_bytes=size.used,
        inodes_free=inodes.available,
        inodes=inodes.total,
        inodes_used=inodes.used,
        abnormal=condition.abnormal,
        message=condition.message,
    )


class _Channel:
    """One gRPC channel and the unary methods of the services on it."""

    def __init__(self, endpoint: str, module: ModuleType) -> None:
        self.endpoint = endpoint
        self._module = module
        self._channel = grpc.insecure_channel(grpc_target(endpoint), CHANNEL_OPTIONS)
        self._stubs: dict[str, grpc.UnaryUnaryMultiCallable[Any, Any]] = {}

    def _stub(self, service: str, method: str) -> grpc.UnaryUnaryMultiCallable[Any, Any]:
        if method not in self._stubs:
            described = self._module.DESCRIPTOR.services_by_name[service]
            rpc = described.methods_by_name[method]
            self._stubs[method] = self._channel.unary_unary(
                f"/{described.full_name}/{method}",
                request_serializer=getattr(self._module, rpc.input_type.name).SerializeToString,
                response_deserializer=getattr(self._module, rpc.output_type.name).FromString,
            )
        return self._stubs[method]

    def call(self, service: str, method: str, request: Any, timeout: float) -> Any:
        try:
            return self._stub(service, method)(request, timeout=timeout)
        except grpc.RpcError as exc:
            code: grpc.StatusCode = exc.code()
            detail: str = exc.details() or ""
            raise CsiError(method, code.name, detail) from exc

    def close(self) -> None:
        self._channel.close()


Strings = Mapping[str, str]


class CsiClient:
    """A CSI driver's Identity and Node services on ``endpoint`` (a socket path or a
    ``unix://`` address). Volume calls are idempotent on the driver's side: a call that
    failed or timed out may be made again."""

    def __init__(self, endpoint: str) -> None:
        self.endpoint = endpoint
        self._channel = _Channel(endpoint, pb)

    def _identity(self, method: str, request: Any, timeout: float = QUERY_TIMEOUT) -> Any:
        return self._channel.call("Identity", method, request, timeout)

    def _node(self, method: str, request: Any, timeout: float = VOLUME_TIMEOUT) -> Any:
        return self._channel.call("Node", method, request, timeout)

    def plugin_info(self) -> tuple[str, str]:
        """The driver's name and vendor version."""
        reply = self._identity("GetPluginInfo", pb.GetPluginInfoRequest())
        return reply.name, reply.vendor_version

    def node_info(self) -> NodeInfo:
        reply = self._node("NodeGetInfo", pb.NodeGetInfoRequest(), NODE_INFO_TIMEOUT)
        return NodeInfo(
            node_id=reply.node_id,
            max_volumes=reply.max_volumes_per_node,
            topology=dict(reply.accessible_topology.segments),
        )

    def node_capabilities(self) -> frozenset[str]:
        """The Node service's RPC capability names (``NodeCapability`` has those pkletd
        acts on); values this proto does not know are left out."""
        reply = self._node("NodeGetCapabilities", pb.NodeGetCapabilitiesRequest(), QUERY_TIMEOUT)
        known = _RPC_TYPE.DESCRIPTOR.values_by_number
        return frozenset(
            known[entry.rpc.type].name
            for entry in reply.capabilities
            if entry.HasField("rpc") and entry.rpc.type in known
        )

    def stage_volume(
        self,
        volume_id: str,
        staging_path: str,
        capability: VolumeAccess,
        publish_context: Strings,
        volume_context: Strings,
        secrets: Strings,
    ) -> None:
        request = pb.NodeStageVolumeRequest(
            volume_id=volume_id,
            publish_context=publish_context,
            staging_target_path=staging_path,
            volume_capability=volume_capability(capability),
            secrets=secrets,
            volume_context=volume_context,
        )
        self._node("NodeStageVolume", request)

    def unstage_volume(self, volume_id: str, staging_path: str) -> None:
        request = pb.NodeUnstageVolumeRequest(volume_id=volume_id, staging_target_path=staging_path)
        self._node("NodeUnstageVolume", request)

    def publish_volume(
        self,
        volume_id: str,
        staging_path: str,
        target_path: str,
        capability: VolumeAccess,
        readonly: bool,
        publish_context: Strings,
        volume_context: Strings,
        secrets: Strings,
    ) -> None:
        """Publish at ``target_path``; ``staging_path`` is "" for a driver without
        STAGE_UNSTAGE_VOLUME."""
        request = pb.NodePublishVolumeRequest(
            volume_id=volume_id,
            publish_context=publish_context,
            staging_target_path=staging_path,
            target_path=target_path,
            volume_capability=volume_capability(capability),
            readonly=readonly,
            secrets=secrets,
            volume_context=volume_context,
        )
        self._node("NodePublishVolume", request)

    def unpublish_volume(self, volume_id: str, target_path: str) -> None:
        request = pb.NodeUnpublishVolumeRequest(volume_id=volume_id, target_path=target_path)
        self._node("NodeUnpublishVolume", request)

    def volume_stats(self, volume_id: str, volume_path: str) -> VolumeStats:
        request = pb.NodeGetVolumeStatsRequest(volume_id=volume_id, volume_path=volume_path)
        return volume_stats(self._node("NodeGetVolumeStats", request))

    def close(self) -> None:
        self._channel.close()


class RegistrationClient:
    """A plugin's registration socket (``pluginregistration.Registration``), as the
    kubelet's plugin watcher calls it."""

    def __init__(self, socket: str) -> None:
        self.socket = socket
        self._channel = _Channel(socket, regpb)

    def get_info(self, timeout: float = GET_INFO_TIMEOUT) -> PluginInfo:
        reply = self._channel.call("Registration", "GetInfo", regpb.InfoRequest(), timeout)
        return PluginInfo(
            type=reply.type,
            name=reply.name,
            endpoint=reply.endpoint,
            versions=tuple(reply.supported_versions),
        )

    def notify(self, registered: bool, error: str = "", timeout: float = NOTIFY_TIMEOUT) -> None:
        """Tell the plugin whether it was registered and, if not, why."""
        status = regpb.RegistrationStatus(plugin_registered=registered, error=error)
        self._channel.call("Registration", "NotifyRegistrationStatus", status, timeout)

    def close(self) -> None:
        self._channel.close()
