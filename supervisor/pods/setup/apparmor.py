"""AppArmor as the kubelet applies it (``pkg/security/apparmor``, GA in 1.30).

A container's profile (``profile``): its own ``securityContext.appArmorProfile``, else
the pod's annotation ``container.apparmor.security.beta.kubernetes.io/<container>``
(static pods may only have that), else the pod's ``securityContext.appArmorProfile``,
else none (the runtime's default applies).

A pod needs AppArmor (``required``) when a profile other than ``Unconfined`` is set
anywhere. Admission refuses such a pod on a host without AppArmor (runc's test:
``/sys/kernel/security/apparmor`` exists and ``/sys/module/apparmor/parameters/enabled``
says ``Y``, read once at start as the kubelet does) with reason ``AppArmor`` and
``Cannot enforce AppArmor: AppArmor is not enabled on the host``; and a ``Localhost``
annotation without a name anywhere. Otherwise the profile goes to the runtime in both
CRI forms (``cri.ProfileSpec`` and the deprecated string containerd 1.6 reads).
"""

from __future__ import annotations

from pathlib import Path

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.apimodel.securityspec import (
    APPARMOR_ANNOTATION,
    APPARMOR_LOCALHOST,
    AppArmor,
    apparmor_annotation,
)
from pkletd.ipc.runtime.cri import ProfileSpec

ENABLED = Path("/sys/module/apparmor/parameters/enabled")
SECURITYFS = Path("/sys/kernel/security/apparmor")
NOT_ENABLED = "AppArmor is not enabled on the host"


def host_enabled(enabled: Path = ENABLED, securityfs: Path = SECURITYFS) -> bool:
    try:
        return securityfs.exists() and enabled.read_text().startswith("Y")
    except OSError:
        return False


def profile(pod: Pod, container: Container) -> AppArmor | None:
    if container.security is not None and container.security.apparmor is not None:
        return container.security.apparmor
    annotation = pod.annotations.get(APPARMOR_ANNOTATION + container.name)
    if annotation is not None:
        return apparmor_annotation(annotation)
    return pod.security.apparmor if pod.security is not None else None


def required(pod: Pod) -> bool:
    """A profile other than Unconfined is set for the pod or one of its containers."""
    confined = [c.security.apparmor for c in _containers(pod) if c.security is not None]
    if pod.security is not None:
        confined.append(pod.security.apparmor)
    annotated = [
        apparmor_annotation(v)
        for k, v in pod.annotations.items()
        if k.startswith(APPARMOR_ANNOTATION)
    ]
    return any(p is not None and p.type != "Unconfined" for p in confined + annotated)


def refusal(pod: Pod, host_enabled: bool) -> str | None:
    """The kubelet's admission message for a pod it cannot give AppArmor, else None."""
    if not required(pod):
        return None
    if not host_enabled:
        return f"Cannot enforce AppArmor: {NOT_ENABLED}"
    for container in _containers(pod):
        found = profile(pod, container)
        if found is not None and found.type == "Localhost" and not found.localhost_profile.strip():
            named = APPARMOR_LOCALHOST + found.localhost_profile
            return f'Cannot enforce AppArmor: invalid empty AppArmor profile name: "{named}"'
    return None


def cri_profile(pod: Pod, container: Container) -> ProfileSpec | None:
    found = profile(pod, container)
    if found is None:
        return None
    return ProfileSpec(found.type, found.localhost_profile)


def _containers(pod: Pod) -> tuple[Container, ...]:
    return pod.init_containers + pod.containers
