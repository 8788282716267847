"""The pod's namespaces for the runtime (CRI ``NamespaceOption``), as the kubelet sets them.

``kuberuntime/util.NamespacesForPod``: network NODE with ``hostNetwork``, else POD;
IPC NODE with ``hostIPC``, else POD; PID NODE with ``hostPID``, POD with
``shareProcessNamespace``, else CONTAINER (each container its own). The same option
goes in the sandbox's security context and in every container's.

``container_namespaces`` takes the id of a target container: an ephemeral container
with ``targetContainerName`` joins that container's PID namespace (TARGET), but only
where the pod's PID mode is CONTAINER; with ``hostPID`` or ``shareProcessNamespace``
the pod's mode wins (``kuberuntime_container_linux.go``). Looking the target's id up
in the pod's status is the caller's.

User namespaces: pkletd sends none (``userns_options`` unset, the node's, as the
kubelet without its user-namespace gate); a ``hostUsers: false`` pod never gets this
far, admission refuses it.
"""

from __future__ import annotations

import dataclasses

from pkletd.ipc.apimodel.podspec import Pod
from pkletd.ipc.runtime.cri import NamespaceMode, NamespaceSpec


def _pid_mode(pod: Pod) -> NamespaceMode:
    if pod.namespaces.host_pid:
        return NamespaceMode.NODE
    if pod.namespaces.share_process_namespace:
        return NamespaceMode.POD
    return NamespaceMode.CONTAINER


def pod_namespaces(pod: Pod) -> NamespaceSpec:
    """The sandbox's namespaces, which are every container's too."""
    return NamespaceSpec(
        network=NamespaceMode.NODE if pod.host_network else NamespaceMode.POD,
        pid=_pid_mode(pod),
        ipc=NamespaceMode.NODE if pod.namespaces.host_ipc else NamespaceMode.POD,
    )


def container_namespaces(pod: Pod, target_id: str = "") -> NamespaceSpec:
    """One container's namespaces: the pod's; with ``target_id`` (an ephemeral
    container's target), that container's PID namespace where the pod's mode is CONTAINER."""
    found = pod_namespaces(pod)
    if target_id and found.pid is NamespaceMode.CONTAINER:
        return dataclasses.replace(found, pid=NamespaceMode.TARGET, target_id=target_id)
    return found
