"""Pod validation: ``ValidatePodCreate``'s checks that a client meets, and the spec
immutability of ``ValidatePodUpdate`` (only images, a shrinking ``activeDeadlineSeconds``,
added tolerations and removed scheduling gates may change), worded as the real messages.
Ephemeral containers are validated as containers, plus ``validateEphemeralContainers``'
own checks: ``targetContainerName`` names a container or an init container (``Not
found``); the fields outside the API's allow list, and a mount's ``subPath`` and
``subPathExpr``, are ``Forbidden: cannot be set for an Ephemeral Container``.
"""

from __future__ import annotations

import copy

from tests.harness.apiserver.kinds.base import Obj, semantically_equal
from tests.harness.apiserver.kinds.pod_defaults import CONTAINER_LISTS
from tests.harness.apiserver.kinds.pod_dns_validation import validate_dns
from tests.harness.apiserver.validation import FieldError, dns1123_label, dns1123_subdomain

RESTART_POLICIES = ("Always", "OnFailure", "Never")
DNS_POLICIES = ("ClusterFirstWithHostNet", "ClusterFirst", "Default", "None")
PULL_POLICIES = ("Always", "IfNotPresent", "Never")
PROTOCOLS = ("SCTP", "TCP", "UDP")
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
MUTABLE_SPEC_MESSAGE = (
    "pod updates may not change fields other than `spec.containers[*].image`,"
    "`spec.initContainers[*].image`,`spec.activeDeadlineSeconds`,`spec.tolerations` "
    "(only additions to existing tolerations),`spec.terminationGracePeriodSeconds` "
    "(allow it to be set to 1 if it was previously negative)"
)
EPHEMERAL_FORBIDDEN = (
    "ports",
    "resources",
    "livenessProbe",
    "readinessProbe",
    "startupProbe",
    "lifecycle",
    "resizePolicy",
    "restartPolicy",
)
NOT_FOR_EPHEMERAL = "cannot be set for an Ephemeral Container"
_VOLUME_SOURCES = (
    "hostPath",
    "emptyDir",
    "secret",
    "configMap",
    "persistentVolumeClaim",
    "projected",
    "downwardAPI",
    "nfs",
    "csi",
    "ephemeral",
    "iscsi",
    "fc",
    "image",
    "gitRepo",
)


def validate_spec(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    if not spec.get("containers"):
        errs.append(FieldError.required("spec.containers"))
    volumes = _validate_volumes(spec.get("volumes") or [], errs)
    seen: set[str] = set()
    for list_name in CONTAINER_LISTS:
        for i, container in enumerate(spec.get(list_name) or []):
            path = f"spec.{list_name}[{i}]"
            errs += _validate_container(container, path, volumes, list_name)
            name = container.get("name", "")
            if name and name in seen:
                errs.append(FieldError.duplicate(f"{path}.name", name))
            seen.add(name)
    errs += validate_ephemeral(spec)
    errs += _enum(spec, "restartPolicy", RESTART_POLICIES)
    errs += _enum(spec, "dnsPolicy", DNS_POLICIES)
    errs += validate_dns(spec)
    for key in ("nodeName", "serviceAccountName"):
        if spec.get(key):
            errs += [
                FieldError.invalid(f"spec.{key}", spec[key], p)
                for p in dns1123_subdomain(spec[key])
            ]
    deadline = spec.get("activeDeadlineSeconds")
    if deadline is not None and not 1 <= deadline <= 2147483647:
        errs.append(
            FieldError.invalid(
                "spec.activeDeadlineSeconds",
                deadline,
                "must be between 1 and 2147483647, inclusive",
            )
        )
    for i, toleration in enumerate(spec.get("tolerations") or []):
        errs += _validate_toleration(toleration, f"spec.tolerations[{i}]")
    return errs


def validate_ephemeral(spec: Obj) -> list[FieldError]:
    """``validateEphemeralContainers``' own checks (see the module doc)."""
    lists = ("containers", "initContainers")
    others = {c.get("name") for key in lists for c in spec.get(key) or []}
    errs: list[FieldError] = []
    for i, container in enumerate(spec.get("ephemeralContainers") or []):
        path = f"spec.ephemeralContainers[{i}]"
        target = container.get("targetContainerName")
        if target and target not in others:
            errs.append(FieldError.not_found(f"{path}.targetContainerName", target))
        errs += [
            FieldError.forbidden(f"{path}.{key}", NOT_FOR_EPHEMERAL)
            for key in EPHEMERAL_FORBIDDEN
            if container.get(key) not in (None, "", [], {})
        ]
        for j, mount in enumerate(container.get("volumeMounts") or []):
            errs += [
                FieldError.forbidden(f"{path}.volumeMounts[{j}].{key}", NOT_FOR_EPHEMERAL)
                for key in ("subPath", "subPathExpr")
                if mount.get(key)
            ]
    return errs


def _enum(obj: Obj, key: str, allowed: tuple[str, ...], path: str = "spec") -> list[FieldError]:
    value = obj.get(key)
    if value is None or value == "":
        return [FieldError.required(f"{path}.{key}")] if value == "" else []
    if value not in allowed:
        return [FieldError.not_supported(f"{path}.{key}", value, allowed)]
    return []


def _validate_volumes(volumes: list[Obj], errs: list[FieldError]) -> set[str]:
    names: set[str] = set()
    for i, volume in enumerate(volumes):
        path = f"spec.volumes[{i}]"
        name = volume.get("name", "")
        if not name:
            errs.append(FieldError.required(f"{path}.name"))
        else:
            errs += [FieldError.invalid(f"{path}.name", name, p) for p in dns1123_label(name)]
            if name in names:
                errs.append(FieldError.duplicate(f"{path}.name", name))
        names.add(name)
        sources = [s for s in _VOLUME_SOURCES if volume.get(s) is not None]
        if not sources:
            errs.append(FieldError.required(path, "must specify a volume type"))
        elif len(sources) > 1:
            errs.append(
                FieldError.forbidden(
                    f"{path}.{sources[1]}", "may not specify more than 1 volume type"
                )
            )
    return names


def _validate_container(
    container: Obj, path: str, volumes: set[str], list_name: str
) -> list[FieldError]:
    errs: list[FieldError] = []
    name = container.get("name", "")
    if not name:
        errs.append(FieldError.required(f"{path}.name"))
    else:
        errs += [FieldError.invalid(f"{path}.name", name, p) for p in dns1123_label(name)]
    if not container.get("image"):
        errs.append(FieldError.required(f"{path}.image"))
    errs += _enum(container, "imagePullPolicy", PULL_POLICIES, path)
    errs += _enum(container, "terminationMessagePolicy", ("File", "FallbackToLogsOnError"), path)
    for i, port in enumerate(container.get("ports") or []):
        number = port.get("containerPort", 0)
        if not 1 <= number <= 65535:
            errs.append(
                FieldError.invalid(
                    f"{path}.ports[{i}].containerPort",
                    number,
                    "must be between 1 and 65535, inclusive",
                )
            )
        errs += _enum(port, "protocol", PROTOCOLS, f"{path}.ports[{i}]")
    for i, env in enumerate(container.get("env") or []):
        if not env.get("name"):
            errs.append(FieldError.required(f"{path}.env[{i}].name"))
    mount_paths: set[str] = set()
    for i, mount in enumerate(container.get("volumeMounts") or []):
        mount_path = f"{path}.volumeMounts[{i}]"
        if not mount.get("name"):
            errs.append(FieldError.required(f"{mount_path}.name"))
        elif mount["name"] not in volumes:
            errs.append(FieldError.not_found(f"{mount_path}.name", mount["name"]))
        if not mount.get("mountPath"):
            errs.append(FieldError.required(f"{mount_path}.mountPath"))
        elif mount["mountPath"] in mount_paths:
            errs.append(
                FieldError.invalid(f"{mount_path}.mountPath", mount["mountPath"], "must be unique")
            )
        mount_paths.add(mount.get("mountPath", ""))
    return errs


def _validate_toleration(toleration: Obj, path: str) -> list[FieldError]:
    errs = []
    operator = toleration.get("operator", "Equal")
    if operator not in ("Equal", "Exists"):
        errs.append(FieldError.not_supported(f"{path}.operator", operator, ("Equal", "Exists")))
    if operator == "Exists" and toleration.get("value"):
        errs.append(
            FieldError.invalid(
                f"{path}.operator",
                toleration["value"],
                "value must be empty when `operator` is 'Exists'",
            )
        )
    effect = toleration.get("effect", "")
    if effect and effect not in TAINT_EFFECTS:
        errs.append(FieldError.not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    return errs


def spec_changes(new: Obj, old: Obj) -> list[FieldError]:
    """``ValidatePodUpdate``: the spec with its mutable parts taken from the old one must not
    differ from the old spec."""
    errs: list[FieldError] = []
    munged = copy.deepcopy(new)
    for list_name in ("containers", "initContainers"):
        old_list, new_list = old.get(list_name) or [], munged.get(list_name) or []
        if len(old_list) == len(new_list):
            for i, container in enumerate(new_list):
                container["image"] = old_list[i].get("image")
    errs += _deadline_change(new.get("activeDeadlineSeconds"), old.get("activeDeadlineSeconds"))
    _restore(munged, old, "activeDeadlineSeconds")
    new_tolerations = new.get("tolerations") or []
    if all(t in new_tolerations for t in old.get("tolerations") or []):
        _restore(munged, old, "tolerations")
    new_gates = [g.get("name") for g in new.get("schedulingGates") or []]
    old_gates = [g.get("name") for g in old.get("schedulingGates") or []]
    if all(g in old_gates for g in new_gates):
        _restore(munged, old, "schedulingGates")
    old_grace = old.get("terminationGracePeriodSeconds")
    if old_grace is not None and old_grace < 0 and new.get("terminationGracePeriodSeconds") == 1:
        _restore(munged, old, "terminationGracePeriodSeconds")
    if not semantically_equal(munged, old):
        errs.append(FieldError.forbidden("spec", MUTABLE_SPEC_MESSAGE + _diff(munged, old)))
    return errs


def _restore(munged: Obj, old: Obj, key: str) -> None:
    if key in old:
        munged[key] = copy.deepcopy(old[key])
    else:
        munged.pop(key, None)


def _deadline_change(new: int | None, old: int | None) -> list[FieldError]:
    path = "spec.activeDeadlineSeconds"
    if old is None or new == old:
        return []
    if new is None:
        return [
            FieldError.invalid(path, None, "must not update from a positive integer to nil value")
        ]
    if new > old:
        return [FieldError.invalid(path, new, "must be less than or equal to previous value")]
    return []


def _diff(new: Obj, old: Obj) -> str:
    keys = sorted(k for k in set(new) | set(old) if not semantically_equal(new.get(k), old.get(k)))
    lines = [f"  \t- {k}: {old.get(k)!r}\n  \t+ {k}: {new.get(k)!r}" for k in keys]
    return "\n  core.PodSpec{\n" + "\n".join(lines) + "\n  }\n"
