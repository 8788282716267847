"""The pod-resources API (v1.PodResourcesLister) answering a real gRPC client on its unix
socket; the committed generated module matching proto/podresources/v1/api.proto; and
the pod-resources worker of a real pkletd."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import descriptor_pb2
from pkletd.workers.podresources import podresources_pb2 as pb
from pkletd.workers.podresources import servicer as podresources

from tests.harness.node import Pkletd, pod_manifest, wait_for
from tests.ipc.nodestats.nodestats_helpers import api_pod

REPO = Path(__file__).resolve().parents[3]
PROTO = REPO / "proto" / "podresources" / "v1" / "api.proto"


class Pods:
    def __init__(self, *pods: dict[str, Any]) -> None:
        self.pods = list(pods)

    def __call__(self) -> list[dict[str, Any]]:
        return self.pods


@pytest.fixture
def pods() -> Pods:
    return Pods(api_pod(), api_pod("Succeeded", name="done", uid="d0ne"))


@pytest.fixture
def channel(tmp_path: Path, pods: Pods) -> Iterator[grpc.Channel]:
    socket = tmp_path / "pod-resources" / "kubelet.sock"
    server = podresources.serve(socket, pods)
    assert stat.S_ISSOCK(socket.stat().st_mode)
    channel = grpc.insecure_channel(f"unix://{socket}")
    try:
        yield channel
    finally:
        channel.close()
        server.stop(None).wait()


def call(channel: grpc.Channel, method: str, request: Any, reply: Any) -> Any:
    rpc = channel.unary_unary(
        f"/v1.PodResourcesLister/{method}",
        request_serializer=type(request).SerializeToString,
        response_deserializer=reply.FromString,
    )
    return rpc(request, timeout=5)


def test_list_gives_the_active_pods_with_sidecars_and_containers(channel: grpc.Channel) -> None:
    reply = call(channel, "List", pb.ListPodResourcesRequest(), pb.ListPodResourcesResponse)
    [pod] = reply.pod_resources  # the Succeeded pod is not active
    assert (pod.name, pod.namespace) == ("web", "default")
    assert [c.name for c in pod.containers] == ["proxy", "app"]  # the sidecar, then the rest
    for container in pod.containers:
        assert list(container.devices) == list(container.cpu_ids) == list(container.memory) == []
        assert list(container.dynamic_resources) == []


def test_get_allocatable_resources_is_empty(channel: grpc.Channel) -> None:
    reply = call(
        channel,
        "GetAllocatableResources",
        pb.AllocatableResourcesRequest(),
        pb.AllocatableResourcesResponse,
    )
    assert reply == pb.AllocatableResourcesResponse()


def test_get_finds_a_pod_in_any_phase(channel: grpc.Channel) -> None:
    request = pb.GetPodResourcesRequest(pod_name="done", pod_namespace="default")
    reply = call(channel, "Get", request, pb.GetPodResourcesResponse)
    assert reply.pod_resources.name == "done"
    assert [c.name for c in reply.pod_resources.containers] == ["proxy", "app"]


def test_get_of_an_unknown_pod_is_not_found(channel: grpc.Channel) -> None:
    request = pb.GetPodResourcesRequest(pod_name="nope", pod_namespace="default")
    with pytest.raises(grpc.RpcError) as failed:
        call(channel, "Get", request, pb.GetPodResourcesResponse)
    assert failed.value.code() == grpc.StatusCode.NOT_FOUND
    assert failed.value.details() == "pod nope in namespace default not found"


def test_list_follows_the_pods_provider(channel: grpc.Channel, pods: Pods) -> None:
    pods.pods = []
    reply = call(channel, "List", pb.ListPodResourcesRequest(), pb.ListPodResourcesResponse)
    assert list(reply.pod_resources) == []


def test_a_stale_socket_is_replaced(tmp_path: Path) -> None:
    socket = tmp_path / "kubelet.sock"
    socket.write_text("left by an earlier run")
    server = podresources.serve(socket, Pods())
    try:
        assert stat.S_ISSOCK(socket.stat().st_mode)
    finally:
        server.stop(None).wait()


def test_generated_module_matches_the_proto(tmp_path: Path) -> None:
    """`make proto` output is committed: it must describe what the .proto says."""
    out = tmp_path / "set.pb"
    subprocess.run(
        [
            sys.executable,
            "-m",
            "grpc_tools.protoc",
            f"-I{REPO / 'proto'}",
            f"--descriptor_set_out={out}",
            str(PROTO),
        ],
        check=True,
        capture_output=True,
    )
    wanted = descriptor_pb2.FileDescriptorSet.FromString(out.read_bytes()).file[0]
    for message in wanted.message_type:  # protoc fills json_name in; generated code leaves it
        for field in message.field:
            field.ClearField("json_name")
    committed = descriptor_pb2.FileDescriptorProto.FromString(pb.DESCRIPTOR.serialized_pb)
    assert committed == wanted
    assert committed.name == "podresources/v1/api.proto"  # not CRI's v1/api.proto
    assert podresources.SERVICE == "v1.PodResourcesLister"


@pytest.mark.slow
def test_pkletd_serves_its_pods_on_the_root_dirs_socket(pkletd: Pkletd) -> None:
    """A device monitor's view: the pod-resources worker answers on
    ``<root-dir>/pod-resources/kubelet.sock`` with the node's running pods, follows a
    removal, and comes back on the same socket after being killed."""
    pkletd.start()
    pkletd.put("web", pod_manifest("web"))
    pkletd.wait_running("web")
    socket = pkletd.root_dir / "pod-resources" / "kubelet.sock"
    channel = grpc.insecure_channel(f"unix://{socket}")

    def listed() -> list[str]:
        reply = call(channel, "List", pb.ListPodResourcesRequest(), pb.ListPodResourcesResponse)
        return [p.name for p in reply.pod_resources]

    try:
        assert wait_for("the pod listed", lambda: listed() == [f"web-{pkletd.node}"])
        os.kill(pkletd.workers()["pod-resources"]["pid"], signal.SIGKILL)
        wait_for("pod-resources restarted", lambda: pkletd.workers()["pod-resources"]["restarts"])
        assert wait_for("listed again", lambda: _answers(listed) == [f"web-{pkletd.node}"])
        pkletd.remove("web")
        assert wait_for("the pod gone", lambda: _answers(listed) == [])
    finally:
        channel.close()


def _answers(method: Callable[[], list[str]]) -> list[str] | None:
    """The method's reply, or None while the server is restarting."""
    try:
        return method()
    except grpc.RpcError:
        return None
