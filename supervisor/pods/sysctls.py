"""The kubelet's sysctl allowlist (``pkg/kubelet/sysctl``): which pod sysctls it admits.

The list is the safe sysctls (those namespaced by the node's kernel) plus
``allowedUnsafeSysctls``, names or prefixes ending in ``*``. Each entry must be a
sysctl the kernel namespaces: IPC (``kernel.sem``, ``kernel.shm*``, ``kernel.msg*``,
``fs.mqueue.*``) or network (``net.*``); anything else is refused when the list is made
(the kubelet then refuses to start). A pod's sysctl is admitted if the list names it or
a prefix of the list starts it, unless it is of the network namespace and the pod uses
the host's network, or of the IPC namespace and the pod uses the host's IPC. A pod
refused is Failed with reason ``SysctlForbidden`` and the kubelet's message
(``forbidden sysctl: "kernel.msgmax" not allowlisted``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from pkletd.ipc.apimodel.podspec import Pod

IPC = "ipc"
NET = "net"
MAX_LENGTH = 253

# pkg/kubelet/sysctl/safe_sysctls.go: name -> the first kernel that namespaces it.
SAFE_SYSCTLS: dict[str, tuple[int, ...]] = {
    "kernel.shm_rmid_forced": (0,),
    "net.ipv4.ip_local_port_range": (0,),
    "net.ipv4.tcp_syncookies": (0,),
    "net.ipv4.ping_group_range": (0,),
    "net.ipv4.ip_unprivileged_port_start": (0,),
    "net.ipv4.ip_local_reserved_ports": (3, 16),
    "net.ipv4.tcp_keepalive_time": (4, 5),
    "net.ipv4.tcp_fin_timeout": (4, 6),
    "net.ipv4.tcp_keepalive_intvl": (4, 5),
    "net.ipv4.tcp_keepalive_probes": (4, 5),
    "net.ipv4.tcp_rmem": (4, 15),
    "net.ipv4.tcp_wmem": (4, 15),
}
_NAMESPACED = {"kernel.sem": IPC}
_NAMESPACED_PREFIXES = {"kernel.shm": IPC, "kernel.msg": IPC, "fs.mqueue.": IPC, "net.": NET}
_SEGMENT = r"[a-z0-9]([-_a-z0-9]*[a-z0-9])?"
PATTERN = re.compile(rf"^({_SEGMENT}[\./])*([a-z0-9][-_a-z0-9]*)?[a-z0-9*]$")


def normalize(name: str) -> str:
    """``net/ipv4/ip_forward`` -> ``net.ipv4.ip_forward`` (the kubelet's NormalizeName)."""
    slash, dot = name.find("/"), name.find(".")
    if slash < 0 or (0 <= dot < slash):
        return name
    return name.translate(str.maketrans("/.", "./"))


def namespaced_by(name: str) -> str:
    """The kernel namespace of a sysctl (or of sysctls starting so): ipc, net, or ""."""
    if name in _NAMESPACED:
        return _NAMESPACED[name]
    return next((ns for p, ns in _NAMESPACED_PREFIXES.items() if name.startswith(p)), "")


def check_pattern(pattern: str) -> str:
    """An ``allowedUnsafeSysctls`` entry, normalized; ValueError with the kubelet's reason."""
    if len(pattern) > MAX_LENGTH or not PATTERN.match(pattern):
        raise ValueError(
            f'sysctl "{pattern}" must have at most {MAX_LENGTH} characters and match regex '
            f"{PATTERN.pattern[1:-1]}"
        )
    name = normalize(pattern)
    if not namespaced_by(name.removesuffix("*")):
        which = "sysctls" if name.endswith("*") else "sysctl"
        raise ValueError(f'the {which} "{name}" are not known to be namespaced')
    return name


@dataclass(frozen=True, slots=True)
class Allowlist:
    names: dict[str, str] = field(default_factory=dict)  # sysctl -> its namespace
    prefixes: dict[str, str] = field(default_factory=dict)  # prefix -> its namespace

    @classmethod
    def of(cls, unsafe: Iterable[str], kernel: tuple[int, ...]) -> Allowlist:
        """The safe sysctls this kernel namespaces, and the allowed unsafe ones."""
        safe = [name for name, since in SAFE_SYSCTLS.items() if kernel >= since]
        found = cls()
        for pattern in [*safe, *unsafe]:
            name = check_pattern(pattern)
            if name.endswith("*"):
                found.prefixes[name[:-1]] = namespaced_by(name[:-1])
            else:
                found.names[name] = namespaced_by(name)
        return found

    def refusal(self, sysctl: str, host_network: bool, host_ipc: bool) -> str | None:
        """Why the pod may not set this sysctl (the kubelet's words), else None."""
        name = normalize(sysctl)
        namespace = self.names.get(name)
        if namespace is None:
            namespace = next((ns for p, ns in self.prefixes.items() if name.startswith(p)), None)
        if namespace is None:
            return f'"{name}" not allowlisted'
        if (namespace == IPC and host_ipc) or (namespace == NET and host_network):
            return f'"{name}" not allowed with host {namespace} enabled'
        return None


def forbidden(pod: Pod, allowed: Allowlist) -> str | None:
    """The admission message for the pod's first sysctl not allowed, else None."""
    sysctls = pod.security.sysctls if pod.security is not None else ()
    for name, _ in sysctls:
        why = allowed.refusal(name, pod.host_network, pod.namespaces.host_ipc)
        if why is not None:
            return f"forbidden sysctl: {why}"
    return None
