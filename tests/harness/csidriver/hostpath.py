"""What the host-path driver does for each Identity and Node call.

A volume is a directory, ``<data-dir>/<volume id>`` (the id quoted to one path
component), made when first staged or published. Staging bind-mounts it at the staging
path; publishing bind-mounts the staging path (or, with ``--no-stage``, the volume's
directory) at the target path, made by the driver, read-only when asked. An inline
ephemeral volume (volume context ``csi.storage.k8s.io/ephemeral: "true"``) gets a fresh
directory under ``<data-dir>/ephemeral/``, removed when it is unpublished. Every call is
idempotent, as the spec asks; arguments are checked as a real driver checks them.

Stats are statvfs of the path asked about. A test marks a volume abnormal by writing a
message to ``<data-dir>/<volume id>.abnormal``: its condition is then that message.
"""

from __future__ import annotations

import os
import shutil
import threading
from pathlib import Path
from typing import Any
from urllib.parse import quote

import grpc
from google.protobuf import wrappers_pb2
from pkletd.ipc.csi import csi_pb2 as pb

from tests.harness.csidriver import mounts
from tests.harness.csidriver.config import VERSION, DriverConfig

EPHEMERAL_KEY = "csi.storage.k8s.io/ephemeral"
_RPC = pb.NodeServiceCapability.RPC


class Refused(Exception):
    """A call the driver answers with a gRPC error."""

    def __init__(self, code: grpc.StatusCode, detail: str) -> None:
        super().__init__(detail)
        self.code = code
        self.detail = detail


def _require(value: Any, what: str) -> None:
    if not value:
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, f"{what} missing in request")


def _check_capability(request: Any) -> None:
    if not request.HasField("volume_capability"):
        raise Refused(grpc.StatusCode.INVALID_ARGUMENT, "Volume capability missing in request")
    if request.volume_capability.HasField("block"):
        raise Refused(grpc.StatusCode.FAILED_PRECONDITION, "block access is not supported")


class HostPath:
    """The driver's state is its data dir and the mount table: a restarted driver carries on."""

    def __init__(self, config: DriverConfig) -> None:
        self.config = config
        self._lock = threading.Lock()  # one volume operation at a time

    def _volume_dir(self, volume_id: str, ephemeral: bool = False) -> Path:
        name = quote(volume_id, safe="")
        return (
            self.config.data_dir / "ephemeral" / name if ephemeral else self.config.data_dir / name
        )

    # --- Identity -------------------------------------------------------------------------

    def GetPluginInfo(self, request: Any) -> Any:
        return pb.GetPluginInfoResponse(name=self.config.name, vendor_version=VERSION)

    def GetPluginCapabilities(self, request: Any) -> Any:
        kind = pb.PluginCapability.Service
        found = []
        if self.config.topology:
            service = kind(type=kind.VOLUME_ACCESSIBILITY_CONSTRAINTS)
            found.append(pb.PluginCapability(service=service))
        return pb.GetPluginCapabilitiesResponse(capabilities=found)

    def Probe(self, request: Any) -> Any:
        return pb.ProbeResponse(ready=wrappers_pb2.BoolValue(value=True))

    # --- Node: information ----------------------------------------------------------------

    def NodeGetCapabilities(self, request: Any) -> Any:
        types = [_RPC.GET_VOLUME_STATS, _RPC.VOLUME_CONDITION]
        if self.config.stage:
            types.insert(0, _RPC.STAGE_UNSTAGE_VOLUME)
        found = [pb.NodeServiceCapability(rpc=_RPC(type=t)) for t in types]
        return pb.NodeGetCapabilitiesResponse(capabilities=found)

    def NodeGetInfo(self, request: Any) -> Any:
        return pb.NodeGetInfoResponse(
            node_id=self.config.node_id,
            max_volumes_per_node=self.config.max_volumes,
            accessible_topology=pb.Topology(segments=self.config.topology),
        )

    def NodeGetVolumeStats(self, request: Any) -> Any:
        _require(request.volume_id, "Volume ID")
        _require(request.volume_path, "Volume path")
        path = Path(request.volume_path)
        if not path.exists():
            raise Refused(grpc.StatusCode.NOT_FOUND, f"volume path {path} does not exist")
        fs = os.statvfs(path)
        size = pb.VolumeUsage(
            available=fs.f_bavail * fs.f_frsize,
            total=fs.f_blocks * fs.f_frsize,
            used=(fs.f_blocks - fs.f_bfree) * fs.f_frsize,
            unit=pb.VolumeUsage.BYTES,
        )
        inodes = pb.VolumeUsage(
            available=fs.f_ffree,
            total=fs.f_files,
            used=fs.f_files - fs.f_ffree,
            unit=pb.VolumeUsage.INODES,
        )
        return pb.NodeGetVolumeStatsResponse(
            usage=[size, inodes], volume_condition=self._condition(request.volume_id)
        )

    def _condition(self, volume_id: str) -> Any:
        marker = self._volume_dir(volume_id).with_name(quote(volume_id, safe="") + ".abnormal")
        if marker.exists():
            return pb.VolumeCondition(abnormal=True, message=marker.read_text().strip())
        return pb.VolumeCondition(abnormal=False, message="volume is healthy")

    # --- Node: volumes --------------------------------------------------------------------

    def _no_stage(self) -> None:
        if not self.config.stage:
            raise Refused(grpc.StatusCode.UNIMPLEMENTED, "this driver does not stage volumes")

    def NodeStageVolume(self, request: Any) -> Any:
        self._no_stage()
        _require(request.volume_id, "Volume ID")
        _require(request.staging_target_path, "Staging target path")
        _check_capability(request)
        staging = Path(request.staging_target_path)
        with self._lock:
            if not mounts.is_mounted(staging):
                source = self._volume_dir(request.volume_id)
                source.mkdir(parents=True, exist_ok=True)
                staging.mkdir(parents=True, exist_ok=True)
                mounts.bind(source, staging, readonly=False)
        return pb.NodeStageVolumeResponse()

    def NodeUnstageVolume(self, request: Any) -> Any:
        self._no_stage()
        _require(request.volume_id, "Volume ID")
        _require(request.staging_target_path, "Staging target path")
        staging = Path(request.staging_target_path)
        with self._lock:
            while mounts.is_mounted(staging):
                mounts.unmount(staging)
        return pb.NodeUnstageVolumeResponse()

    def _publish_source(self, request: Any) -> Path:
        if request.volume_context.get(EPHEMERAL_KEY) == "true":
            return self._volume_dir(request.volume_id, ephemeral=True)
        if not self.config.stage:
            return self._volume_dir(request.volume_id)
        staging = Path(request.staging_target_path)
        if not request.staging_target_path:
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, "Staging target path not set")
        if not mounts.is_mounted(staging):
            detail = f"volume {request.volume_id} is not staged at {staging}"
            raise Refused(grpc.StatusCode.FAILED_PRECONDITION, detail)
        return staging

    def NodePublishVolume(self, request: Any) -> Any:
        _require(request.volume_id, "Volume ID")
        _require(request.target_path, "Target path")
        _check_capability(request)
        target = Path(request.target_path)
        with self._lock:
            options = mounts.mount_options(target)
            if options is not None:
                if ("ro" in options) != request.readonly:
                    detail = f"{target} is already published with readonly={not request.readonly}"
                    raise Refused(grpc.StatusCode.ALREADY_EXISTS, detail)
                return pb.NodePublishVolumeResponse()
            source = self._publish_source(request)
            source.mkdir(parents=True, exist_ok=True)
            target.mkdir(parents=True, exist_ok=True)
            mounts.bind(source, target, request.readonly)
        return pb.NodePublishVolumeResponse()

    def NodeUnpublishVolume(self, request: Any) -> Any:
        _require(request.volume_id, "Volume ID")
        _require(request.target_path, "Target path")
        target = Path(request.target_path)
        with self._lock:
            while mounts.is_mounted(target):
                mounts.unmount(target)
            if target.is_dir():
                target.rmdir()
            shutil.rmtree(self._volume_dir(request.volume_id, ephemeral=True), ignore_errors=True)
        return pb.NodeUnpublishVolumeResponse()
