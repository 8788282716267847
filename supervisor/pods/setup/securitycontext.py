"""Pod and container security contexts, merged and sent to the CRI as the kubelet does.

- ``effective``: ``securitycontext.DetermineEffectiveSecurityContext``: the
  container's fields win; the pod gives ``runAsUser``, ``runAsGroup``,
  ``runAsNonRoot``, ``seccompProfile`` and ``seLinuxOptions`` when the container
  leaves them out.
- ``verify_run_as_non_root``: the kubelet's ``verifyRunAsNonRoot`` with its
  messages (the container then waits with ``CreateContainerConfigError``).
- ``container_security``: ``determineEffectiveSecurityContext``: without a
  ``runAsUser`` the image's user is passed on; ``fsGroup`` then
  ``supplementalGroups`` become supplemental groups; ``no_new_privs`` only when
  ``allowPrivilegeEscalation`` is false; seccomp from the container, else the
  pod, else ``RuntimeDefault`` with ``seccompDefault`` and ``Unconfined`` without;
  ``Localhost`` profiles under ``<root-dir>/seccomp``; masked and read-only paths
  from ``procMount``; the AppArmor profile (``apparmor``); the SELinux label.
- ``sandbox_security``: ``generatePodSandboxLinuxConfig``: the pod's user, group
  and groups, privileged if any container is, seccomp ``RuntimeDefault``, the pod's
  SELinux label.

The sysctls the pod may set are admission's (``sysctls``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.apimodel.securityspec import ContainerSecurity, PodSecurity, Seccomp, SELinux
from pkletd.ipc.runtime.cri import (
    ContainerSecuritySpec,
    SandboxSecuritySpec,
    SeccompSpec,
    SELinuxSpec,
)
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup import apparmor

# pkg/securitycontext/util.go: kept in sync with moby's defaults.
DEFAULT_MASKED_PATHS = (
    "/proc/asound",
    "/proc/acpi",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
    "/sys/devices/virtual/powercap",
)
DEFAULT_READONLY_PATHS = ("/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger")


@dataclass(frozen=True, slots=True)
class Effective:
    run_as_user: int | None
    run_as_group: int | None
    run_as_non_root: bool | None
    seccomp: Seccomp | None
    selinux: SELinux | None
    container: ContainerSecurity


def pod_security(pod: Pod) -> PodSecurity:
    return pod.security if pod.security is not None else PodSecurity()


def effective(pod: Pod, container: Container) -> Effective:
    ps = pod_security(pod)
    cs = container.security if container.security is not None else ContainerSecurity()

    user = cs.run_as_user if cs.run_as_user is not None else ps.run_as_user
    group = cs.run_as_group if cs.run_as_group is not None else ps.run_as_group
    non_root = cs.run_as_non_root if cs.run_as_non_root is not None else ps.run_as_non_root
    return Effective(user, group, non_root, cs.seccomp or ps.seccomp, cs.selinux or ps.selinux, cs)


def pod_ref(pod: Pod) -> str:
    """``format.Pod``: ``name_namespace(uid)``."""
    return f"{pod.name}_{pod.namespace}({pod.uid})"


def verify_run_as_non_root(
    pod: Pod, container: Container, image_uid: int | None, image_user: str
) -> str | None:
    """The kubelet's refusal message, or None if the container may run."""
    eff = effective(pod, container)
    if not eff.run_as_non_root:
        return None
    where = f'(pod: "{pod_ref(pod)}", container: {container.name})'
    if eff.run_as_user is not None:
        if eff.run_as_user == 0:
            return f"container's runAsUser breaks non-root policy {where}"
        return None
    if image_uid == 0:
        return f"container has runAsNonRoot and image will run as root {where}"
    if image_uid is None and image_user:
        return (
            f"container has runAsNonRoot and image has non-numeric user ({image_user}), "
            f"cannot verify user is non-root {where}"
        )
    return None


def _profile(seccomp: Seccomp | None, node: NodeInfo) -> SeccompSpec:
    if seccomp is None:
        return SeccompSpec("RuntimeDefault" if node.seccomp_default else "Unconfined")
    if seccomp.type == "Localhost":
        return SeccompSpec("Localhost", str(node.root_dir / "seccomp" / seccomp.localhost_profile))
    return SeccompSpec(seccomp.type)


def supplemental_groups(pod: Pod) -> tuple[int, ...]:
    ps = pod_security(pod)
    return ((ps.fs_group,) if ps.fs_group is not None else ()) + ps.supplemental_groups


def container_security(
    pod: Pod, container: Container, image_uid: int | None, image_user: str, node: NodeInfo
) -> ContainerSecuritySpec:
    eff = effective(pod, container)
    cs = eff.container
    unmasked = cs.proc_mount == "Unmasked"
    user, username = eff.run_as_user, ""
    if user is None:
        user, username = image_uid, image_user
    return ContainerSecuritySpec(
        run_as_user=user,
        run_as_username=username,
        run_as_group=eff.run_as_group,
        supplemental_groups=supplemental_groups(pod),
        privileged=bool(cs.privileged),
        readonly_rootfs=bool(cs.read_only_root_filesystem),
        add_capabilities=cs.add_capabilities,
        drop_capabilities=cs.drop_capabilities,
        no_new_privs=cs.allow_privilege_escalation is False,
        seccomp=_profile(eff.seccomp, node),
        masked_paths=() if unmasked else DEFAULT_MASKED_PATHS,
        readonly_paths=() if unmasked else DEFAULT_READONLY_PATHS,
        apparmor=apparmor.cri_profile(pod, container),
        selinux=_label(eff.selinux),
    )


def privileged(container: Container) -> bool:
    return container.security is not None and bool(container.security.privileged)


def sandbox_security(pod: Pod) -> SandboxSecuritySpec:
    ps = pod_security(pod)
    everyone = pod.init_containers + pod.containers
    return SandboxSecuritySpec(
        run_as_user=ps.run_as_user,
        run_as_group=ps.run_as_group,
        supplemental_groups=supplemental_groups(pod),
        privileged=any(privileged(c) for c in everyone),
        seccomp=SeccompSpec("RuntimeDefault"),
        selinux=_label(ps.selinux),
    )


def _label(selinux: SELinux | None) -> SELinuxSpec | None:
    if selinux is None:
        return None
    return SELinuxSpec(selinux.user, selinux.role, selinux.type, selinux.level)
