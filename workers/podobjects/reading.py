"""An object as the API returned it, or why it could not be read, turned into the
``ObjectFetched`` the parent keeps.

- a storage object (claim, volume, CSIDriver, VolumeAttachment) travels as its
  ``body``: the metadata a node uses, ``spec`` and ``status``;

- a ConfigMap's ``data`` travels as ``strings`` and its ``binaryData`` (base64 in the
  API) as ``data``; a Secret's ``data`` is decoded into ``data``;
- an object the API does not have is ``missing``, with the kubelet's message
  (``secret "x" not found``); so is a VolumeAttachment the API refuses (403):
  kube-apiserver's node authorizer lets a node read only the attachments in its graph,
  so one not made yet (or deleted) is forbidden, not not found;
- any other failure carries the API's own message (the ``message`` of its Status),
  or what went wrong with the connection;
- an object whose data passes ``MAX_DATA_BYTES`` is refused with an error naming its
  size: the bus carries one message per object, and the API server itself refuses a
  Secret or ConfigMap over 1 MiB.

Nothing here logs: the values are secrets.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

from kubernetes.client.exceptions import ApiException
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apimodel import persistentvolumes
from pkletd.ipc.apimodel.references import ObjectKey, ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched

Obj = dict[str, Any]
MAX_DATA_BYTES = 1024 * 1024
NOT_FOUND = 404
FORBIDDEN = 403


def reading(key: ObjectKey, obj: Obj | None) -> ObjectFetched:
    """The parent's view of ``obj`` (None: the API does not have it)."""
    if obj is None:
        return missing(key)
    meta = obj.get("metadata") or {}
    version = str(meta.get("resourceVersion") or "")
    if key.kind.storage:
        body = persistentvolumes.body_of(obj)
        return ObjectFetched(key.kind, key.namespace, key.name, resource_version=version, body=body)
    try:
        strings, data = _contents(key.kind, obj)
    except (binascii.Error, ValueError, TypeError, AttributeError):
        return failure(key, f'{key.kind.noun} "{key.name}" has data that is not valid base64')
    size = sum(len(k) + len(v.encode()) for k, v in strings.items())
    size += sum(len(k) + len(v) for k, v in data.items())
    if size > MAX_DATA_BYTES:
        return failure(
            key,
            f'{key.kind.noun} "{key.name}" is too large: {size} bytes of data, '
            f"pkletd takes at most {MAX_DATA_BYTES}",
        )
    return ObjectFetched(
        key.kind,
        key.namespace,
        key.name,
        strings=strings,
        data=data,
        secret_type=str(obj.get("type") or "") if key.kind is ObjectKind.SECRET else "",
        immutable=bool(obj.get("immutable")),
        resource_version=version,
    )


def missing(key: ObjectKey) -> ObjectFetched:
    return ObjectFetched(
        key.kind,
        key.namespace,
        key.name,
        error=f'{key.kind.noun} "{key.name}" not found',
        missing=True,
    )


def failure(key: ObjectKey, error: str) -> ObjectFetched:
    return ObjectFetched(key.kind, key.namespace, key.name, error=error)


def failed(key: ObjectKey, exc: BaseException) -> ObjectFetched:
    """A failed read: ``missing`` if it says the object is not there, else the API's
    message."""
    return missing(key) if absent(key, exc) else failure(key, api_message(exc))


def absent(key: ObjectKey, exc: BaseException) -> bool:
    """Whether a failed read says the object is not there: a 404, or a 403 for a
    VolumeAttachment (the node authorizer cannot tell one that is not made yet)."""
    status = kubeapi.status_of(exc)
    forbidden_attachment = status == FORBIDDEN and key.kind is ObjectKind.VOLUME_ATTACHMENT
    return status == NOT_FOUND or forbidden_attachment


def api_message(exc: BaseException) -> str:
    """The ``message`` of the Status the API answered with, else the failure in one line."""
    if isinstance(exc, ApiException) and exc.body:
        try:
            status = json.loads(exc.body)
        except ValueError:
            status = None
        if isinstance(status, dict) and status.get("message"):
            return str(status["message"])
    return kubeapi.describe(exc)


def _contents(kind: ObjectKind, obj: Obj) -> tuple[dict[str, str], dict[str, bytes]]:
    if kind is ObjectKind.CONFIG_MAP:
        strings = {str(k): str(v) for k, v in (obj.get("data") or {}).items()}
        return strings, _decoded(obj.get("binaryData") or {})
    return {}, _decoded(obj.get("data") or {})


def _decoded(encoded: dict[str, Any]) -> dict[str, bytes]:
    return {str(k): base64.b64decode(v, validate=True) for k, v in encoded.items()}
