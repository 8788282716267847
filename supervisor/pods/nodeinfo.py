"""What a pod may learn about its node: name, addresses, root dir, allocatable resources,
the node's defaults for its containers (``seccompDefault``), and the cluster's DNS
settings its resolver is made from.

Allocatable is the Node's, as the agent computes it for registration
(``supervisor/node/facts.py``: capacity less ``systemReserved``, ``kubeReserved``
and the hard eviction thresholds), so admission, the downward API and the Node agree.
The kubelet uses allocatable where a container sets no limit (the downward API's
``resourceFieldRef``) and as the ceiling of a memory-backed emptyDir.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path


@dataclass(frozen=True, slots=True)
class DnsSettings:
    """The kubelet's ``clusterDNS``, ``clusterDomain``, ``resolvConf`` and ``--node-ip``s."""

    cluster_dns: tuple[str, ...] = ()
    cluster_domain: str = ""
    resolv_conf: str = ""  # "": none
    node_ips: tuple[str, ...] = ()  # as given with --node-ip (none: the kubelet's empty list)


@dataclass(frozen=True, slots=True)
class NodeInfo:
    name: str
    host_ips: tuple[str, ...]
    root_dir: Path
    cpu: Fraction = Fraction(1)  # cores
    memory: Fraction = Fraction(2**30)  # bytes
    ephemeral_storage: Fraction = Fraction(2**34)  # bytes
    kernel: tuple[int, ...] = field(default=(0,))
    seccomp_default: bool = False  # ``seccompDefault``: RuntimeDefault where none is set
    dns: DnsSettings = DnsSettings()

    @property
    def pods_dir(self) -> Path:
        return self.root_dir / "pods"

    def kernel_at_least(self, *version: int) -> bool:
        return self.kernel >= version


def memory_capacity() -> Fraction:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return Fraction(int(line.split()[1]) * 1024)
    return Fraction(0)


def kernel_version() -> tuple[int, ...]:
    match = re.match(r"(\d+)\.(\d+)(?:\.(\d+))?", os.uname().release)
    if match is None:
        return (0,)
    return tuple(int(part) for part in match.groups() if part is not None)
