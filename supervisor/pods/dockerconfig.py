"""The registry credentials an image pull secret holds, read as the kubelet reads them.

Two Secret types carry them (any other type is no pull secret, and gives none):

- ``kubernetes.io/dockerconfigjson``: ``.dockerconfigjson`` is a docker ``config.json``,
  ``{"auths": {"<registry>": {...}}}``;
- ``kubernetes.io/dockercfg``: ``.dockercfg`` is the older ``~/.dockercfg``, the
  ``{"<registry>": {...}}`` map alone.

Each entry gives ``username`` and ``password``, or ``auth``: base64 of
``username:password``, padded or not, which wins over both. The kubelet reads nothing
else from an entry (``email`` is dropped, ``identitytoken`` and ``registrytoken`` are not
read), and neither does pkletd. Field names match case-insensitively, an exact match
first, as Go's JSON decoding matches them.

A secret that cannot be read raises ``BadPullSecret``, naming the secret and the field,
and never quoting a value.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

DOCKER_CONFIG_JSON_TYPE = "kubernetes.io/dockerconfigjson"
DOCKER_CONFIG_JSON_KEY = ".dockerconfigjson"
DOCKERCFG_TYPE = "kubernetes.io/dockercfg"
DOCKERCFG_KEY = ".dockercfg"
AUTH_FORMAT = "must be formatted as base64(username:password)"


class BadPullSecret(ValueError):
    """A pull secret whose docker config cannot be read; ``str()`` names it and the field."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One registry's credentials: ``location`` is the entry's key (``host[:port][/path]``,
    perhaps with a scheme)."""

    location: str
    username: str
    password: str = field(repr=False)


def entries(name: str, secret_type: str, data: Mapping[str, bytes]) -> list[Entry]:
    """The entries of the Secret ``name``, in the order written; [] if it is no pull secret."""
    if secret_type == DOCKER_CONFIG_JSON_TYPE and data.get(DOCKER_CONFIG_JSON_KEY):
        where = f'image pull secret "{name}": {DOCKER_CONFIG_JSON_KEY}'
        config = _object(_json(data[DOCKER_CONFIG_JSON_KEY], where), where)
        return _entries(_member(config, "auths"), f"{where}: auths")
    if secret_type == DOCKERCFG_TYPE and data.get(DOCKERCFG_KEY):
        where = f'image pull secret "{name}": {DOCKERCFG_KEY}'
        return _entries(_json(data[DOCKERCFG_KEY], where), where)
    return []


def _entries(auths: Any, where: str) -> list[Entry]:
    found = _object(auths, where).items()
    return [_entry(location, v, f"{where}[{json.dumps(location)}]") for location, v in found]


def _json(raw: bytes, where: str) -> Any:
    try:  # Go's decoder takes bytes that are not UTF-8 as U+FFFD
        return json.loads(raw.decode("utf-8", errors="replace"))
    except json.JSONDecodeError as exc:
        raise BadPullSecret(f"{where}: invalid JSON: {exc.msg} at line {exc.lineno}") from None


def _entry(location: str, value: Any, where: str) -> Entry:
    fields = _object(value, where)
    username = _text(_member(fields, "username"), f"{where}.username")
    password = _text(_member(fields, "password"), f"{where}.password")
    auth = _text(_member(fields, "auth"), f"{where}.auth")
    if auth:
        username, password = _decode_auth(auth, f"{where}.auth")
    return Entry(location, username, password)


def _decode_auth(auth: str, where: str) -> tuple[str, str]:
    """``username:password`` from base64, padded or not (Go skips CR and LF in it)."""
    text = auth.replace("\r", "").replace("\n", "")
    if not text.endswith("="):
        text += "=" * (-len(text) % 4)
    try:
        decoded = base64.b64decode(text, validate=True).decode("utf-8")
    except (binascii.Error, ValueError):
        raise BadPullSecret(f"{where}: not base64 of UTF-8 text, {AUTH_FORMAT}") from None
    username, colon, password = decoded.partition(":")
    if not colon:
        raise BadPullSecret(f"{where}: unable to parse auth field, {AUTH_FORMAT}")
    return username, password


def _member(fields: Mapping[str, Any], name: str) -> Any:
    """A field by name: the exact one, else one that differs only in case."""
    if name in fields:
        return fields[name]
    return next((v for k, v in fields.items() if k.lower() == name), None)


def _object(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise BadPullSecret(f"{where}: must be a JSON object, got {_json_type(value)}")
    return value


def _text(value: Any, where: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BadPullSecret(f"{where}: must be a string, got {_json_type(value)}")
    return value


def _json_type(value: Any) -> str:
    names = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}
    return names.get(type(value), "object")
