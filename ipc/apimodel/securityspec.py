"""Pod and container ``securityContext``, checked as the API server checks them.

Only parsing and validation; how the two levels merge and what goes to the CRI
is ``supervisor/securitycontext.py``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel.fieldcheck import MAX_ID, InvalidField

SECCOMP_TYPES = ("RuntimeDefault", "Unconfined", "Localhost")
APPARMOR_TYPES = SECCOMP_TYPES
SUPPLEMENTAL_GROUPS_POLICIES = ("Merge", "Strict")
MAX_APPARMOR_PROFILE = 4095  # PATH_MAX - 1
# The AppArmor annotations before the fields (GA in 1.30): <prefix><container> -> a profile.
APPARMOR_ANNOTATION = "container.apparmor.security.beta.kubernetes.io/"
APPARMOR_RUNTIME_DEFAULT = "runtime/default"
APPARMOR_UNCONFINED = "unconfined"
APPARMOR_LOCALHOST = "localhost/"
PROC_MOUNTS = ("Default", "Unmasked")
FS_GROUP_POLICIES = ("OnRootMismatch", "Always")
_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Seccomp:
    type: str
    localhost_profile: str = ""


@dataclass(frozen=True, slots=True)
class AppArmor:
    type: str  # one of APPARMOR_TYPES
    localhost_profile: str = ""


@dataclass(frozen=True, slots=True)
class SELinux:
    user: str = ""
    role: str = ""
    type: str = ""
    level: str = ""


@dataclass(frozen=True, slots=True)
class PodSecurity:
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    fs_group: int | None = None
    fs_group_change_policy: str = "Always"
    supplemental_groups: tuple[int, ...] = ()
    seccomp: Seccomp | None = None
    sysctls: tuple[tuple[str, str], ...] = ()
    apparmor: AppArmor | None = None
    selinux: SELinux | None = None
    supplemental_groups_policy: str = "Merge"


@dataclass(frozen=True, slots=True)
class ContainerSecurity:
    run_as_user: int | None = None
    run_as_group: int | None = None
    run_as_non_root: bool | None = None
    privileged: bool | None = None
    read_only_root_filesystem: bool | None = None
    allow_privilege_escalation: bool | None = None
    add_capabilities: tuple[str, ...] = ()
    drop_capabilities: tuple[str, ...] = ()
    seccomp: Seccomp | None = None
    proc_mount: str | None = None
    apparmor: AppArmor | None = None
    selinux: SELinux | None = None


def _id(value: Any, path: str) -> int | None:
    return f.integer(value, path, 0, MAX_ID)


def _seccomp(value: Any, path: str) -> Seccomp | None:
    entry = f.optional_mapping(value, path)
    if entry is None:
        return None
    kind = f.choice(entry.get("type"), f"{path}.type", SECCOMP_TYPES)
    if not kind:
        raise InvalidField(f"{path}.type: required value")
    profile = f.string(entry.get("localhostProfile"), f"{path}.localhostProfile")
    if kind == "Localhost" and not profile:
        raise InvalidField(
            f"{path}.localhostProfile: required value: must be set when seccomp type is Localhost"
        )
    if kind != "Localhost" and profile:
        raise InvalidField(
            f"{path}.localhostProfile: invalid value: can only be set when seccomp type is "
            "Localhost"
        )
    return Seccomp(kind, profile)


def _apparmor(value: Any, path: str) -> AppArmor | None:
    """``appArmorProfile``, checked as the API's ValidateAppArmorProfileField."""
    entry = f.optional_mapping(value, path)
    if entry is None:
        return None
    kind = f.choice(entry.get("type"), f"{path}.type", APPARMOR_TYPES)
    if not kind:
        raise InvalidField(f"{path}.type: required value")
    profile = entry.get("localhostProfile")
    if kind != "Localhost":
        if profile is not None:
            raise InvalidField(
                f"{path}.localhostProfile: invalid value: can only be set when AppArmor type "
                "is Localhost"
            )
        return AppArmor(kind)
    name = f.string(profile, f"{path}.localhostProfile")
    if name != name.strip():
        raise InvalidField(
            f"{path}.localhostProfile: invalid value: must not be padded with whitespace"
        )
    if not name:
        raise InvalidField(
            f"{path}.localhostProfile: required value: must be set when AppArmor type is Localhost"
        )
    if len(name) > MAX_APPARMOR_PROFILE:
        raise InvalidField(
            f"{path}.localhostProfile: too long: may not be more than {MAX_APPARMOR_PROFILE} bytes"
        )
    return AppArmor(kind, name)


def _selinux(value: Any, path: str) -> SELinux | None:
    entry = f.optional_mapping(value, path)
    if entry is None:
        return None
    parts = {k: f.string(entry.get(k), f"{path}.{k}") for k in ("user", "role", "type", "level")}
    return SELinux(**parts)


def apparmor_annotation(value: str) -> AppArmor | None:
    """The profile an AppArmor annotation's value names; None if it names none."""
    if value == APPARMOR_RUNTIME_DEFAULT:
        return AppArmor("RuntimeDefault")
    if value == APPARMOR_UNCONFINED:
        return AppArmor("Unconfined")
    if value.startswith(APPARMOR_LOCALHOST):
        return AppArmor("Localhost", value.removeprefix(APPARMOR_LOCALHOST))
    return None


def check_apparmor_annotations(annotations: dict[str, str]) -> None:
    """Every AppArmor annotation names a profile (the API's ValidateAppArmorProfileFormat)."""
    for key, value in annotations.items():
        if key.startswith(APPARMOR_ANNOTATION) and apparmor_annotation(value) is None:
            raise InvalidField(
                f"metadata.annotations[{key}]: invalid value {value!r}: "
                f'invalid AppArmor profile name: "{value}"'
            )


def parse_pod_security(spec: dict[str, Any], path: str = "spec.securityContext") -> PodSecurity:
    entry = f.optional_mapping(spec.get("securityContext"), path) or {}
    groups = tuple(
        _id(g, f"{path}.supplementalGroups[{i}]") or 0
        for i, g in enumerate(
            f.items(entry.get("supplementalGroups"), f"{path}.supplementalGroups")
        )
    )
    return PodSecurity(
        run_as_user=_id(entry.get("runAsUser"), f"{path}.runAsUser"),
        run_as_group=_id(entry.get("runAsGroup"), f"{path}.runAsGroup"),
        run_as_non_root=f.boolean(entry.get("runAsNonRoot"), f"{path}.runAsNonRoot"),
        fs_group=_id(entry.get("fsGroup"), f"{path}.fsGroup"),
        fs_group_change_policy=f.choice(
            entry.get("fsGroupChangePolicy"),
            f"{path}.fsGroupChangePolicy",
            FS_GROUP_POLICIES,
            "Always",
        ),
        supplemental_groups=groups,
        seccomp=_seccomp(entry.get("seccompProfile"), f"{path}.seccompProfile"),
        sysctls=_sysctls(entry.get("sysctls"), f"{path}.sysctls"),
        apparmor=_apparmor(entry.get("appArmorProfile"), f"{path}.appArmorProfile"),
        selinux=_selinux(entry.get("seLinuxOptions"), f"{path}.seLinuxOptions"),
        supplemental_groups_policy=f.choice(
            entry.get("supplementalGroupsPolicy"),
            f"{path}.supplementalGroupsPolicy",
            SUPPLEMENTAL_GROUPS_POLICIES,
            "Merge",
        ),
    )


def _sysctls(value: Any, path: str) -> tuple[tuple[str, str], ...]:
    found: list[tuple[str, str]] = []
    for i, item in enumerate(f.items(value, path)):
        entry = f.mapping(item, f"{path}[{i}]")
        name = f.string(entry.get("name"), f"{path}[{i}].name", required=True)
        if len(name) > 253 or not _SYSCTL.match(name):
            raise InvalidField(
                f"{path}[{i}].name: invalid value {name!r}: must have at most 253 characters "
                f"and match regex {_SYSCTL.pattern}"
            )
        if any(name == n for n, _ in found):
            raise InvalidField(f"{path}[{i}].name: duplicate value {name!r}")
        found.append((name, f.string(entry.get("value"), f"{path}[{i}].value")))
    return tuple(found)


def parse_container_security(container: dict[str, Any], path: str) -> ContainerSecurity | None:
    where = f"{path}.securityContext"
    entry = f.optional_mapping(container.get("securityContext"), where)
    if entry is None:
        return None
    caps = f.optional_mapping(entry.get("capabilities"), f"{where}.capabilities") or {}
    security = ContainerSecurity(
        run_as_user=_id(entry.get("runAsUser"), f"{where}.runAsUser"),
        run_as_group=_id(entry.get("runAsGroup"), f"{where}.runAsGroup"),
        run_as_non_root=f.boolean(entry.get("runAsNonRoot"), f"{where}.runAsNonRoot"),
        privileged=f.boolean(entry.get("privileged"), f"{where}.privileged"),
        read_only_root_filesystem=f.boolean(
            entry.get("readOnlyRootFilesystem"), f"{where}.readOnlyRootFilesystem"
        ),
        allow_privilege_escalation=f.boolean(
            entry.get("allowPrivilegeEscalation"), f"{where}.allowPrivilegeEscalation"
        ),
        add_capabilities=f.strings(caps.get("add"), f"{where}.capabilities.add"),
        drop_capabilities=f.strings(caps.get("drop"), f"{where}.capabilities.drop"),
        seccomp=_seccomp(entry.get("seccompProfile"), f"{where}.seccompProfile"),
        proc_mount=f.choice(entry.get("procMount"), f"{where}.procMount", PROC_MOUNTS) or None,
        apparmor=_apparmor(entry.get("appArmorProfile"), f"{where}.appArmorProfile"),
        selinux=_selinux(entry.get("seLinuxOptions"), f"{where}.seLinuxOptions"),
    )
    if security.allow_privilege_escalation is False:
        if security.privileged:
            raise InvalidField(
                f"{where}: invalid value: cannot set `allowPrivilegeEscalation` to false and "
                "`privileged` to true"
            )
        if any(c.upper().removeprefix("CAP_") == "SYS_ADMIN" for c in security.add_capabilities):
            raise InvalidField(
                f"{where}: invalid value: cannot set `allowPrivilegeEscalation` to false and "
                "`capabilities.Add` CAP_SYS_ADMIN"
            )
    return security
