"""The bus wire format: a msgpack array per message, never pickle.

    [schema_version, kind, sender, seq, monotonic_time, body]

``body`` is a map of the message's fields; a string enum or an id travels as its
string and is made the field's type again on decoding; a ``TypedDict`` is a map with
exactly its keys. Decoding is strict: a wrong schema
version, an unknown kind, an unknown or missing field, or a field of the wrong
type raises ``BadMessage`` naming the sender, the kind and the field, so a
receiver can log one precise line and drop the frame.
"""

from __future__ import annotations

import dataclasses
import enum
import types
import typing
from dataclasses import dataclass
from typing import Any

import msgpack
from pkletd.ipc.bus.messages import MESSAGES, SCHEMA_VERSION, Message


class BadMessage(ValueError):
    """A frame that is not a valid pkletd message."""


@dataclass(frozen=True, slots=True)
class Envelope:
    sender: str
    seq: int
    sent_at: float
    message: Message


def encode(message: Message, sender: str, seq: int, sent_at: float) -> bytes:
    body = {f.name: getattr(message, f.name) for f in dataclasses.fields(message)}
    frame = [SCHEMA_VERSION, message.kind, sender, seq, sent_at, body]
    return msgpack.packb(frame, use_bin_type=True)  # type: ignore[no-any-return]


def decode(frame: bytes) -> Envelope:
    try:
        raw = msgpack.unpackb(frame, raw=False, strict_map_key=True)
    except Exception as exc:  # msgpack raises several unrelated types
        raise BadMessage(f"undecodable frame of {len(frame)} bytes: {exc}") from exc
    if not isinstance(raw, list) or len(raw) != 6:
        raise BadMessage("frame is not a 6-element envelope")
    version, kind, sender, seq, sent_at, body = raw
    if not isinstance(sender, str):
        raise BadMessage("envelope field sender: not a string")
    who = sender if sender.isprintable() else repr(sender)  # no newline into a log line
    if version != SCHEMA_VERSION:
        raise BadMessage(f"from {who}: schema version {version!r}, want {SCHEMA_VERSION}")
    if not isinstance(seq, int) or isinstance(seq, bool) or not isinstance(sent_at, (int, float)):
        raise BadMessage(f"from {who}: bad seq or time in envelope")
    cls = MESSAGES.get(kind) if isinstance(kind, str) else None
    if cls is None:
        raise BadMessage(f"from {who}: unknown kind {kind!r}")
    if not isinstance(body, dict):
        raise BadMessage(f"from {who}: {kind} body is not a map")
    return Envelope(sender, seq, float(sent_at), _build(cls, body, who))


def _build(cls: type[Message], body: dict[str, Any], who: str) -> Message:
    hints = _hints(cls)
    fields = {f.name: f for f in dataclasses.fields(cls)}
    for name in body:
        if name not in fields:
            raise BadMessage(f"from {who}: {cls.kind} has no field {name!r}")
    for name, f in fields.items():
        if name not in body:
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                raise BadMessage(f"from {who}: {cls.kind} field {name!r} is missing")
            continue
        if not _conforms(body[name], hints[name]):
            raise BadMessage(
                f"from {who}: {cls.kind} field {name!r}: "
                f"{type(body[name]).__name__} is not {_type_name(hints[name])}"
            )
    return cls(**{name: _typed(value, hints[name]) for name, value in body.items()})


_HINTS: dict[type, dict[str, Any]] = {}


def cache_hints() -> None:
    """Resolve every message kind's type hints now (else at its first decoding): done
    before the fork server is forked, every process shares them."""
    for cls in MESSAGES.values():
        _hints(cls)


def _hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _typed(value: Any, hint: Any) -> Any:
    """A field's value as its type: a string enum's member; anything else as decoded."""
    return hint(value) if _is_enum(hint) else value


def _is_enum(hint: Any) -> bool:
    return isinstance(hint, type) and issubclass(hint, enum.StrEnum)


def _conforms(value: Any, hint: Any) -> bool:
    origin = typing.get_origin(hint)
    if isinstance(hint, typing.NewType):
        return _conforms(value, hint.__supertype__)
    if _is_enum(hint):
        return isinstance(value, str) and value in hint._value2member_map_
    if hint is Any:
        return True
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is str:
        return isinstance(value, str)
    if hint is bytes:
        return isinstance(value, bytes)
    if typing.is_typeddict(hint):  # a map with exactly these keys, each of its type
        keys = _hints(hint)
        return (
            isinstance(value, dict)
            and value.keys() == keys.keys()
            and all(_conforms(value[k], h) for k, h in keys.items())
        )
    if origin is typing.Literal:
        return any(type(value) is type(a) and value == a for a in typing.get_args(hint))
    if origin is list:
        (item,) = typing.get_args(hint)
        return isinstance(value, list) and all(_conforms(v, item) for v in value)
    if origin is dict:
        key, item = typing.get_args(hint)
        return isinstance(value, dict) and all(
            _conforms(k, key) and _conforms(v, item) for k, v in value.items()
        )
    if origin in (typing.Union, types.UnionType):
        return any(_conforms(value, arg) for arg in typing.get_args(hint))
    if hint is type(None):
        return value is None
    raise TypeError(f"message field type {hint!r} is not supported by the codec")


def _type_name(hint: Any) -> str:
    return getattr(hint, "__name__", None) or str(hint)
