"""The private containerd harness runs real pods (end-to-end on containerd + runc + CNI)."""

from __future__ import annotations

import ipaddress
import uuid
from pathlib import Path
from typing import Any

import pytest
from cri_api.v1 import api_pb2

from tests.harness.containerd import (
    POD_SUBNET,
    PrivateContainerd,
    cri_channel,
    image_service,
    list_pod_sandboxes,
    remove_all_pods,
    runtime_service,
    wait_for,
)
from tests.harness.images import BUSYBOX_IMAGE, PAUSE_IMAGE

pytestmark = pytest.mark.slow

RPC_TIMEOUT = 60.0


def pod_config(name: str, log_dir: Path, host_network: bool = False) -> Any:
    network = api_pb2.NamespaceMode.NODE if host_network else api_pb2.NamespaceMode.POD
    return api_pb2.PodSandboxConfig(
        metadata=api_pb2.PodSandboxMetadata(
            name=name, uid=uuid.uuid4().hex, namespace="pkletd-test", attempt=0
        ),
        hostname="" if host_network else name,  # a host-network pod shares the host's UTS ns
        log_directory=str(log_dir),
        linux=api_pb2.LinuxPodSandboxConfig(
            security_context=api_pb2.LinuxSandboxSecurityContext(
                namespace_options=api_pb2.NamespaceOption(network=network)
            )
        ),
    )


def sleeper_config() -> Any:
    return api_pb2.ContainerConfig(
        metadata=api_pb2.ContainerMetadata(name="sleeper", attempt=0),
        image=api_pb2.ImageSpec(image=BUSYBOX_IMAGE),
        command=["sleep", "3600"],
        log_path="sleeper.log",
        linux=api_pb2.LinuxContainerConfig(),
    )


def run_pod(rt: Any, config: Any) -> str:
    req = api_pb2.RunPodSandboxRequest(config=config)
    pod_id: str = rt.RunPodSandbox(req, timeout=RPC_TIMEOUT).pod_sandbox_id
    return pod_id


def start_sleeper(rt: Any, pod_id: str, pod: Any) -> str:
    req = api_pb2.CreateContainerRequest(
        pod_sandbox_id=pod_id, config=sleeper_config(), sandbox_config=pod
    )
    ctr_id: str = rt.CreateContainer(req, timeout=RPC_TIMEOUT).container_id
    rt.StartContainer(api_pb2.StartContainerRequest(container_id=ctr_id), timeout=RPC_TIMEOUT)
    return ctr_id


def wait_running(rt: Any, ctr_id: str) -> None:
    def state() -> Any:
        req = api_pb2.ContainerStatusRequest(container_id=ctr_id)
        return rt.ContainerStatus(req, timeout=RPC_TIMEOUT).status.state

    wait_for(
        lambda: state() == api_pb2.ContainerState.CONTAINER_RUNNING,
        30,
        f"container {ctr_id} to be running",
        lambda: f"last state: {api_pb2.ContainerState.Name(state())}",
    )


def pod_ip(rt: Any, pod_id: str) -> str:
    req = api_pb2.PodSandboxStatusRequest(pod_sandbox_id=pod_id)
    ip: str = rt.PodSandboxStatus(req, timeout=RPC_TIMEOUT).status.network.ip
    return ip


def test_images_are_listed_by_cri(containerd: PrivateContainerd) -> None:
    with cri_channel(containerd.address) as channel:
        images = image_service(channel).ListImages(api_pb2.ListImagesRequest(), timeout=30).images
    tags = {tag for image in images for tag in image.repo_tags}
    assert {BUSYBOX_IMAGE, PAUSE_IMAGE} <= tags


def test_pods_run_with_cni_and_host_network(
    clean_runtime: PrivateContainerd, tmp_path: Path
) -> None:
    address = clean_runtime.address
    with cri_channel(address) as channel:
        rt = runtime_service(channel)

        cni_pod = pod_config("cni-pod", tmp_path / "cni-pod")
        cni_id = run_pod(rt, cni_pod)
        ip = pod_ip(rt, cni_id)
        assert ip, "CNI pod got no IP"
        assert ipaddress.ip_address(ip) in ipaddress.ip_network(POD_SUBNET)
        wait_running(rt, start_sleeper(rt, cni_id, cni_pod))

        host_pod = pod_config("host-pod", tmp_path / "host-pod", host_network=True)
        host_id = run_pod(rt, host_pod)
        wait_running(rt, start_sleeper(rt, host_id, host_pod))

    assert {p.id for p in list_pod_sandboxes(address)} == {cni_id, host_id}
    remove_all_pods(address)
    assert list_pod_sandboxes(address) == []
