"""Pod and container specs for the CRI, labelled as the kubelet labels them.

The labels and annotations are the kubelet's (``pkg/kubelet/kuberuntime/labels.go``),
so ``crictl`` and other tools read pkletd's pods, and a restarted parent finds its
own pods by them. Log paths are the kubelet's:
``<podLogsDir>/<namespace>_<name>_<uid>/<container>/<restartCount>.log``. The sandbox's
cgroup parent is the pod's cgroup (``cgroups``); a container's resources, and the
sandbox's (its pod's totals and its overhead), come from ``resources``; the namespaces of
both from ``namespaces``. The sandbox's runtime handler is the pod's RuntimeClass's, which
``podsync`` looks up; its hostname and resolver are ``PodSetup.sandbox_spec``'s.
"""

from __future__ import annotations

import json
from pathlib import Path

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.runtime.cri import ContainerSpec, PortSpec, SandboxSpec
from pkletd.supervisor.pods.cgroups import podcgroups, resources
from pkletd.supervisor.pods.setup import namespaces, securitycontext

POD_NAME = "io.kubernetes.pod.name"
POD_NAMESPACE = "io.kubernetes.pod.namespace"
POD_UID = "io.kubernetes.pod.uid"
CONTAINER_NAME = "io.kubernetes.container.name"
CONTAINER_HASH = "io.kubernetes.container.hash"
RESTART_COUNT = "io.kubernetes.container.restartCount"
TERMINATION_MESSAGE_PATH = "io.kubernetes.container.terminationMessagePath"
TERMINATION_MESSAGE_POLICY = "io.kubernetes.container.terminationMessagePolicy"
POD_GRACE = "io.kubernetes.pod.terminationGracePeriod"
CONTAINER_PORTS = "io.kubernetes.container.ports"


def pod_log_dir(logs_root: Path, pod: Pod) -> Path:
    return logs_root / f"{pod.namespace}_{pod.name}_{pod.uid}"


def sandbox_spec(pod: Pod, attempt: int, logs_root: Path) -> SandboxSpec:
    labels = dict(pod.labels)
    labels.update({POD_NAME: pod.name, POD_NAMESPACE: pod.namespace, POD_UID: pod.uid})
    return SandboxSpec(
        name=pod.name,
        namespace=pod.namespace,
        uid=pod.uid,
        attempt=attempt,
        hostname="",  # PodSetup.sandbox_spec's
        log_directory=str(pod_log_dir(logs_root, pod)),
        host_network=pod.host_network,
        labels=labels,
        annotations=dict(pod.annotations),
        ports=tuple(
            PortSpec(p.container_port, p.host_port, p.protocol, p.host_ip)
            for c in pod.containers
            for p in c.ports
            if p.host_port
        ),
        sysctls=dict(pod.security.sysctls) if pod.security is not None else {},
        security=securitycontext.sandbox_security(pod),
        cgroup_parent=podcgroups.pod_cgroup_name(pod),
        overhead=resources.overhead_resources(pod),
        resources=resources.sandbox_resources(pod),
        namespaces=namespaces.pod_namespaces(pod),
    )


def container_spec(pod: Pod, container: Container, restart_count: int) -> ContainerSpec:
    annotations = {
        CONTAINER_HASH: container.hash,
        RESTART_COUNT: str(restart_count),
        TERMINATION_MESSAGE_PATH: container.termination_message_path,
        TERMINATION_MESSAGE_POLICY: container.termination_message_policy,
        POD_GRACE: str(pod.grace_period_s),
    }
    if container.ports:
        annotations[CONTAINER_PORTS] = json.dumps(
            [{"containerPort": p.container_port, "protocol": p.protocol} for p in container.ports]
        )
    return ContainerSpec(
        name=container.name,
        attempt=restart_count,
        image=container.image,
        log_path=f"{container.name}/{restart_count}.log",
        command=container.command,
        args=container.args,
        working_dir=container.working_dir,
        # literal values; podsetup resolves valueFrom, envFrom and $(VAR) references
        env=tuple((e.name, e.value) for e in container.env if not e.has_source),
        labels={
            POD_NAME: pod.name,
            POD_NAMESPACE: pod.namespace,
            POD_UID: pod.uid,
            CONTAINER_NAME: container.name,
        },
        annotations=annotations,
        resources=resources.container_resources(pod, container),
        stdin=container.stdin,
        stdin_once=container.stdin_once,
        tty=container.tty,
        namespaces=namespaces.container_namespaces(pod),
    )
