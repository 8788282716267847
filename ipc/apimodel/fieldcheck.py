"""Checks for one field of a Pod manifest, each failing with the field's path.

Shared by the spec modules that parse parts of a Pod (``envspec``, ``volumespec``,
``securityspec``); ``podspec`` turns ``InvalidField`` into ``InvalidPod``. The
messages follow ``podspec``'s style: ``<path>: <what is wrong>``.
"""

from __future__ import annotations

from typing import Any

MAX_ID = 2147483647  # user and group ids: the API's int32 range


class InvalidField(ValueError):
    """A field of a pod manifest is wrong; the message starts with its path."""


def mapping(value: Any, path: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise InvalidField(f"{path}: must be a mapping, got {type(value).__name__}")
    return value


def optional_mapping(value: Any, path: str) -> dict[str, Any] | None:
    """None for an absent (or null) field, else a mapping."""
    return None if value is None else mapping(value, path)


def items(value: Any, path: str) -> list[Any]:
    """A list; absent (None) is an empty one."""
    if value is None:
        return []
    if not isinstance(value, list):
        raise InvalidField(f"{path}: must be a list, got {type(value).__name__}")
    return value


def string(value: Any, path: str, required: bool = False) -> str:
    if value is None:
        value = ""
    if not isinstance(value, str):
        raise InvalidField(f"{path}: must be a string, got {type(value).__name__}")
    if required and not value:
        raise InvalidField(f"{path}: required value")
    return value


def strings(value: Any, path: str) -> tuple[str, ...]:
    return tuple(string(v, f"{path}[{i}]", required=True) for i, v in enumerate(items(value, path)))


def boolean(value: Any, path: str) -> bool | None:
    if value is None:
        return None
    if not isinstance(value, bool):
        raise InvalidField(f"{path}: must be true or false, got {value!r}")
    return value


def integer(value: Any, path: str, low: int, high: int) -> int | None:
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise InvalidField(f"{path}: must be an integer between {low} and {high}, got {value!r}")
    return value


def file_mode(value: Any, path: str) -> int | None:
    """A file mode (``0644`` in YAML is 420): 0 to 0777, as the API allows."""
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or not 0 <= value <= 0o777:
        raise InvalidField(
            f"{path}: invalid value {value!r}: must be a number between 0 and 0777 (octal), "
            "both inclusive"
        )
    return value


def choice(value: Any, path: str, allowed: tuple[str, ...], default: str = "") -> str:
    if value is None:
        return default
    if value not in allowed:
        shown = ", ".join(repr(a) for a in allowed)
        raise InvalidField(f"{path}: unsupported value {value!r}: supported values: {shown}")
    return str(value)


def relative_path(value: Any, path: str) -> str:
    """A path inside a volume: relative, no ``..`` element (the API's local descending path)."""
    text = string(value, path, required=True)
    if text.startswith("/"):
        raise InvalidField(f"{path}: invalid value {text!r}: must be a relative path")
    if ".." in text.split("/"):
        raise InvalidField(f"{path}: invalid value {text!r}: must not contain '..'")
    return text
