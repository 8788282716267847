"""A container's ``env`` and ``envFrom``, and the downward API selectors they share with volumes.

Validation follows the API server's (``ValidateEnv``, ``validateObjectFieldSelector``,
``validateContainerResourceFieldSelector``): which field paths an env var or a
downward API volume file may select, which resources and divisors a
``resourceFieldRef`` may use. Resolving the values is the supervisor's job
(``supervisor/envvars.py``, ``supervisor/downward.py``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.fieldcheck import InvalidField

ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")


def is_env_var_name(name: str) -> bool:
    """``IsEnvVarName``: the pattern, and not ``.``, ``..`` or anything starting ``..``."""
    return bool(ENV_NAME.match(name)) and name != "." and not name.startswith("..")


# The API's validEnvDownwardAPIFieldPathExpressions and validVolume... (plus subscripts).
ENV_FIELD_PATHS = (
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
    "spec.nodeName",
    "spec.serviceAccountName",
    "status.hostIP",
    "status.hostIPs",
    "status.podIP",
    "status.podIPs",
)
VOLUME_FIELD_PATHS = (
    "metadata.annotations",
    "metadata.labels",
    "metadata.name",
    "metadata.namespace",
    "metadata.uid",
)
SUBSCRIPTED = ("metadata.annotations", "metadata.labels")
RESOURCES = (
    "limits.cpu",
    "limits.memory",
    "limits.ephemeral-storage",
    "requests.cpu",
    "requests.memory",
    "requests.ephemeral-storage",
)
HUGEPAGES_PREFIXES = ("limits.hugepages-", "requests.hugepages-")
CPU_DIVISORS = (Fraction(1, 1000), Fraction(1))
MEMORY_DIVISOR_TEXT = "1, 1k, 1M, 1G, 1T, 1P, 1E, 1Ki, 1Mi, 1Gi, 1Ti, 1Pi, 1Ei"
MEMORY_DIVISORS = tuple(quantity.parse(d) for d in MEMORY_DIVISOR_TEXT.split(", "))


@dataclass(frozen=True, slots=True)
class ResourceRef:
    resource: str  # e.g. "limits.memory"
    container_name: str = ""  # "" is the container itself (env vars only)
    divisor: Fraction = Fraction(1)


@dataclass(frozen=True, slots=True)
class KeyRef:
    """``configMapKeyRef`` or ``secretKeyRef``: an object of the API."""

    kind: str  # "configmap" or "secret", as the kubelet names them in errors
    name: str
    key: str
    optional: bool = False


@dataclass(frozen=True, slots=True)
class EnvVar:
    name: str
    value: str = ""
    field_path: str = ""
    resource: ResourceRef | None = None
    key_ref: KeyRef | None = None

    @property
    def has_source(self) -> bool:
        return bool(self.field_path) or self.resource is not None or self.key_ref is not None


@dataclass(frozen=True, slots=True)
class EnvFrom:
    kind: str  # "configmap" or "secret"
    name: str
    prefix: str = ""
    optional: bool = False


def split_subscript(path: str) -> tuple[str, str] | None:
    """``metadata.labels['app']`` -> ``("metadata.labels", "app")``; else None."""
    if not path.endswith("']"):
        return None
    head, sep, key = path[:-2].partition("['")
    return (head, key) if sep and head else None


def field_path(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    selector = f.mapping(value, path)
    version = selector.get("apiVersion", "v1") or "v1"
    if version != "v1":
        raise InvalidField(f"{path}.apiVersion: unsupported value {version!r}: must be v1")
    text = f.string(selector.get("fieldPath"), f"{path}.fieldPath", required=True)
    subscripted = split_subscript(text)
    if subscripted is not None and subscripted[0] in SUBSCRIPTED and subscripted[1]:
        return text
    if text not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise InvalidField(
            f"{path}.fieldPath: unsupported value {text!r}: supported values: {shown}"
        )
    return text


def resource_ref(value: Any, path: str, need_container: bool) -> ResourceRef:
    selector = f.mapping(value, path)
    container = f.string(selector.get("containerName"), f"{path}.containerName")
    if need_container and not container:
        raise InvalidField(f"{path}.containerName: required value")
    name = f.string(selector.get("resource"), f"{path}.resource", required=True)
    if name not in RESOURCES and not name.startswith(HUGEPAGES_PREFIXES):
        shown = ", ".join(repr(r) for r in RESOURCES)
        raise InvalidField(
            f"{path}.resource: unsupported value {name!r}: supported values: {shown}"
        )
    divisor = Fraction(1)
    if selector.get("divisor") is not None:
        try:
            divisor = quantity.parse(selector["divisor"])
        except quantity.BadQuantity as exc:
            raise InvalidField(f"{path}.divisor: invalid value: {exc}") from exc
        if divisor == 0:
            divisor = Fraction(1)  # the zero quantity is "unset"
        elif name.endswith(".cpu") and divisor not in CPU_DIVISORS:
            raise InvalidField(
                f"{path}.divisor: invalid value {name!r}: "
                "only divisor's values 1m and 1 are supported with the cpu resource"
            )
        elif not name.endswith(".cpu") and divisor not in MEMORY_DIVISORS:
            what = name.split(".", 1)[1]
            what = "hugepages" if what.startswith("hugepages-") else what
            raise InvalidField(
                f"{path}.divisor: invalid value {name!r}: only divisor's values "
                f"{MEMORY_DIVISOR_TEXT} are supported with the {what} resource"
            )
    return ResourceRef(name, container, divisor)


def parse_env(container: dict[str, Any], path: str) -> tuple[EnvVar, ...]:
    found = []
    for i, item in enumerate(f.items(container.get("env"), f"{path}.env")):
        where = f"{path}.env[{i}]"
        entry = f.mapping(item, where)
        name = f.string(entry.get("name"), f"{where}.name", required=True)
        if not is_env_var_name(name):
            raise InvalidField(f"{where}.name: invalid environment variable name {name!r}")
        value = f.string(entry.get("value"), f"{where}.value")
        source = f.optional_mapping(entry.get("valueFrom"), f"{where}.valueFrom")
        if source is None:
            found.append(EnvVar(name, value))
            continue
        if value:
            raise InvalidField(
                f"{where}.valueFrom: invalid value: may not be specified when `value` is not empty"
            )
        found.append(_value_from(name, source, f"{where}.valueFrom"))
    return tuple(found)


def _value_from(name: str, source: dict[str, Any], path: str) -> EnvVar:
    kinds = [
        k
        for k in ("fieldRef", "resourceFieldRef", "configMapKeyRef", "secretKeyRef")
        if k in source
    ]
    if len(kinds) != 1:
        problem = (
            "may not have more than one field specified at a time"
            if kinds
            else (
                "must specify one of: `fieldRef`, `resourceFieldRef`, `configMapKeyRef` or "
                "`secretKeyRef`"
            )
        )
        raise InvalidField(f"{path}: invalid value: {problem}")
    kind = kinds[0]
    if kind == "fieldRef":
        return EnvVar(
            name, field_path=field_path(source[kind], f"{path}.fieldRef", ENV_FIELD_PATHS)
        )
    if kind == "resourceFieldRef":
        return EnvVar(name, resource=resource_ref(source[kind], f"{path}.{kind}", False))
    ref = f.mapping(source[kind], f"{path}.{kind}")
    return EnvVar(
        name,
        key_ref=KeyRef(
            "configmap" if kind == "configMapKeyRef" else "secret",
            f.string(ref.get("name"), f"{path}.{kind}.name", required=True),
            f.string(ref.get("key"), f"{path}.{kind}.key", required=True),
            bool(f.boolean(ref.get("optional"), f"{path}.{kind}.optional")),
        ),
    )


def parse_env_from(container: dict[str, Any], path: str) -> tuple[EnvFrom, ...]:
    found = []
    for i, item in enumerate(f.items(container.get("envFrom"), f"{path}.envFrom")):
        where = f"{path}.envFrom[{i}]"
        entry = f.mapping(item, where)
        kinds = [k for k in ("configMapRef", "secretRef") if entry.get(k) is not None]
        if len(kinds) != 1:
            problem = (
                "may not have more than one field specified at a time"
                if kinds
                else "must specify one of: `configMapRef` or `secretRef`"
            )
            raise InvalidField(f"{where}: invalid value: {problem}")
        ref = f.mapping(entry[kinds[0]], f"{where}.{kinds[0]}")
        prefix = f.string(entry.get("prefix"), f"{where}.prefix")
        if prefix and not is_env_var_name(prefix):
            raise InvalidField(f"{where}.prefix: invalid environment variable name {prefix!r}")
        found.append(
            EnvFrom(
                "configmap" if kinds[0] == "configMapRef" else "secret",
                f.string(ref.get("name"), f"{where}.{kinds[0]}.name", required=True),
                prefix,
                bool(f.boolean(ref.get("optional"), f"{where}.{kinds[0]}.optional")),
            )
        )
    return tuple(found)
