"""What the kubelet does for a pod around the CRI calls: volumes and run options.

``PodSyncer`` calls, in order: ``blocked``, which sets up the volumes before the
sandbox's containers start (``WaitForAttachAndMount``), and again on every sync of a
running pod (the volume manager's remount: a changed ConfigMap, Secret or token
reaches the files); ``container_spec`` for each container it creates
(``GenerateRunContainerOptions`` and ``generateContainerConfig``: environment,
``$(VAR)`` in command and args, mounts and the termination message's file, security
context, ``runAsNonRoot``), and ``teardown`` when the pod is terminated. ``sandbox_spec``
gives the sandbox its hostname and resolver (``generatePodSandboxConfig``: ``dns``,
``podhosts``); a container's spec gets the kubelet-managed ``/etc/hosts`` mount. The
sandbox's security context and sysctls are ``runtimespec``'s.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.runtime.cri import ContainerSpec, ImageInfo, MountSpec, SandboxSpec
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import envvars, podhosts, securitycontext, terminationlog
from pkletd.supervisor.pods.setup.csivolumes import NO_DRIVERS, DriverEndpoints
from pkletd.supervisor.pods.setup.dns import DnsConfigurer
from pkletd.supervisor.pods.setup.envvars import ConfigError
from pkletd.supervisor.pods.setup.podhosts import FqdnTooLong, HostsFile, HostsFileError
from pkletd.supervisor.pods.setup.resolvconf import ResolvConfError
from pkletd.supervisor.pods.setup.volumes import PodVolumes, VolumeError, VolumePending
from pkletd.supervisor.pods.types import WaitingReason

VOLUME_RETRY_S = 10.0


class SandboxConfigError(Exception):
    """The pod's sandbox config cannot be made (its resolver, its hostname): the kubelet's
    error, which its ``FailedCreatePodSandBox`` event quotes."""


@dataclass(frozen=True, slots=True)
class Blocked:
    """Why no container of the pod may start now: what each one waits with, and the
    event it is recorded with (none while an object is still being read)."""

    reason: WaitingReason
    message: str
    retry_s: float | None = None
    event: Reason | None = None


class PodSetup:
    def __init__(
        self,
        node: NodeInfo,
        objects: ApiObjects,
        events: EventRecorder,
        drivers: DriverEndpoints = NO_DRIVERS,
    ) -> None:
        self.node = node
        self.objects = objects
        self.volumes = PodVolumes(node, objects, drivers)
        self.dns = DnsConfigurer(node.dns, node.name, events)
        self.hosts = HostsFile(node)
        self._events = events

    def sandbox_spec(self, pod: Pod, spec: SandboxSpec) -> SandboxSpec:
        """The sandbox's resolver and, off the host network, its hostname."""
        try:
            dns = self.dns.pod_dns(pod)
            hostname = "" if pod.host_network else self._kernel_hostname(pod)
        except (ResolvConfError, FqdnTooLong) as exc:
            raise SandboxConfigError(str(exc)) from exc
        return dataclasses.replace(spec, dns=dns, hostname=hostname)

    def _kernel_hostname(self, pod: Pod) -> str:
        return podhosts.kernel_hostname(pod, podhosts.pod_names(pod, self.node.dns.cluster_domain))

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
        ips = self.pod_ips(pod, sandbox_ip)
        made = envvars.make_env(pod, container, self.node, self.objects, ips)
        for message in made.invalid_names:
            self._events.warning(ObjectRef.of(pod), Reason.INVALID_ENV_NAMES, message)
        env = made.values
        command, args = envvars.expand_command(container, env)
        found = self.volumes.mounts(pod, container, env) + self._hosts_mount(pod, container, ips)
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

    def _hosts_mount(
        self, pod: Pod, container: Container, ips: tuple[str, ...]
    ) -> tuple[MountSpec, ...]:
        """The kubelet-managed /etc/hosts; ConfigError as the kubelet fails the container
        (``GenerateRunContainerOptions``) if it cannot be written or the FQDN is too long."""
        try:
            self._kernel_hostname(pod)
            mount = self.hosts.mount(pod, container, ips)
        except (FqdnTooLong, HostsFileError) as exc:
            raise ConfigError(str(exc)) from exc
        return () if mount is None else (mount,)

    def teardown(self, uid: str) -> None:
        self.volumes.teardown(uid)
