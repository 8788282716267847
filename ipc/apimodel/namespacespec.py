"""The pod's Linux namespaces: ``hostPID``, ``hostIPC``, ``shareProcessNamespace``, ``hostUsers``.

Parsed and checked as the API server checks them (each error names its field);
``hostNetwork`` stays ``Pod.host_network``. What they become for the runtime (CRI
``NamespaceOption``) is ``supervisor/pods/setup/namespaces.py``; a ``hostUsers: false``
pod is refused at admission (``supervisor/pods/admission.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel.fieldcheck import InvalidField


@dataclass(frozen=True, slots=True)
class Namespaces:
    host_pid: bool = False  # the node's PID namespace
    host_ipc: bool = False  # the node's IPC namespace
    share_process_namespace: bool = False  # one PID namespace for the pod's containers
    host_users: bool | None = None  # None: not set (the node's user namespace)


DEFAULT = Namespaces()


def parse_namespaces(spec: dict[str, Any]) -> Namespaces:
    found = Namespaces(
        host_pid=bool(f.boolean(spec.get("hostPID"), "spec.hostPID")),
        host_ipc=bool(f.boolean(spec.get("hostIPC"), "spec.hostIPC")),
        share_process_namespace=bool(
            f.boolean(spec.get("shareProcessNamespace"), "spec.shareProcessNamespace")
        ),
        host_users=f.boolean(spec.get("hostUsers"), "spec.hostUsers"),
    )
    if found.host_pid and found.share_process_namespace:
        raise InvalidField(
            "spec.shareProcessNamespace: invalid value true: "
            "ShareProcessNamespace and HostPID cannot both be enabled"
        )
    return found
