"""Container probes (liveness, readiness, startup) and lifecycle hooks, as the Pod API defines them.

``parse_probes`` validates a container's probes with the API server's rules and
fills in the API's defaults (periodSeconds 10, timeoutSeconds 1,
successThreshold 1, failureThreshold 3, initialDelaySeconds 0); errors carry the
field path. A probe has exactly one handler: exec, httpGet, tcpSocket or grpc.

A lifecycle hook (``lifecycle.postStart`` / ``lifecycle.preStop``) has the same
shape with type ``postStart`` or ``preStop`` and one handler of exec, httpGet or
sleep, since the kubelet runs hooks through the same handlers as probes.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Any


class ProbeType(enum.StrEnum):
    """What a probe is for; a lifecycle hook is a ``Probe`` of type postStart or preStop."""

    LIVENESS = "liveness"
    READINESS = "readiness"
    STARTUP = "startup"
    POST_START = "postStart"
    PRE_STOP = "preStop"


KINDS = {
    "livenessProbe": ProbeType.LIVENESS,
    "readinessProbe": ProbeType.READINESS,
    "startupProbe": ProbeType.STARTUP,
}
HANDLERS = ("exec", "httpGet", "tcpSocket", "grpc")
HOOKS = {
    ProbeType.POST_START: ("exec", "httpGet", "sleep"),
    ProbeType.PRE_STOP: ("exec", "httpGet", "sleep"),
}


class InvalidProbe(ValueError):
    """A probe the API server would refuse; the message starts with the field path."""


@dataclass(frozen=True, slots=True)
class Probe:
    type: ProbeType
    handler: str  # exec | httpGet | tcpSocket | grpc
    command: tuple[str, ...] = ()
    port: int | str = 0  # a number, or the name of one of the container's ports
    host: str = ""
    path: str = "/"
    scheme: str = "HTTP"
    headers: tuple[tuple[str, str], ...] = ()
    service: str = ""
    sleep_s: int = 0
    initial_delay_s: int = 0
    period_s: int = 10
    timeout_s: int = 1
    success_threshold: int = 1
    failure_threshold: int = 3
    termination_grace_s: int | None = None


def parse_probes(container: dict[str, Any], path: str) -> tuple[Probe, ...]:
    probes = []
    for field, kind in KINDS.items():
        if container.get(field) is not None:
            probes.append(_probe(container[field], kind, f"{path}.{field}"))
    return tuple(probes)


def parse_hooks(container: dict[str, Any], path: str) -> dict[ProbeType, Probe]:
    """The container's lifecycle hooks by type (postStart, preStop)."""
    lifecycle = container.get("lifecycle") or {}
    if not isinstance(lifecycle, dict):
        raise InvalidProbe(f"{path}.lifecycle: must be a mapping")
    hooks = {}
    for kind, allowed in HOOKS.items():
        value = lifecycle.get(kind)
        if value is not None:
            where = f"{path}.lifecycle.{kind}"
            handler = _one_handler(value, where, allowed)
            if handler == "sleep":
                seconds = _int(value["sleep"], "seconds", 0, where + ".sleep", low=0)
                hooks[kind] = Probe(kind, "sleep", sleep_s=seconds)
            else:
                hooks[kind] = Probe(
                    kind, handler, **_handler(handler, value[handler], f"{where}.{handler}")
                )
    return hooks


def _one_handler(value: Any, path: str, allowed: tuple[str, ...]) -> str:
    if not isinstance(value, dict):
        raise InvalidProbe(f"{path}: must be a mapping")
    handlers = [h for h in allowed if value.get(h) is not None]
    if len(handlers) != 1:
        raise InvalidProbe(f"{path}: must specify exactly one handler of {', '.join(allowed)}")
    return handlers[0]


def _probe(value: Any, kind: ProbeType, path: str) -> Probe:
    handler = _one_handler(value, path, HANDLERS)
    success = _int(value, "successThreshold", 1, path, low=1)
    if kind is not ProbeType.READINESS and success != 1:
        raise InvalidProbe(f"{path}.successThreshold: must be 1 for {kind} probes")
    grace = value.get("terminationGracePeriodSeconds")
    if grace is not None and (not _is_int(grace) or grace < 1):
        raise InvalidProbe(f"{path}.terminationGracePeriodSeconds: must be a positive integer")
    return Probe(
        type=kind,
        handler=handler,
        initial_delay_s=_int(value, "initialDelaySeconds", 0, path, low=0),
        period_s=_int(value, "periodSeconds", 10, path, low=1),
        timeout_s=_int(value, "timeoutSeconds", 1, path, low=1),
        success_threshold=success,
        failure_threshold=_int(value, "failureThreshold", 3, path, low=1),
        termination_grace_s=grace,
        **_handler(handler, value[handler], f"{path}.{handler}"),
    )


def _handler(handler: str, spec: Any, path: str) -> dict[str, Any]:
    if not isinstance(spec, dict):
        raise InvalidProbe(f"{path}: must be a mapping")
    if handler == "exec":
        command = spec.get("command")
        if (
            not isinstance(command, list)
            or not command
            or not all(isinstance(c, str) for c in command)
        ):
            raise InvalidProbe(f"{path}.command: must be a non-empty list of strings")
        return {"command": tuple(command)}
    out: dict[str, Any] = {"port": _port(spec.get("port"), f"{path}.port", named=handler != "grpc")}
    if handler == "grpc":
        out["service"] = _str(spec.get("service", ""), f"{path}.service")
        return out
    out["host"] = _str(spec.get("host", ""), f"{path}.host")
    if handler == "httpGet":
        out["path"] = _str(spec.get("path", "/"), f"{path}.path") or "/"
        scheme = spec.get("scheme", "HTTP")
        if scheme not in ("HTTP", "HTTPS"):
            raise InvalidProbe(
                f"{path}.scheme: unsupported value {scheme!r}: supported values: HTTP, HTTPS"
            )
        out["scheme"] = scheme
        out["headers"] = _headers(spec.get("httpHeaders", []), f"{path}.httpHeaders")
    return out


def _headers(value: Any, path: str) -> tuple[tuple[str, str], ...]:
    if not isinstance(value, list):
        raise InvalidProbe(f"{path}: must be a list")
    headers = []
    for i, item in enumerate(value):
        if not isinstance(item, dict):
            raise InvalidProbe(f"{path}[{i}]: must be a mapping")
        name = _str(item.get("name"), f"{path}[{i}].name")
        if not name:
            raise InvalidProbe(f"{path}[{i}].name: required value")
        headers.append((name, _str(item.get("value", ""), f"{path}[{i}].value")))
    return tuple(headers)


def _port(value: Any, path: str, named: bool) -> int | str:
    if _is_int(value) and 1 <= value <= 65535:
        return int(value)
    if named and isinstance(value, str) and value:
        return value
    kind = "an integer in 1..65535 or a port name" if named else "an integer in 1..65535"
    raise InvalidProbe(f"{path}: must be {kind}, got {value!r}")


def _int(spec: dict[str, Any], field: str, default: int, path: str, low: int) -> int:
    value = spec.get(field, default)
    if value is None or value == 0 and low > 0:
        value = default  # the API defaults a zero period/timeout/threshold
    if not _is_int(value) or value < low:
        raise InvalidProbe(f"{path}.{field}: must be an integer >= {low}, got {value!r}")
    return int(value)


def _str(value: Any, path: str) -> str:
    if not isinstance(value, str):
        raise InvalidProbe(f"{path}: must be a string, got {type(value).__name__}")
    return value


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
