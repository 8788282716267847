"""pkletd's CSI and plugin registration clients against in-process gRPC servers: what
they send (every field a driver reads), what they make of the replies, and how a failed
or missing driver shows."""

from __future__ import annotations

import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import grpc
import pytest
from pkletd.ipc.csi import csi_pb2 as pb
from pkletd.ipc.csi import pluginregistration_pb2 as regpb
from pkletd.ipc.csi.client import (
    CsiClient,
    CsiError,
    NodeCapability,
    NodeInfo,
    PluginInfo,
    RegistrationClient,
    VolumeAccess,
    VolumeStats,
)

Handler = Callable[[Any, grpc.ServicerContext], Any]


class FakeDriver:
    """Serves the methods of ``module``'s services named in ``replies`` (each a reply, or a
    handler function) and records the requests it got, by method name."""

    def __init__(self, module: Any, replies: dict[str, Any]) -> None:
        self.module = module
        self.replies = replies
        self.requests: dict[str, list[Any]] = {}

    def _answer(self, method: str) -> Handler:
        def answer(request: Any, context: grpc.ServicerContext) -> Any:
            self.requests.setdefault(method, []).append(request)
            reply = self.replies[method]
            return reply(request, context) if callable(reply) else reply

        return answer

    def handlers(self) -> list[grpc.GenericRpcHandler]:
        found = []
        for service in self.module.DESCRIPTOR.services_by_name.values():
            methods = {
                rpc.name: grpc.unary_unary_rpc_method_handler(
                    self._answer(rpc.name),
                    request_deserializer=getattr(self.module, rpc.input_type.name).FromString,
                    response_serializer=getattr(
                        self.module, rpc.output_type.name
                    ).SerializeToString,
                )
                for rpc in service.methods
                if rpc.name in self.replies
            }
            found.append(grpc.method_handlers_generic_handler(service.full_name, methods))
        return found


@pytest.fixture
def sockets() -> Iterator[Path]:
    """A short directory for sockets (a unix socket path has at most 107 bytes)."""
    with tempfile.TemporaryDirectory(prefix="csi-", dir="/tmp") as name:
        yield Path(name)


@pytest.fixture
def serve(sockets: Path) -> Iterator[Callable[[FakeDriver], str]]:
    servers: list[grpc.Server] = []

    def start(driver: FakeDriver) -> str:
        path = sockets / f"{len(servers)}.sock"
        server = grpc.server(ThreadPoolExecutor(max_workers=2))
        server.add_generic_rpc_handlers(driver.handlers())
        assert server.add_insecure_port(f"unix://{path}") != 0
        server.start()
        servers.append(server)
        return str(path)

    yield start
    for server in servers:
        server.stop(None).wait()


@pytest.fixture
def client_for(serve: Callable[[FakeDriver], str]) -> Iterator[Callable[[FakeDriver], CsiClient]]:
    clients: list[CsiClient] = []

    def make(driver: FakeDriver) -> CsiClient:
        clients.append(CsiClient(serve(driver)))
        return clients[-1]

    yield make
    for client in clients:
        client.close()


def csi(replies: dict[str, Any]) -> FakeDriver:
    return FakeDriver(pb, replies)


def test_identity_and_node_info(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    driver = csi(
        {
            "GetPluginInfo": pb.GetPluginInfoResponse(
                name="hostpath.csi.test", vendor_version="1.2"
            ),
            "NodeGetInfo": pb.NodeGetInfoResponse(
                node_id="node-a",
                max_volumes_per_node=7,
                accessible_topology=pb.Topology(segments={"topology.test/zone": "z1"}),
            ),
        }
    )
    client = client_for(driver)
    assert client.plugin_info() == ("hostpath.csi.test", "1.2")
    assert client.node_info() == NodeInfo("node-a", 7, {"topology.test/zone": "z1"})


def test_node_info_without_topology_or_limit(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    client = client_for(csi({"NodeGetInfo": pb.NodeGetInfoResponse(node_id="n")}))
    assert client.node_info() == NodeInfo("n", 0, {})


def test_capabilities_are_the_rpc_type_names(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    rpc = pb.NodeServiceCapability.RPC
    reply = pb.NodeGetCapabilitiesResponse(
        capabilities=[
            pb.NodeServiceCapability(rpc=rpc(type=rpc.STAGE_UNSTAGE_VOLUME)),
            pb.NodeServiceCapability(rpc=rpc(type=rpc.VOLUME_MOUNT_GROUP)),
            pb.NodeServiceCapability(rpc=rpc(type=99)),  # a newer spec's: left out
            pb.NodeServiceCapability(),  # no rpc set
        ]
    )
    capabilities = client_for(csi({"NodeGetCapabilities": reply})).node_capabilities()
    assert capabilities == {"STAGE_UNSTAGE_VOLUME", "VOLUME_MOUNT_GROUP"}
    assert NodeCapability.STAGE_UNSTAGE_VOLUME in capabilities
    assert NodeCapability.GET_VOLUME_STATS not in capabilities


def test_stage_sends_what_a_driver_reads(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    driver = csi({"NodeStageVolume": pb.NodeStageVolumeResponse()})
    access = VolumeAccess("ext4", ("noatime", "ro"), "MULTI_NODE_READER_ONLY", mount_group="2000")
    client_for(driver).stage_volume(
        "vol-1", "/st/globalmount", access, {"attached": "yes"}, {"k": "v"}, {"user": "u"}
    )
    [request] = driver.requests["NodeStageVolume"]
    assert (request.volume_id, request.staging_target_path) == ("vol-1", "/st/globalmount")
    assert (dict(request.publish_context), dict(request.volume_context)) == (
        {"attached": "yes"},
        {"k": "v"},
    )
    assert dict(request.secrets) == {"user": "u"}
    mount = request.volume_capability.mount
    assert (mount.fs_type, list(mount.mount_flags), mount.volume_mount_group) == (
        "ext4",
        ["noatime", "ro"],
        "2000",
    )
    mode = request.volume_capability.access_mode.mode
    assert mode == pb.VolumeCapability.AccessMode.MULTI_NODE_READER_ONLY


def test_publish_a_block_volume_read_only(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    driver = csi({"NodePublishVolume": pb.NodePublishVolumeResponse()})
    access = VolumeAccess(block=True)
    client_for(driver).publish_volume("vol-2", "", "/pods/p/mount", access, True, {}, {}, {})
    [request] = driver.requests["NodePublishVolume"]
    assert (request.volume_id, request.staging_target_path, request.target_path) == (
        "vol-2",
        "",
        "/pods/p/mount",
    )
    assert request.readonly
    assert request.volume_capability.WhichOneof("access_type") == "block"
    mode = request.volume_capability.access_mode.mode
    assert mode == pb.VolumeCapability.AccessMode.SINGLE_NODE_WRITER


def test_undoing_names_volume_and_path(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    driver = csi(
        {
            "NodeUnpublishVolume": pb.NodeUnpublishVolumeResponse(),
            "NodeUnstageVolume": pb.NodeUnstageVolumeResponse(),
        }
    )
    client = client_for(driver)
    client.unpublish_volume("vol-3", "/pods/p/mount")
    client.unstage_volume("vol-3", "/st/globalmount")
    [unpublish] = driver.requests["NodeUnpublishVolume"]
    [unstage] = driver.requests["NodeUnstageVolume"]
    assert (unpublish.volume_id, unpublish.target_path) == ("vol-3", "/pods/p/mount")
    assert (unstage.volume_id, unstage.staging_target_path) == ("vol-3", "/st/globalmount")


def test_volume_stats_and_condition(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    reply = pb.NodeGetVolumeStatsResponse(
        usage=[
            pb.VolumeUsage(available=10, total=30, used=20, unit=pb.VolumeUsage.BYTES),
            pb.VolumeUsage(available=4, total=6, used=2, unit=pb.VolumeUsage.INODES),
        ],
        volume_condition=pb.VolumeCondition(abnormal=True, message="disk is failing"),
    )
    driver = csi({"NodeGetVolumeStats": reply})
    stats = client_for(driver).volume_stats("vol-4", "/pods/p/mount")
    assert stats == VolumeStats(10, 30, 20, 4, 6, 2, True, "disk is failing")
    [request] = driver.requests["NodeGetVolumeStats"]
    assert (request.volume_id, request.volume_path) == ("vol-4", "/pods/p/mount")


def test_stats_without_inodes_or_condition(client_for: Callable[[FakeDriver], CsiClient]) -> None:
    reply = pb.NodeGetVolumeStatsResponse(
        usage=[pb.VolumeUsage(total=100, unit=pb.VolumeUsage.BYTES)]
    )
    stats = client_for(csi({"NodeGetVolumeStats": reply})).volume_stats("v", "/p")
    assert stats == VolumeStats(capacity_bytes=100)
    assert not stats.abnormal


def test_a_driver_error_keeps_method_code_and_detail(
    client_for: Callable[[FakeDriver], CsiClient],
) -> None:
    def missing(request: Any, context: grpc.ServicerContext) -> Any:
        context.abort(grpc.StatusCode.NOT_FOUND, f"no volume at {request.volume_path}")

    client = client_for(csi({"NodeGetVolumeStats": missing}))
    with pytest.raises(CsiError) as failed:
        client.volume_stats("vol-5", "/gone")
    assert (failed.value.method, failed.value.code, failed.value.detail) == (
        "NodeGetVolumeStats",
        "NOT_FOUND",
        "no volume at /gone",
    )
    assert str(failed.value) == "NodeGetVolumeStats: NOT_FOUND: no volume at /gone"


def test_a_missing_driver_is_unavailable(sockets: Path) -> None:
    client = CsiClient(f"unix://{sockets / 'nobody.sock'}")
    try:
        with pytest.raises(CsiError) as failed:
            client.plugin_info()
        assert (failed.value.method, failed.value.code) == ("GetPluginInfo", "UNAVAILABLE")
    finally:
        client.close()


def test_a_unix_address_reaches_the_driver(serve: Callable[[FakeDriver], str]) -> None:
    path = serve(csi({"GetPluginInfo": pb.GetPluginInfoResponse(name="d", vendor_version="1")}))
    client = CsiClient(f"unix://{path}")
    try:
        assert client.plugin_info() == ("d", "1")
    finally:
        client.close()


def test_an_unknown_access_mode_is_refused() -> None:
    with pytest.raises(ValueError, match="SINGLE_NODE_EVERYTHING"):
        VolumeAccess("ext4", (), "SINGLE_NODE_EVERYTHING")
    with pytest.raises(ValueError, match="UNKNOWN"):
        VolumeAccess(access_mode="UNKNOWN")


# --- registration ---------------------------------------------------------------------------


def test_registration_info_and_status(serve: Callable[[FakeDriver], str]) -> None:
    info = regpb.PluginInfo(
        type="CSIPlugin",
        name="hostpath.csi.test",
        endpoint="/var/lib/kubelet/plugins/hostpath.csi.test/csi.sock",
        supported_versions=["1.0.0"],
    )
    registrar = FakeDriver(
        regpb,
        {"GetInfo": info, "NotifyRegistrationStatus": regpb.RegistrationStatusResponse()},
    )
    client = RegistrationClient(serve(registrar))
    try:
        assert client.get_info() == PluginInfo(
            "CSIPlugin",
            "hostpath.csi.test",
            "/var/lib/kubelet/plugins/hostpath.csi.test/csi.sock",
            ("1.0.0",),
        )
        client.notify(False, "no supported version")
        client.notify(True)
    finally:
        client.close()
    sent = [(s.plugin_registered, s.error) for s in registrar.requests["NotifyRegistrationStatus"]]
    assert sent == [(False, "no supported version"), (True, "")]


def test_a_registrar_that_does_not_answer_times_out(serve: Callable[[FakeDriver], str]) -> None:
    released = threading.Event()

    def stuck(request: Any, context: grpc.ServicerContext) -> Any:
        released.wait(10)
        return regpb.PluginInfo()

    client = RegistrationClient(serve(FakeDriver(regpb, {"GetInfo": stuck})))
    try:
        with pytest.raises(CsiError) as failed:
            client.get_info(timeout=0.2)
        assert (failed.value.method, failed.value.code) == ("GetInfo", "DEADLINE_EXCEEDED")
    finally:
        released.set()
        client.close()
