"""A container's environment, command and args, made as the kubelet makes them.

``make_env`` is the kubelet's ``makeEnvironmentVariables``: ``envFrom`` sources
first, then ``env`` in order, a later name replacing an earlier one; a literal
value has its ``$(VAR)`` references expanded against what is defined so far; a
``valueFrom`` value comes from the downward API and is not expanded.
``expand_command`` is ``ExpandContainerCommandAndArgs``: ``$(VAR)`` in command
and args against the final environment.

Without an API server there are no ConfigMaps or Secrets: a reference to one
fails as a missing object does under the kubelet (``configmap "x" not found``),
unless it is ``optional``, which skips it. There are no Services either, so the
service links (``<SVC>_SERVICE_HOST`` ...) and the master service's
``KUBERNETES_SERVICE_*`` variables, which the kubelet adds only from the
Services it lists, are not added.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from pkletd.ipc.apimodel.envspec import EnvVar
from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup import downward


class ConfigError(Exception):
    """The container cannot be configured; the message is the kubelet's.

    Reported as the container's waiting reason ``CreateContainerConfigError``.
    """


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


def not_found(kind: str, name: str) -> str:
    """The API's NotFound as the kubelet's object managers word it."""
    return f'{kind} "{name}" not found'


def make_env(
    pod: Pod,
    container: Container,
    node: NodeInfo,
    pod_ips: Sequence[str] = (),
) -> list[tuple[str, str]]:
    env: dict[str, str] = {}
    for source in container.env_from:
        if not source.optional:
            raise ConfigError(not_found(source.kind, source.name))
    for var in container.env:
        value = _value(pod, container, var, env, node, pod_ips)
        if value is not None:
            env[var.name] = value
    return list(env.items())


def _value(
    pod: Pod,
    container: Container,
    var: EnvVar,
    defined: Mapping[str, str],
    node: NodeInfo,
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
        if var.key_ref.optional:
            return None
        raise ConfigError(not_found(var.key_ref.kind, var.key_ref.name))
    return ""


def expand_command(
    container: Container, env: Sequence[tuple[str, str]]
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    values = dict(env)
    return (
        tuple(expand(part, values) for part in container.command),
        tuple(expand(part, values) for part in container.args),
    )
