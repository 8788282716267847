"""The Node object the parent registers, composed as the kubelet's ``initialNode`` does.

``compose_node(config, machine, host_ip, runtime_version)`` is pure: it returns the
Node as API JSON (a plain dict) with its metadata (name; the kubelet's default labels
``kubernetes.io/hostname``, ``kubernetes.io/os``, ``kubernetes.io/arch`` and their
``beta.`` forms, overridden by ``--node-labels``; the controller-managed attach-detach
annotation), its spec (``registerWithTaints``) and the static part of its status: the
setters NodeAddress, MachineInfo (capacity and allocatable), VersionInfo (nodeInfo),
GoRuntime and DaemonEndpoints. Conditions and images are the node-lease worker's.

Allocatable is capacity minus ``systemReserved``, ``kubeReserved`` and the hard
eviction thresholds (``memory.available`` and ``nodefs.available`` of ``evictionHard``,
whose defaults are the kubelet's), and memory minus
every hugepage size, never below zero. Quantities are written as the API's
``Quantity.String()`` writes them: cpu and pods in decimal SI (``"2"``, ``"1900m"``,
``"110"``), memory, storage and hugepages in binary SI (``"16318500Ki"``). A byte
count that is no multiple of 1024 is written as the API server gives it back: the
kubelet sends it as a bare integer, which the server reads as decimal SI
(``"96636764000"`` comes back as ``"96636764k"``).

``MachineFacts.read(root_dir)`` reads the machine (what the kubelet gets from
cAdvisor); tests build a ``MachineFacts`` of their own, or read a fake tree with
``host=``.
"""

from __future__ import annotations

import os
import platform
import struct
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel import quantity
from pkletd.supervisor.config import KubeletConfig
from pkletd.supervisor.node import addresses

KUBELET_VERSION = "v1.32.0-pkletd"
OPERATING_SYSTEM = "linux"
CMAD_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"
EVICTION_RESOURCES = {"memory.available": "memory", "nodefs.available": "ephemeral-storage"}
# Go's GOARCH for what platform.machine() says.
GO_ARCH = {
    "x86_64": "amd64",
    "amd64": "amd64",
    "aarch64": "arm64",
    "arm64": "arm64",
    "armv7l": "arm",
    "armv6l": "arm",
    "i386": "386",
    "i686": "386",
    "ppc64le": "ppc64le",
    "s390x": "s390x",
    "riscv64": "riscv64",
}
DECIMAL_RESOURCES = frozenset({"cpu", "pods"})  # everything else is binary SI
_DECIMAL_SUFFIXES = ((18, "E"), (15, "P"), (12, "T"), (9, "G"), (6, "M"), (3, "k"), (0, ""))
_SMALL_SUFFIXES = ((-3, "m"), (-6, "u"), (-9, "n"))
_BINARY_SUFFIXES = ("", "Ki", "Mi", "Gi", "Ti", "Pi", "Ei")


@dataclass(frozen=True, slots=True)
class MachineFacts:
    """What the kubelet learns from cAdvisor: sizes, identities, versions."""

    cpus: int
    memory: int  # bytes (MemTotal)
    ephemeral_storage: int  # bytes: the file system holding the root dir
    hugepages: tuple[tuple[int, int], ...]  # (page size in bytes, pages), per size
    machine_id: str
    system_uuid: str
    boot_id: str
    kernel_version: str
    os_image: str
    architecture: str  # Go's GOARCH name

    @classmethod
    def read(cls, root_dir: Path, host: Path = Path("/")) -> MachineFacts:
        """The machine's facts; ``host`` roots /proc, /sys and /etc (a fake tree in tests)."""
        machine_id = _first_line(host / "etc/machine-id")
        return cls(
            cpus=os.cpu_count() or 1,
            memory=_mem_total(host / "proc/meminfo"),
            ephemeral_storage=_filesystem_size(root_dir),
            hugepages=_hugepages(host / "sys/kernel/mm/hugepages"),
            machine_id=machine_id,
            system_uuid=_first_line(host / "sys/class/dmi/id/product_uuid") or machine_id,
            boot_id=_first_line(host / "proc/sys/kernel/random/boot_id"),
            kernel_version=_first_line(host / "proc/sys/kernel/osrelease") or os.uname().release,
            os_image=_os_image(host / "etc/os-release"),
            architecture=go_arch(platform.machine()),
        )


def go_arch(machine: str) -> str:
    return GO_ARCH.get(machine.lower(), machine.lower())


def container_runtime_version(cri_version: str) -> str:
    """``containerd://1.6.20`` from what ``CriRuntime.version()`` says (``containerd v1.6.20``)."""
    name, _, version = cri_version.strip().partition(" ")
    if not name:
        return ""
    return f"{name}://{version.strip().removeprefix('v') or 'Unknown'}"


def compose_node(
    config: KubeletConfig, machine: MachineFacts, host_ip: str, runtime_version: str
) -> dict[str, Any]:
    """The Node to register (API JSON); ``runtime_version`` as ``containerd://1.6.20``."""
    spec: dict[str, Any] = {}
    if config.register_with_taints:
        spec["taints"] = [taint.as_api() for taint in config.register_with_taints]
    capacity = node_capacity(config, machine)
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": config.node_name,
            "labels": node_labels(config, machine),
            "annotations": {CMAD_ANNOTATION: "true"},
        },
        "spec": spec,
        "status": {
            "capacity": _formatted(capacity),
            "allocatable": _formatted(node_allocatable(config, capacity)),
            "addresses": node_addresses(config, host_ip),
            "nodeInfo": node_info(machine, runtime_version),
            "daemonEndpoints": {"kubeletEndpoint": {"Port": config.port}},
        },
    }


def node_labels(config: KubeletConfig, machine: MachineFacts) -> dict[str, str]:
    found = {
        "kubernetes.io/hostname": config.node_name,
        "kubernetes.io/os": OPERATING_SYSTEM,
        "kubernetes.io/arch": machine.architecture,
        "beta.kubernetes.io/os": OPERATING_SYSTEM,
        "beta.kubernetes.io/arch": machine.architecture,
    }
    found.update(config.node_labels)  # --node-labels win over the defaults, as in the kubelet
    return found


def node_addresses(config: KubeletConfig, host_ip: str) -> list[dict[str, str]]:
    """InternalIP (each --node-ip, else the host's address), then Hostname (``addresses``)."""
    ips = addresses.given_ips(config.node_ip) or [host_ip]
    found = [{"type": "InternalIP", "address": ip} for ip in ips]
    found.append({"type": "Hostname", "address": config.node_name})
    return found


def node_info(machine: MachineFacts, runtime_version: str) -> dict[str, str]:
    return {
        "machineID": machine.machine_id,
        "systemUUID": machine.system_uuid,
        "bootID": machine.boot_id,
        "kernelVersion": machine.kernel_version,
        "osImage": machine.os_image,
        "containerRuntimeVersion": runtime_version,
        "kubeletVersion": KUBELET_VERSION,
        "kubeProxyVersion": "",
        "operatingSystem": OPERATING_SYSTEM,
        "architecture": machine.architecture,
    }


# --- capacity and allocatable -------------------------------------------------------------


def hugepage_resource(page_size: int) -> str:
    return "hugepages-" + format_quantity(Fraction(page_size), binary=True)


def node_capacity(config: KubeletConfig, machine: MachineFacts) -> dict[str, Fraction]:
    capacity = {
        "cpu": Fraction(machine.cpus),
        "memory": Fraction(machine.memory),
        "pods": Fraction(config.max_pods),
    }
    if config.local_storage_capacity_isolation:  # the kubelet reports it only then
        capacity["ephemeral-storage"] = Fraction(machine.ephemeral_storage)
    for size, pages in machine.hugepages:
        capacity[hugepage_resource(size)] = Fraction(size * pages)
    return capacity


def node_allocatable(config: KubeletConfig, capacity: dict[str, Fraction]) -> dict[str, Fraction]:
    """Capacity minus the reservations, then memory minus the hugepages (kubelet's MachineInfo)."""
    reserved = reservation(config, capacity)
    allocatable = {
        name: max(Fraction(0), value - reserved.get(name, 0)) for name, value in capacity.items()
    }
    for name, value in capacity.items():
        if name.startswith("hugepages-"):
            allocatable["memory"] = max(Fraction(0), allocatable["memory"] - value)
    return allocatable


def reservation(config: KubeletConfig, capacity: dict[str, Fraction]) -> dict[str, Fraction]:
    """systemReserved + kubeReserved + the hard eviction thresholds, per resource."""
    total: dict[str, Fraction] = {}
    for name, amount in (*config.system_reserved, *config.kube_reserved):
        total[name] = total.get(name, Fraction(0)) + quantity.parse(amount)
    for signal, threshold in config.eviction_hard:
        resource = EVICTION_RESOURCES.get(signal)
        if resource is None or resource not in capacity:
            continue
        total[resource] = total.get(resource, Fraction(0)) + eviction_amount(
            threshold, capacity[resource]
        )
    return total


def eviction_amount(threshold: str, capacity: Fraction) -> Fraction:
    """A threshold in bytes: a quantity, or a percentage of capacity as the kubelet
    computes it (a float32 fraction, the product truncated to whole bytes)."""
    if not threshold.endswith("%"):
        return quantity.parse(threshold)
    percent = _float32(_float32(float(threshold[:-1])) / 100)
    return Fraction(int(float(int(capacity)) * percent))


def _float32(value: float) -> float:
    return float(struct.unpack("f", struct.pack("f", value))[0])


def _formatted(resources: dict[str, Fraction]) -> dict[str, str]:
    return {
        name: format_quantity(value, binary=name not in DECIMAL_RESOURCES)
        for name, value in resources.items()
    }


def format_quantity(value: Fraction, binary: bool) -> str:
    """A quantity as the API server writes it: binary SI when it is a whole number of KiB
    (or 0), else the canonical decimal SI form."""
    if value == 0:
        return "0"
    if value < 0:
        return "-" + format_quantity(-value, binary)
    if binary and value.denominator == 1 and value % 1024 == 0:
        number, power = int(value), 0
        while number % 1024 == 0 and power < len(_BINARY_SUFFIXES) - 1:
            number, power = number // 1024, power + 1
        return f"{number}{_BINARY_SUFFIXES[power]}"
    for exponent, suffix in (*_DECIMAL_SUFFIXES, *_SMALL_SUFFIXES):
        scaled = value / Fraction(10) ** exponent
        if scaled.denominator == 1:
            return f"{scaled.numerator}{suffix}"
    return f"{-(-value.numerator * 10**9 // value.denominator)}n"  # finer than nano: round up


# --- reading the machine ---------------------------------------------------------------------


def _first_line(path: Path) -> str:
    try:
        return path.read_text().strip().splitlines()[0].strip()
    except (OSError, IndexError, UnicodeDecodeError):
        return ""


def _mem_total(path: Path) -> int:
    try:
        for line in path.read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _filesystem_size(root_dir: Path) -> int:
    probe = root_dir
    while not probe.exists() and probe != probe.parent:
        probe = probe.parent
    try:
        stat = os.statvfs(probe)
    except OSError:
        return 0
    return stat.f_blocks * stat.f_frsize


def _hugepages(directory: Path) -> tuple[tuple[int, int], ...]:
    """(page size, pages) for every ``hugepages-<n>kB`` the kernel lists, smallest first."""
    found = []
    try:
        entries = list(directory.iterdir())
    except OSError:
        return ()
    for entry in entries:
        name = entry.name
        if not (name.startswith("hugepages-") and name.endswith("kB")):
            continue
        try:
            size = int(name.removeprefix("hugepages-").removesuffix("kB")) * 1024
            pages = int(_first_line(entry / "nr_hugepages") or "0")
        except ValueError:
            continue
        found.append((size, pages))
    return tuple(sorted(found))


def _os_image(path: Path) -> str:
    """PRETTY_NAME of os-release, as cAdvisor reads it; "Linux" without one."""
    try:
        lines = path.read_text().splitlines()
    except (OSError, UnicodeDecodeError):
        return "Linux"
    for line in lines:
        key, equals, value = line.partition("=")
        if equals and key.strip() == "PRETTY_NAME":
            return value.strip().strip('"').strip("'") or "Linux"
    return "Linux"
