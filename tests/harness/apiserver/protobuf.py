"""Reading ``application/vnd.kubernetes.protobuf`` request bodies for a few kinds.

kubectl's typed clients (``kubectl create namespace|configmap|secret|serviceaccount|token``)
send protobuf: the ``k8s\\x00`` magic, then a ``runtime.Unknown`` whose ``raw`` is the object
in the field numbers of k8s.io/api's ``generated.proto``. This module decodes those bodies
into the JSON form the rest of the server handles; answers are JSON (the clients accept it).
Other kinds sent as protobuf are refused with 415::

    obj = decode(body)   # {"apiVersion": "v1", "kind": "Namespace", "metadata": {...}}
"""

from __future__ import annotations

import base64
from typing import Any

MAGIC = b"k8s\x00"
Schema = dict[int, tuple[str, str]]  # field number -> (json name, type)

OWNER_REFERENCE: Schema = {
    1: ("kind", "str"),
    3: ("name", "str"),
    4: ("uid", "str"),
    5: ("apiVersion", "str"),
    6: ("controller", "bool"),
    7: ("blockOwnerDeletion", "bool"),
}
OBJECT_META: Schema = {
    1: ("name", "str"),
    2: ("generateName", "str"),
    3: ("namespace", "str"),
    5: ("uid", "str"),
    6: ("resourceVersion", "str"),
    7: ("generation", "int"),
    10: ("deletionGracePeriodSeconds", "int"),
    11: ("labels", "map:str"),
    12: ("annotations", "map:str"),
    13: ("ownerReferences", "list:OwnerReference"),
    14: ("finalizers", "list:str"),
}
OBJECT_REFERENCE: Schema = {
    1: ("kind", "str"),
    2: ("namespace", "str"),
    3: ("name", "str"),
    4: ("uid", "str"),
    5: ("apiVersion", "str"),
    6: ("resourceVersion", "str"),
    7: ("fieldPath", "str"),
}
SCHEMAS: dict[str, Schema] = {
    "ObjectMeta": OBJECT_META,
    "OwnerReference": OWNER_REFERENCE,
    "ObjectReference": OBJECT_REFERENCE,
    "LocalObjectReference": {1: ("name", "str")},
    "Namespace": {1: ("metadata", "ObjectMeta"), 2: ("spec", "NamespaceSpec")},
    "NamespaceSpec": {1: ("finalizers", "list:str")},
    "ConfigMap": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "map:str"),
        3: ("binaryData", "map:bytes"),
        4: ("immutable", "bool"),
    },
    "Secret": {
        1: ("metadata", "ObjectMeta"),
        2: ("data", "map:bytes"),
        3: ("type", "str"),
        4: ("stringData", "map:str"),
        5: ("immutable", "bool"),
    },
    "ServiceAccount": {
        1: ("metadata", "ObjectMeta"),
        2: ("secrets", "list:ObjectReference"),
        3: ("imagePullSecrets", "list:LocalObjectReference"),
        4: ("automountServiceAccountToken", "bool"),
    },
    "TokenRequest": {1: ("metadata", "ObjectMeta"), 2: ("spec", "TokenRequestSpec")},
    "TokenRequestSpec": {
        1: ("audiences", "list:str"),
        3: ("boundObjectRef", "BoundObjectRef"),
        4: ("expirationSeconds", "int"),
    },
    "BoundObjectRef": {
        1: ("kind", "str"),
        2: ("apiVersion", "str"),
        3: ("name", "str"),
        4: ("uid", "str"),
    },
}


class ProtobufError(ValueError):
    """A body that is not a protobuf object of a kind this server reads."""


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        if pos >= len(data):
            raise ProtobufError("truncated varint")
        byte = data[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return value, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """The (field number, value) pairs of a message: ints for varints, bytes otherwise."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = _varint(data, pos)
            out.append((number, value))
        elif wire == 2:
            size, pos = _varint(data, pos)
            out.append((number, data[pos : pos + size]))
            pos += size
        elif wire in (1, 5):
            pos += 8 if wire == 1 else 4
        else:
            raise ProtobufError(f"unsupported wire type {wire}")
    return out


def _scalar(value: int | bytes, kind: str) -> Any:
    if kind == "int":
        assert isinstance(value, int)
        return value - (1 << 64) if value >= 1 << 63 else value
    if kind == "bool":
        return bool(value)
    assert isinstance(value, bytes)
    if kind == "bytes":
        return base64.b64encode(value).decode()
    if kind == "str":
        return value.decode()
    return message(value, kind)


def message(data: bytes, schema_name: str) -> dict[str, Any]:
    schema = SCHEMAS[schema_name]
    out: dict[str, Any] = {}
    for number, value in fields(data):
        if number not in schema:
            continue
        name, kind = schema[number]
        if kind.startswith("list:"):
            out.setdefault(name, []).append(_scalar(value, kind[5:]))
        elif kind.startswith("map:"):
            assert isinstance(value, bytes)
            entry = dict(fields(value))
            key = entry.get(1, b"")
            assert isinstance(key, bytes)
            out.setdefault(name, {})[key.decode()] = _scalar(entry.get(2, b""), kind[4:])
        else:
            out[name] = _scalar(value, kind)
    return out


def decode(body: bytes) -> dict[str, Any]:
    """The JSON form of a protobuf-encoded object of one of the supported kinds."""
    if not body.startswith(MAGIC):
        raise ProtobufError(
            "provided data does not appear to be a protobuf message, expected prefix [107 56 115 0]"
        )
    envelope = dict(fields(body[len(MAGIC) :]))
    type_meta = envelope.get(1, b"")
    raw = envelope.get(2, b"")
    assert isinstance(type_meta, bytes) and isinstance(raw, bytes)
    meta = {k: v for k, v in fields(type_meta) if isinstance(v, bytes)}
    api_version = meta.get(1, b"").decode()
    kind = meta.get(2, b"").decode()
    if kind not in SCHEMAS or kind.endswith(("Meta", "Spec", "Reference", "Ref")):
        raise ProtobufError(f"protobuf bodies of kind {kind!r} are not supported here")
    obj = message(raw, kind)
    return {"apiVersion": api_version, "kind": kind, **obj}
