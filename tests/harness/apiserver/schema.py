"""Decode a request body as the Go server would, with the official client's models as schema.

kube-apiserver decodes JSON into Go structs: unknown fields vanish (or fail with
``fieldValidation=Strict``), a wrong JSON type is a 400, times are re-printed in RFC 3339
(seconds for ``metav1.Time``, microseconds for ``MicroTime``), ``null`` means "unset" and
required scalar fields come back as their zero value. The ``kubernetes`` package's models
(``openapi_types``/``attribute_map``, generated from the real OpenAPI) give the field types::

    clean, unknown = decode(body, "V1Pod")   # raises DecodeError on a type mismatch
    strategic.merge_key("V1PodSpec", "containers")  # uses field_type() for nested types
"""

from __future__ import annotations

import base64
import binascii
import datetime as dt
import functools
import re
from dataclasses import dataclass
from typing import Any

import kubernetes.client.models as models

from tests.harness.apiserver import quantities

TIME_LAYOUT = "2006-01-02T15:04:05Z07:00"
MICRO_LAYOUT = "2006-01-02T15:04:05.000000Z07:00"

# MicroTime fields (everything else typed ``datetime`` is a metav1.Time).
MICRO_TIME = {
    ("CoreV1Event", "eventTime"),
    ("EventsV1Event", "eventTime"),
    ("CoreV1EventSeries", "lastObservedTime"),
    ("EventsV1EventSeries", "lastObservedTime"),
    ("V1LeaseSpec", "acquireTime"),
    ("V1LeaseSpec", "renewTime"),
}
# Non-pointer time structs: Go prints them as ``null`` when unset.
NULL_WHEN_UNSET = {
    ("CoreV1Event", "eventTime"),
    ("CoreV1Event", "firstTimestamp"),
    ("CoreV1Event", "lastTimestamp"),
    ("EventsV1Event", "eventTime"),
    ("EventsV1Event", "deprecatedFirstTimestamp"),
    ("EventsV1Event", "deprecatedLastTimestamp"),
    ("V1PodCondition", "lastProbeTime"),
    ("V1PodCondition", "lastTransitionTime"),
    ("V1NodeCondition", "lastHeartbeatTime"),
    ("V1NodeCondition", "lastTransitionTime"),
    ("V1ContainerStateRunning", "startedAt"),
    ("V1ContainerStateTerminated", "startedAt"),
    ("V1ContainerStateTerminated", "finishedAt"),
}
# resource.Quantity values (maps of them, or one), re-printed in canonical form.
QUANTITIES = {
    ("V1ResourceRequirements", "limits"),
    ("V1ResourceRequirements", "requests"),
    ("V1NodeStatus", "capacity"),
    ("V1NodeStatus", "allocatable"),
    ("V1PodSpec", "overhead"),
    ("V1Overhead", "podFixed"),
    ("V1EmptyDirVolumeSource", "sizeLimit"),
    ("V1ContainerStatus", "allocatedResources"),
    ("V1PersistentVolumeSpec", "capacity"),
    ("V1PersistentVolumeClaimStatus", "capacity"),
    ("V1PersistentVolumeClaimStatus", "allocatedResources"),
    ("V1VolumeResourceRequirements", "limits"),
    ("V1VolumeResourceRequirements", "requests"),
}
_ZERO = {"str": "", "int": 0, "bool": False, "float": 0.0}
_TIME_RE = re.compile(r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(\.\d+)?(Z|[+-]\d{2}:\d{2})")
_VERSION_PREFIX = re.compile(r"^(Core|Events|Authentication|Storage)?V\d+((alpha|beta)\d+)?")


class DecodeError(ValueError):
    """The body cannot become the Go type: the text after ``cannot be handled as a <Kind>:``."""


@dataclass(frozen=True)
class FieldSpec:
    type: str
    required: bool


@functools.cache
def fields_of(model: str) -> dict[str, FieldSpec]:
    """JSON key → type string (``str``, ``List[V1Container]``, ``V1ObjectMeta``...)."""
    cls = getattr(models, model)
    specs = {}
    for attr, json_key in cls.attribute_map.items():
        info = cls.model_fields.get(attr)
        required = bool(info is not None and info.is_required())
        specs[json_key] = FieldSpec(cls.openapi_types[attr], required)
    return specs


def field_type(model: str, key: str) -> str | None:
    spec = fields_of(model).get(key) if is_model(model) else None
    return spec.type if spec else None


def is_model(type_name: str) -> bool:
    return type_name[:1].isupper() and hasattr(models, type_name)


def element_type(type_name: str) -> str:
    """``List[X]`` → ``X``; ``Dict[str, X]`` → ``X``."""
    if type_name.startswith("List["):
        return type_name[5:-1]
    if type_name.startswith("Dict["):
        return type_name.split(", ", 1)[1][:-1]
    return type_name


def go_struct(model: str) -> str:
    return _VERSION_PREFIX.sub("", model)


def decode(body: Any, model: str) -> tuple[dict[str, Any], list[str]]:
    """The body as the server keeps it, and the paths of the unknown fields it dropped."""
    if not isinstance(body, dict):
        raise DecodeError(
            f"json: cannot unmarshal {_json_kind(body)} into Go value of type {_go_type(model)}"
        )
    walker = _Walker()
    return walker.model(body, model, ""), walker.unknown


class _Walker:
    def __init__(self) -> None:
        self.unknown: list[str] = []

    def model(self, value: dict[str, Any], model: str, path: str) -> dict[str, Any]:
        out: dict[str, Any] = {}
        specs = fields_of(model)
        for key, item in value.items():
            child = f"{path}.{key}" if path else key
            spec = specs.get(key)
            if spec is None:
                self.unknown.append(child)
                continue
            if item is None:
                if (model, key) in NULL_WHEN_UNSET:
                    out[key] = None
                continue
            value = self.value(item, spec.type, child, (model, key))
            if value in ([], {}) and not spec.required and spec.type[:5] in ("List[", "Dict["):
                continue  # an empty optional list or map: omitempty drops it
            out[key] = value
        for key, spec in specs.items():
            if key in out:
                continue
            if spec.required and spec.type in _ZERO:
                out[key] = _ZERO[spec.type]
            elif (model, key) in NULL_WHEN_UNSET:
                out[key] = None
        return out

    def value(self, item: Any, type_name: str, path: str, owner: tuple[str, str]) -> Any:
        if type_name.startswith("List["):
            self._expect(item, list, type_name, path, owner)
            inner = element_type(type_name)
            return [
                self.value(v, inner, f"{path}[{i}]", owner) if v is not None else _empty(inner)
                for i, v in enumerate(item)
            ]
        if type_name.startswith("Dict["):
            self._expect(item, dict, type_name, path, owner)
            inner = element_type(type_name)
            return {
                k: self.value(v, inner, f"{path}.{k}", owner) if v is not None else _empty(inner)
                for k, v in item.items()
            }
        if is_model(type_name):
            self._expect(item, dict, type_name, path, owner)
            return self.model(item, type_name, path)
        return self.scalar(item, type_name, path, owner)

    def scalar(self, item: Any, type_name: str, path: str, owner: tuple[str, str]) -> Any:
        if type_name == "object":
            return item
        if type_name == "str":
            self._expect(item, str, type_name, path, owner)
            if owner in QUANTITIES:
                return _quantity(item)
            return item
        if type_name == "bool":
            self._expect(item, bool, type_name, path, owner)
            return item
        if type_name in ("int", "float"):
            return self._number(item, type_name, path, owner)
        if type_name == "datetime":
            self._expect(item, str, type_name, path, owner)
            return normalize_time(item, owner in MICRO_TIME)
        if type_name == "bytes":
            self._expect(item, str, type_name, path, owner)
            return _check_base64(item)
        return item

    def _number(self, item: Any, type_name: str, path: str, owner: tuple[str, str]) -> Any:
        if isinstance(item, bool) or not isinstance(item, int | float):
            self._fail(item, type_name, path, owner)
        if type_name == "int":
            if isinstance(item, float) and not item.is_integer():
                raise DecodeError(
                    f"json: cannot unmarshal number {item} into Go struct field "
                    f"{go_struct(owner[0])}.{path} of type int32"
                )
            return int(item)
        return float(item)

    def _expect(
        self, item: Any, python_type: type, type_name: str, path: str, owner: tuple[str, str]
    ) -> None:
        if not isinstance(item, python_type):
            self._fail(item, type_name, path, owner)

    def _fail(self, item: Any, type_name: str, path: str, owner: tuple[str, str]) -> None:
        raise DecodeError(
            f"json: cannot unmarshal {_json_kind(item)} into Go struct field "
            f"{go_struct(owner[0])}.{path} of type {_go_type(type_name)}"
        )


def _quantity(text: str) -> str:
    try:
        return quantities.canonical(text)
    except quantities.QuantityError as exc:
        raise DecodeError(str(exc)) from None


def _empty(type_name: str) -> Any:
    if is_model(type_name):
        return {}
    return _ZERO.get(type_name)


def _json_kind(value: Any) -> str:
    if isinstance(value, bool):
        return "bool"
    if isinstance(value, int | float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    if isinstance(value, dict):
        return "object"
    return "null"


def _go_type(type_name: str) -> str:
    if type_name.startswith("List["):
        return "[]" + _go_type(element_type(type_name))
    if type_name.startswith("Dict["):
        return "map[string]" + _go_type(element_type(type_name))
    simple = {
        "str": "string",
        "int": "int32",
        "bool": "bool",
        "float": "float64",
        "bytes": "[]uint8",
        "datetime": "v1.Time",
        "object": "interface {}",
    }
    if type_name in simple:
        return simple[type_name]
    return "v1." + go_struct(type_name)


def _check_base64(value: str) -> str:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        position = next(
            (i for i, c in enumerate(value) if not (c.isalnum() or c in "+/=")),
            len(value) - len(value) % 4,
        )
        raise DecodeError(f"illegal base64 data at input byte {position}") from None
    return value


# --------------------------------------------------------------------------- time


def parse_time(text: str, micro: bool = False) -> dt.datetime:
    """``time.Parse(RFC3339)``, or the stricter ``RFC3339Micro`` layout of MicroTime."""
    match = _TIME_RE.fullmatch(text)
    layout = MICRO_LAYOUT if micro else TIME_LAYOUT
    if match is None:
        raise DecodeError(f'parsing time "{text}" as "{layout}": cannot parse "{text}" as "2006"')
    fraction, zone = match.group(7), match.group(8)
    if micro and (fraction is None or len(fraction) != 7):
        rest = text[match.start(7) if fraction else match.start(8) :]
        raise DecodeError(
            f'parsing time "{text}" as "{layout}": cannot parse "{rest}" as ".000000"'
        )
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    micros = int((fraction or ".0")[1:7].ljust(6, "0"))
    if zone == "Z":
        tz = dt.UTC
    else:
        sign = 1 if zone[0] == "+" else -1
        tz = dt.timezone(sign * dt.timedelta(hours=int(zone[1:3]), minutes=int(zone[4:6])))
    try:
        stamp = dt.datetime(year, month, day, hour, minute, second, micros, tzinfo=tz)
    except ValueError as exc:
        raise DecodeError(f'parsing time "{text}": {exc}') from None
    return stamp.astimezone(dt.UTC)


def format_time(stamp: dt.datetime, micro: bool = False) -> str:
    stamp = stamp.astimezone(dt.UTC)
    if micro:
        return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return stamp.strftime("%Y-%m-%dT%H:%M:%SZ")


def normalize_time(text: str, micro: bool = False) -> str:
    return format_time(parse_time(text, micro), micro)
