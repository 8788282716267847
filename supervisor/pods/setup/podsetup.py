"""What the kubelet does for a pod around the CRI calls: volumes and run options.

``PodSyncer`` calls, in order: ``blocked``, which sets up the volumes before the
sandbox's containers start (``WaitForAttachAndMount``), and again on every sync of a
running pod (the volume manager's remount: a changed ConfigMap, Secret or token
reaches the files); ``container_spec`` for each container it creates
(``GenerateRunContainerOptions`` and ``generateContainerConfig``: environment,
``$(VAR)`` in command and args, mounts and the termination message's file, security
context, ``runAsNonRoot``), and
``teardown`` when the pod is terminated. The sandbox's security context and sysctls
are ``runtimespec``'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.runtime.cri import ContainerSpec, ImageInfo
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import envvars, securitycontext, terminationlog
from pkletd.supervisor.pods.setup.envvars import ConfigError
from pkletd.supervisor.pods.setup.volumes import PodVolumes, VolumeError, VolumePending
from pkletd.supervisor.pods.types import WaitingReason

VOLUME_RETRY_S = 10.0


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why no container of the pod may start now: what each one waits with, and the
    event it is recorded with (none while an object is still being read)."""

    reason: WaitingReason
    message: str
    retry_s: float | None = None
    event: Reason | None = None


class PodSetup:
    def __init__(self, node: NodeInfo, objects: ApiObjects, events: EventRecorder) -> None:
        self.node = node
        self.objects = objects
        self.volumes = PodVolumes(node, objects)
        self._events = events

    def blocked(self, pod: Pod, remount: bool = False) -> Blocked | None:
        """Set up the pod's volumes (``remount``: bring a set-up pod's written volumes up
        to date); what its containers wait with if one fails."""
        try:
            self.volumes.setup(pod, remount)
        except VolumePending:
            return Blocked(WaitingReason.CONTAINER_CREATING, "", VOLUME_RETRY_S)
        except VolumeError as exc:
            return Blocked(
                WaitingReason.CONTAINER_CREATING, str(exc), VOLUME_RETRY_S, Reason.FAILED_MOUNT
            )
        return None

    def pod_ips(self, pod: Pod, sandbox_ip: str) -> tuple[str, ...]:
        """The pod's IPs as its containers see them: the host's for a hostNetwork pod."""
        if pod.host_network:
            return self.node.host_ips
        return (sandbox_ip,) if sandbox_ip else ()

    def container_spec(
        self, pod: Pod, container: Container, spec: ContainerSpec, sandbox_ip: str, image: ImageInfo
    ) -> ContainerSpec:
        """The CRI spec with the pod's run options; ConfigError with the kubelet's message,
        ConfigPending while an object the environment needs is being read."""
        made = envvars.make_env(
            pod, container, self.node, self.objects, self.pod_ips(pod, sandbox_ip)
        )
        for message in made.invalid_names:
            self._events.warning(ObjectRef.of(pod), Reason.INVALID_ENV_NAMES, message)
        env = made.values
        command, args = envvars.expand_command(container, env)
        found = self.volumes.mounts(pod, container, env)
        uid, username = image.uid, image.username
        refusal = securitycontext.verify_run_as_non_root(pod, container, uid, username)
        if refusal is not None:
            raise ConfigError(refusal)
        security = securitycontext.container_security(pod, container, uid, username, self.node)
        termination = terminationlog.mount(self.node, pod, container)
        if termination is not None:
            found += (termination,)
        return dataclasses.replace(
            spec, env=tuple(env), command=command, args=args, mounts=found, security=security
        )

    def teardown(self, uid: str) -> None:
        self.volumes.teardown(uid)
