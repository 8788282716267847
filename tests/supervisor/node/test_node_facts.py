"""The Node the parent registers: what ``kubectl describe node`` shows a user."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

from pkletd.ipc.apimodel.labels import Taint
from pkletd.supervisor import config
from pkletd.supervisor.node.facts import (
    CMAD_ANNOTATION,
    MachineFacts,
    compose_node,
    container_runtime_version,
)
from pkletd.supervisor.workeroptions import node_lease_options

GiB = 2**30
MEM_TOTAL_KB = 16318500  # as /proc/meminfo says it
DISK = 107374182400  # 100Gi
MACHINE = MachineFacts(
    cpus=2,
    memory=MEM_TOTAL_KB * 1024,
    ephemeral_storage=DISK,
    hugepages=((2 * 2**20, 0), (GiB, 0)),
    machine_id="3d1219c7c4c5404aaa1f6d2a48adfda4",
    system_uuid="ec2a1b4e-0000-4c4c-8000-000000000001",
    boot_id="ce137d34-5749-48f9-921f-644507ea1b11",
    kernel_version="6.1.0-18-amd64",
    os_image="Debian GNU/Linux 12 (bookworm)",
    architecture="amd64",
)
RUNTIME = "containerd://1.6.20"


def kubelet_config(**changes: object) -> config.KubeletConfig:
    defaults = config.load(argparse.Namespace()).config
    return dataclasses.replace(defaults, node_name="node-a", **changes)  # type: ignore[arg-type]


def node(**changes: object) -> dict[str, object]:
    return compose_node(kubelet_config(**changes), MACHINE, "10.0.0.7", RUNTIME)


def test_metadata_has_the_kubelets_labels_and_annotation() -> None:
    found = node()
    meta = found["metadata"]
    assert found["apiVersion"] == "v1" and found["kind"] == "Node"
    assert meta["name"] == "node-a"  # type: ignore[index]
    assert meta["labels"] == {  # type: ignore[index]
        "kubernetes.io/hostname": "node-a",
        "kubernetes.io/os": "linux",
        "kubernetes.io/arch": "amd64",
        "beta.kubernetes.io/os": "linux",
        "beta.kubernetes.io/arch": "amd64",
    }
    assert meta["annotations"] == {CMAD_ANNOTATION: "true"}  # type: ignore[index]


def test_node_labels_are_added_and_win_over_defaults() -> None:
    labels = node(node_labels=(("tier", "edge"), ("kubernetes.io/hostname", "edge-1")))["metadata"][
        "labels"
    ]  # type: ignore[index]
    assert labels["tier"] == "edge"
    assert labels["kubernetes.io/hostname"] == "edge-1"


def test_taints_come_from_register_with_taints() -> None:
    taints = (Taint("dedicated", "gpu", "NoSchedule"), Taint("edge", "", "NoExecute"))
    assert node(register_with_taints=taints)["spec"] == {
        "taints": [
            {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"},
            {"key": "edge", "effect": "NoExecute"},
        ]
    }
    assert node()["spec"] == {}


def test_capacity_is_the_machine_in_the_kubelets_units() -> None:
    status = node()["status"]
    assert status["capacity"] == {  # type: ignore[index]
        "cpu": "2",
        "memory": "16318500Ki",
        "pods": "110",
        "ephemeral-storage": "100Gi",
        "hugepages-2Mi": "0",
        "hugepages-1Gi": "0",
    }


def test_allocatable_keeps_the_default_eviction_reserve() -> None:
    allocatable = node()["status"]["allocatable"]  # type: ignore[index]
    assert allocatable["cpu"] == "2"
    assert allocatable["memory"] == f"{MEM_TOTAL_KB - 100 * 1024}Ki"  # minus 100Mi
    # 10% of the disk, as the kubelet computes it (a float32 fraction, truncated); the
    # API server gives a bare integer back in decimal SI.
    assert allocatable["ephemeral-storage"] == "96636764k"
    assert allocatable["pods"] == "110"


def test_allocatable_subtracts_reserved_and_configured_eviction() -> None:
    allocatable = node(
        system_reserved=(("cpu", "100m"), ("memory", "512Mi")),
        kube_reserved=(("cpu", "0.5"), ("memory", "256Mi"), ("ephemeral-storage", "1Gi")),
        eviction_hard=(("memory.available", "200Mi"), ("nodefs.available", "5Gi")),
    )["status"]["allocatable"]  # type: ignore[index]
    assert allocatable["cpu"] == "1400m"
    assert allocatable["memory"] == f"{MEM_TOTAL_KB - (512 + 256 + 200) * 1024}Ki"
    assert allocatable["ephemeral-storage"] == "94Gi"


def test_hugepages_count_and_leave_allocatable_memory() -> None:
    machine = dataclasses.replace(MACHINE, hugepages=((2 * 2**20, 512), (GiB, 1)))
    status = compose_node(kubelet_config(), machine, "10.0.0.7", RUNTIME)["status"]
    assert status["capacity"]["hugepages-2Mi"] == "1Gi"  # type: ignore[index]
    assert status["capacity"]["hugepages-1Gi"] == "1Gi"  # type: ignore[index]
    assert status["allocatable"]["memory"] == f"{MEM_TOTAL_KB - 100 * 1024 - 2 * 2**20}Ki"  # type: ignore[index]


def test_allocatable_is_never_negative() -> None:
    allocatable = node(system_reserved=(("cpu", "4"),))["status"]["allocatable"]  # type: ignore[index]
    assert allocatable["cpu"] == "0"


def test_addresses_use_node_ip_else_the_host_address() -> None:
    assert node()["status"]["addresses"] == [  # type: ignore[index]
        {"type": "InternalIP", "address": "10.0.0.7"},
        {"type": "Hostname", "address": "node-a"},
    ]
    assert node(node_ip="192.168.1.5,fd00::5")["status"]["addresses"] == [  # type: ignore[index]
        {"type": "InternalIP", "address": "192.168.1.5"},
        {"type": "InternalIP", "address": "fd00::5"},
        {"type": "Hostname", "address": "node-a"},
    ]


def test_node_info_and_daemon_endpoint() -> None:
    status = node(port=10251)["status"]
    assert status["nodeInfo"] == {  # type: ignore[index]
        "machineID": MACHINE.machine_id,
        "systemUUID": MACHINE.system_uuid,
        "bootID": MACHINE.boot_id,
        "kernelVersion": "6.1.0-18-amd64",
        "osImage": "Debian GNU/Linux 12 (bookworm)",
        "containerRuntimeVersion": "containerd://1.6.20",
        "kubeletVersion": "v1.32.0-pkletd",
        "kubeProxyVersion": "",
        "operatingSystem": "linux",
        "architecture": "amd64",
    }
    assert status["daemonEndpoints"] == {"kubeletEndpoint": {"Port": 10251}}  # type: ignore[index]


def test_runtime_version_in_the_kubelets_form() -> None:
    assert container_runtime_version("containerd v1.6.20") == "containerd://1.6.20"
    assert container_runtime_version("cri-o 1.29.1") == "cri-o://1.29.1"
    assert container_runtime_version("") == ""


def write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)


def test_machine_facts_read_from_the_host_files(tmp_path: Path) -> None:
    host = tmp_path / "host"
    write(host / "proc/meminfo", "MemTotal:       16318500 kB\nMemFree: 1 kB\n")
    write(host / "etc/machine-id", "abc123\n")
    write(host / "proc/sys/kernel/random/boot_id", "boot-1\n")
    write(host / "proc/sys/kernel/osrelease", "6.1.0-18-amd64\n")
    write(host / "etc/os-release", 'NAME="Debian"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n')
    write(host / "sys/kernel/mm/hugepages/hugepages-2048kB/nr_hugepages", "4\n")
    write(host / "sys/kernel/mm/hugepages/hugepages-1048576kB/nr_hugepages", "0\n")
    facts = MachineFacts.read(tmp_path, host=host)
    assert facts.memory == MEM_TOTAL_KB * 1024
    assert (facts.machine_id, facts.boot_id) == ("abc123", "boot-1")
    assert facts.system_uuid == "abc123"  # no readable product_uuid: the machine id
    assert facts.kernel_version == "6.1.0-18-amd64"
    assert facts.os_image == "Debian GNU/Linux 12 (bookworm)"
    assert facts.hugepages == ((2 * 2**20, 4), (GiB, 0))
    assert facts.ephemeral_storage > 0

    write(host / "sys/class/dmi/id/product_uuid", "EC2A1B4E-0000\n")
    assert MachineFacts.read(tmp_path, host=host).system_uuid == "EC2A1B4E-0000"


def test_machine_without_os_release_is_linux(tmp_path: Path) -> None:
    assert MachineFacts.read(tmp_path, host=tmp_path / "empty").os_image == "Linux"


def test_node_lease_options_from_the_kubelet_config() -> None:
    options = node_lease_options(kubelet_config())
    assert options.register_node is True
    assert (options.update_frequency, options.report_frequency) == (10.0, 300.0)
    assert (options.lease_duration_s, options.lease_renew_interval()) == (40, 10.0)
    assert options.max_images == 50
    assert (options.api_qps, options.api_burst) == (50, 100)
    assert options.api_timeout() == 10.0  # the kubelet's heartbeat client timeout
