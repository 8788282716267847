"""Field errors and the shared validators (names, labels, object metadata), worded as Kubernetes.

A strategy collects ``FieldError`` values and ``errors.invalid`` turns them into the 422 Status
whose message and ``details.causes`` match apimachinery's ``field.Error``::

    errs = validate_meta_create(obj, namespaced=True, name_check=dns1123_subdomain)
    errs += [FieldError.required("spec.containers")]
"""

from __future__ import annotations

import enum
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

_OMIT = object()


class ErrorType(enum.Enum):
    """``field.ErrorType``: the cause ``reason`` and the words printed before the value."""

    REQUIRED = ("FieldValueRequired", "Required value")
    INVALID = ("FieldValueInvalid", "Invalid value")
    DUPLICATE = ("FieldValueDuplicate", "Duplicate value")
    NOT_SUPPORTED = ("FieldValueNotSupported", "Unsupported value")
    FORBIDDEN = ("FieldValueForbidden", "Forbidden")
    TOO_LONG = ("FieldValueTooLong", "Too long")
    NOT_FOUND = ("FieldValueNotFound", "Not found")

    @property
    def reason(self) -> str:
        return self.value[0]

    @property
    def words(self) -> str:
        return self.value[1]


def go_quote(value: str) -> str:
    """Go's ``%q`` for the strings we meet (JSON escaping is the same for them)."""
    return json.dumps(value, ensure_ascii=False)


class GoLiteral(str):
    """A value printed verbatim (e.g. ``0x0``, how Go's ``%#v`` prints a uint64 zero)."""


def go_value(value: Any) -> str:
    if isinstance(value, GoLiteral):
        return str(value)
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return go_quote(value)
    return json.dumps(value, separators=(",", ":"))


@dataclass(frozen=True)
class FieldError:
    """One ``field.Error``: ``str()`` is ``<field>: <body>`` as in the Status message."""

    type: ErrorType
    field: str
    value: Any = _OMIT
    detail: str = ""

    def body(self) -> str:
        shows_value = self.type not in (
            ErrorType.REQUIRED,
            ErrorType.FORBIDDEN,
            ErrorType.TOO_LONG,
        )
        text = self.type.words
        if shows_value and self.value is not _OMIT:
            text += f": {go_value(self.value)}"
        if self.detail:
            text += f": {self.detail}"
        return text

    def __str__(self) -> str:
        return f"{self.field}: {self.body()}"

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        return cls(ErrorType.REQUIRED, path, detail=detail)

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls(ErrorType.INVALID, path, value, detail)

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        return cls(ErrorType.FORBIDDEN, path, detail=detail)

    @classmethod
    def duplicate(cls, path: str, value: Any) -> FieldError:
        return cls(ErrorType.DUPLICATE, path, value)

    @classmethod
    def not_found(cls, path: str, value: Any) -> FieldError:
        return cls(ErrorType.NOT_FOUND, path, value)

    @classmethod
    def not_supported(cls, path: str, value: Any, supported: Sequence[str]) -> FieldError:
        detail = "supported values: " + ", ".join(go_quote(s) for s in supported)
        return cls(ErrorType.NOT_SUPPORTED, path, value, detail)

    @classmethod
    def too_long(cls, path: str, limit: int) -> FieldError:
        return cls(ErrorType.TOO_LONG, path, detail=f"may not be more than {limit} bytes")


def immutable(path: str, value: Any) -> FieldError:
    return FieldError.invalid(path, value, "field is immutable")


# --------------------------------------------------------------------------- names

_LABEL = "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_SUBDOMAIN = _LABEL + r"(\." + _LABEL + ")*"
_DNS1035 = "[a-z]([-a-z0-9]*[a-z0-9])?"
_QUALIFIED_NAME = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_LABEL_VALUE = "(" + _QUALIFIED_NAME + ")?"

NameCheck = Callable[[str], list[str]]


def _matches(pattern: str, value: str) -> bool:
    return re.fullmatch(pattern, value) is not None


def dns1123_subdomain(value: str) -> list[str]:
    problems = []
    if len(value) > 253:
        problems.append("must be no more than 253 characters")
    if not _matches(_SUBDOMAIN, value):
        problems.append(
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is '" + _SUBDOMAIN + "')"
        )
    return problems


def dns1123_label(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _matches(_LABEL, value):
        problems.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '" + _LABEL + "')"
        )
    return problems


def dns1035_label(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _matches(_DNS1035, value):
        problems.append(
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  or 'abc-123', regex used for validation is '" + _DNS1035 + "')"
        )
    return problems


def path_segment_name(value: str) -> list[str]:
    """``path.IsValidPathSegmentName``: what names of events and leases must avoid."""
    if value in (".", ".."):
        return [f"may not be '{value}'"]
    return [f"may not contain '{c}'" for c in ("/", "%") if c in value]


def qualified_name(value: str) -> list[str]:
    """A label or annotation key: ``[prefix/]name``."""
    parts = value.split("/")
    if len(parts) > 2:
        return [
            "a qualified name must consist of alphanumeric characters, '-', '_' or '.', and must "
            "start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '" + _QUALIFIED_NAME + "') with an optional "
            "DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    problems = []
    if len(parts) == 2:
        prefix, name = parts
        if not prefix:
            problems.append("prefix part must be non-empty")
        else:
            problems += ["prefix part " + p for p in dns1123_subdomain(prefix)]
    else:
        name = parts[0]
    if not name:
        problems.append("name part must be non-empty")
    elif len(name) > 63:
        problems.append("name part must be no more than 63 characters")
    if name and not _matches(_QUALIFIED_NAME, name):
        problems.append(
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or "
            "'123-abc', regex used for validation is '" + _QUALIFIED_NAME + "')"
        )
    return problems


def label_value(value: str) -> list[str]:
    problems = []
    if len(value) > 63:
        problems.append("must be no more than 63 characters")
    if not _matches(_LABEL_VALUE, value):
        problems.append(
            "a valid label must be an empty string or consist of alphanumeric characters, '-', "
            "'_' or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  "
            "or 'my_value',  or '12345', regex used for validation is '" + _LABEL_VALUE + "')"
        )
    return problems


# --------------------------------------------------------------------------- metadata


def validate_labels(labels: Mapping[str, str], path: str) -> list[FieldError]:
    errs = []
    for key, value in labels.items():
        errs += [FieldError.invalid(path, key, p) for p in qualified_name(key)]
        errs += [FieldError.invalid(path, value, p) for p in label_value(str(value))]
    return errs


def validate_annotations(annotations: Mapping[str, str], path: str) -> list[FieldError]:
    errs = []
    total = 0
    for key, value in annotations.items():
        errs += [FieldError.invalid(path, key.lower(), p) for p in qualified_name(key.lower())]
        total += len(key) + len(str(value))
    if total > 256 * 1024:
        errs.append(FieldError.too_long(path, 256 * 1024))
    return errs


def validate_meta_create(
    obj: Mapping[str, Any], namespaced: bool, name_check: NameCheck
) -> list[FieldError]:
    meta = obj.get("metadata") or {}
    errs: list[FieldError] = []
    name = meta.get("name", "")
    generate = meta.get("generateName", "")
    if generate:
        errs += [
            FieldError.invalid("metadata.generateName", generate, p)
            for p in name_check(generate.rstrip("-") or generate)
        ]
    if not name:
        errs.append(FieldError.required("metadata.name", "name or generateName is required"))
    else:
        errs += [FieldError.invalid("metadata.name", name, p) for p in name_check(name)]
    if namespaced and not meta.get("namespace"):
        errs.append(FieldError.required("metadata.namespace"))
    if not namespaced and meta.get("namespace"):
        errs.append(FieldError.forbidden("metadata.namespace", "not allowed on this type"))
    errs += _validate_common_meta(meta)
    return errs


def _validate_common_meta(meta: Mapping[str, Any]) -> list[FieldError]:
    errs = validate_labels(meta.get("labels") or {}, "metadata.labels")
    errs += validate_annotations(meta.get("annotations") or {}, "metadata.annotations")
    finalizers = meta.get("finalizers") or []
    for i, finalizer in enumerate(finalizers):
        errs += [
            FieldError.invalid(f"metadata.finalizers[{i}]", finalizer, p)
            for p in qualified_name(finalizer)
        ]
    if len(set(finalizers)) != len(finalizers):
        seen: set[str] = set()
        for i, finalizer in enumerate(finalizers):
            if finalizer in seen:
                errs.append(FieldError.duplicate(f"metadata.finalizers[{i}]", finalizer))
            seen.add(finalizer)
    for i, ref in enumerate(meta.get("ownerReferences") or []):
        for key in ("apiVersion", "kind", "name", "uid"):
            if not ref.get(key):
                errs.append(
                    FieldError.invalid(
                        f"metadata.ownerReferences[{i}].{key}",
                        ref.get(key, ""),
                        f"{key} must not be empty",
                    )
                )
    return errs


def validate_meta_update(new: Mapping[str, Any], old: Mapping[str, Any]) -> list[FieldError]:
    meta, old_meta = new.get("metadata") or {}, old.get("metadata") or {}
    errs = []
    for key in ("name", "namespace", "uid", "creationTimestamp"):
        if meta.get(key, "") != old_meta.get(key, ""):
            errs.append(immutable(f"metadata.{key}", meta.get(key, "")))
    old_finalizers = set(old_meta.get("finalizers") or [])
    added = [f for f in meta.get("finalizers") or [] if f not in old_finalizers]
    if old_meta.get("deletionTimestamp") and added:
        listed = ", ".join(go_quote(f) for f in added)
        errs.append(
            FieldError.forbidden(
                "metadata.finalizers",
                f"no new finalizers can be added if the object is being deleted, found new "
                f"finalizers []string{{{listed}}}",
            )
        )
    errs += _validate_common_meta(meta)
    return errs
