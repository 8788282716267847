"""The committed modules generated from ``proto/csi`` and ``proto/pluginregistration``
describe what their .proto files say, with the real packages, names and numbers that
drivers and the kubelet's plugin watcher speak."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from google.protobuf import descriptor_pb2
from pkletd.ipc.csi import csi_pb2, pluginregistration_pb2

REPO = Path(__file__).resolve().parents[3]


def _clear_json_names(fields: Iterable[descriptor_pb2.FieldDescriptorProto]) -> None:
    for field in fields:
        field.ClearField("json_name")


def _clear_message_json_names(messages: Iterable[descriptor_pb2.DescriptorProto]) -> None:
    """protoc fills json_name in; generated code leaves it (nested messages too)."""
    for message in messages:
        _clear_json_names(message.field)
        _clear_message_json_names(message.nested_type)


@pytest.mark.parametrize(
    ("proto", "module"),
    [("csi/v1/csi.proto", csi_pb2), ("pluginregistration/v1/api.proto", pluginregistration_pb2)],
)
def test_generated_modules_match_their_protos(tmp_path: Path, proto: str, module: Any) -> None:
    """`make proto` output is committed: it must describe what the .proto says."""
    out = tmp_path / "set.pb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{REPO / 'proto'}",
            f"--descriptor_set_out={out}",
            str(REPO / "proto" / proto),
        ],
        check=True,
        capture_output=True,
    )
    wanted = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    _clear_message_json_names(wanted.message_type)
    _clear_json_names(wanted.extension)
    committed = descriptor_pb2.FileDescriptorProto.FromString(module.DESCRIPTOR.serialized_pb)
    assert committed == wanted


def test_the_wire_names_are_the_specs() -> None:
    """Real drivers and registrars answer these paths and numbers."""
    assert csi_pb2.DESCRIPTOR.services_by_name["Node"].full_name == "csi.v1.Node"
    assert csi_pb2.DESCRIPTOR.services_by_name["Identity"].full_name == "csi.v1.Identity"
    registration = pluginregistration_pb2.DESCRIPTOR.services_by_name["Registration"]
    assert registration.full_name == "pluginregistration.Registration"
    publish = csi_pb2.NodePublishVolumeRequest.DESCRIPTOR.fields_by_name
    assert (publish["target_path"].number, publish["volume_context"].number) == (4, 8)
    rpc = csi_pb2.NodeServiceCapability.RPC.Type
    assert rpc.Value("VOLUME_MOUNT_GROUP") == 6
    mount = csi_pb2.VolumeCapability.MountVolume.DESCRIPTOR.fields_by_name
    assert mount["volume_mount_group"].number == 3
