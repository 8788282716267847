"""A container's environment, command and args, made as the kubelet makes them.

``make_env`` is the kubelet's ``makeEnvironmentVariables``: the service variables
(``serviceenv``) first, then the ``envFrom`` sources, then ``env`` in order, a later
name replacing an earlier one; a literal value has its ``$(VAR)`` references expanded
against what is defined so far (service variables included); a ``valueFrom`` value
comes from the downward API or an API object and is not expanded.
``expand_command`` is ``ExpandContainerCommandAndArgs``: ``$(VAR)`` in command and
args against the final environment.

API objects come from ``ApiObjects``, with the kubelet's messages: a missing object
(``configmap "x" not found``) or key (``couldn't find key k in ConfigMap ns/x``) is a
``ConfigError`` unless the reference is ``optional``, which skips it. An ``envFrom``
key that is not a valid variable name (with its ``prefix``) is skipped and reported
as ``InvalidEnvironmentVariableNames``. An object not read yet raises ``ConfigPending``:
the container waits for it. Services not listed yet fail an API pod as the kubelet
does (``services have not yet been read at least once``); a static pod takes what
there is. A standalone node has no Services, so no service variables at all.
Values are never logged.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pkletd.ipc.apimodel.envspec import EnvFrom, EnvVar, KeyRef, is_env_var_name
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects, ObjectUnavailable
from pkletd.supervisor.pods.setup import downward, serviceenv
from pkletd.supervisor.pods.setup.projection import object_files

SOURCE_ANNOTATION = "kubernetes.io/config.source"  # "file" or "http" for a static pod
KINDS = {"configmap": ObjectKind.CONFIG_MAP, "secret": ObjectKind.SECRET}
KIND_IN_MESSAGES = {"configmap": "configMap", "secret": "secret"}  # "the EnvFrom configMap"
KIND_OF_KEY = {"configmap": "ConfigMap", "secret": "Secret"}  # "couldn't find key k in Secret"


class ConfigError(Exception):
    """The container cannot be configured; the message is the kubelet's.

    Reported as the container's waiting reason ``CreateContainerConfigError``.
    """


class ConfigPending(Exception):
    """An object the environment needs has not been read yet: the container waits."""


@dataclass(frozen=True, slots=True)
class Environment:
    values: list[tuple[str, str]]
    invalid_names: list[str] = field(default_factory=list)  # InvalidEnvironmentVariableNames


def expand(text: str, env: Mapping[str, str], missing: set[str] | None = None) -> str:
    """``$(NAME)`` -> its value if defined, else left as written; ``$$`` -> ``$``.

    The kubelet's ``third_party/forked/golang/expansion``: ``$`` followed by
    anything else, a ``$(`` without ``)``, and a final ``$`` are kept as they are.
    Names not in ``env`` are added to ``missing`` if given.
    """
    out: list[str] = []
    i = 0
    while i < len(text):
        char = text[i]
        if char != "$" or i + 1 == len(text):
            out.append(char)
            i += 1
            continue
        after = text[i + 1]
        if after == "$":
            out.append("$")
            i += 2
        elif after == "(":
            close = text.find(")", i + 2)
            if close < 0:
                out.append("$(")
                i += 2
                continue
            name = text[i + 2 : close]
            if name not in env and missing is not None:
                missing.add(name)
            out.append(env[name] if name in env else f"$({name})")
            i = close + 1
        else:
            out.append("$" + after)
            i += 2
    return "".join(out)


def make_env(
    pod: Pod,
    container: Container,
    node: NodeInfo,
    objects: ApiObjects,
    pod_ips: Sequence[str] = (),
) -> Environment:
    env = service_env(pod, objects)
    invalid: list[str] = []
    for source in container.env_from:
        found = _env_from(pod, source, objects)
        if found is None:
            continue
        env.update(found[0])
        if found[1]:
            invalid.append(
                f"Keys [{', '.join(sorted(found[1]))}] from the EnvFrom "
                f"{KIND_IN_MESSAGES[source.kind]} {pod.namespace}/{source.name} were skipped "
                "since they are considered invalid environment variable names."
            )
    for var in container.env:
        value = _value(pod, container, var, env, node, objects, pod_ips)
        if value is not None:
            env[var.name] = value
    return Environment(list(env.items()), invalid)


def service_env(pod: Pod, objects: ApiObjects) -> dict[str, str]:
    """``getServiceEnvVarMap``: the variables of the Services the pod sees."""
    spec = pod.raw.get("spec") or {}
    links = spec.get("enableServiceLinks") is not False
    default = _services(pod, objects, serviceenv.DEFAULT_NAMESPACE)
    own = _services(pod, objects, pod.namespace) if links else []
    return dict(serviceenv.from_services(serviceenv.visible(default, own, links)))


def _services(pod: Pod, objects: ApiObjects, namespace: str) -> list[dict[str, Any]]:
    try:
        return objects.services(namespace)
    except ObjectUnavailable as exc:
        if pod.annotations.get(SOURCE_ANNOTATION, PodSource.API) != PodSource.API:
            return []  # a static pod does not wait for the Services to be listed
        raise ConfigError(str(exc)) from exc


def _object(
    pod: Pod, kind: str, name: str, optional: bool, objects: ApiObjects
) -> dict[str, str] | None:
    """The object's keys as variable values (a ConfigMap's ``data``, a Secret's
    ``data``); None for a missing optional one."""
    try:
        found = objects.get(ObjectKey(KINDS[kind], pod.namespace, name))
    except ObjectUnavailable as exc:
        if exc.pending:
            raise ConfigPending(f'{kind} "{name}"') from exc
        if exc.missing and optional:
            return None
        raise ConfigError(str(exc)) from exc
    if kind == "configmap":
        return dict(found.strings)  # binaryData never becomes a variable
    values = {}
    for key, data in object_files(found).items():
        try:
            values[key] = data.decode()
        except UnicodeDecodeError as exc:
            raise ConfigError(
                f"couldn't use key {key} in Secret {pod.namespace}/{name}: not valid UTF-8"
            ) from exc
    return values


def _env_from(
    pod: Pod, source: EnvFrom, objects: ApiObjects
) -> tuple[dict[str, str], list[str]] | None:
    """The variables of one ``envFrom`` source and the names skipped as invalid."""
    values = _object(pod, source.kind, source.name, source.optional, objects)
    if values is None:
        return None
    named = {source.prefix + key: value for key, value in values.items()}
    invalid = [name for name in named if not is_env_var_name(name)]
    return {k: v for k, v in named.items() if k not in invalid}, invalid


def _key_value(pod: Pod, ref: KeyRef, objects: ApiObjects) -> str | None:
    values = _object(pod, ref.kind, ref.name, ref.optional, objects)
    if values is None:
        return None
    if ref.key not in values:
        if ref.optional:
            return None
        raise ConfigError(
            f"couldn't find key {ref.key} in {KIND_OF_KEY[ref.kind]} {pod.namespace}/{ref.name}"
        )
    return values[ref.key]


def _value(
    pod: Pod,
    container: Container,
    var: EnvVar,
    defined: Mapping[str, str],
    node: NodeInfo,
    objects: ApiObjects,
    pod_ips: Sequence[str],
) -> str | None:
    """The variable's value; None if it is to be left out (an optional missing key)."""
    if var.value:
        return expand(var.value, defined)
    try:
        if var.field_path:
            return downward.field_value(pod, var.field_path, pod_ips, node.host_ips)
        if var.resource is not None:
            return downward.resource_value(pod, container.name, var.resource, node)
    except LookupError as exc:
        raise ConfigError(str(exc)) from exc
    if var.key_ref is not None:
        return _key_value(pod, var.key_ref, objects)
    return ""


def expand_command(
    container: Container, env: Sequence[tuple[str, str]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    values = dict(env)
    return (
        tuple(expand(part, values) for part in container.command),
        tuple(expand(part, values) for part in container.args),
    )
