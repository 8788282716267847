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
PROC_MOUNTS = ("Default", "Unmasked")
FS_GROUP_POLICIES = ("OnRootMismatch", "Always")
_SYSCTL = re.compile(r"^([a-z0-9]([-_a-z0-9]*[a-z0-9])?[./])*[a-z0-9]([-_a-z0-9]*[a-z0-9])?$")


@dataclass(frozen=True, slots=True)
class Seccomp:
    type: str
    localhost_profile: str = ""


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
