"""JSON merge patch (RFC 7386) and JSON patch (RFC 6902), as ``PATCH`` applies them.

Strategic merge patch lives in ``strategic.py``. A JSON patch whose operation does not apply
(a failed ``test``, a missing path) raises ``PatchFailed``; the handler answers it with the
real server's 422 ("the server rejected our request due to an error in our request"); a
malformed patch document raises ``PatchMalformed`` (400)::

    merged = merge_patch(current, {"metadata": {"labels": {"a": None}}})
    patched = json_patch(current, [{"op": "test", "path": "/spec/nodeName", "value": "n1"}])
"""

from __future__ import annotations

import copy
from typing import Any


class PatchMalformed(ValueError):
    """The patch document itself is not valid (a 400)."""


class PatchFailed(ValueError):
    """A valid JSON patch that cannot be applied to this object (a 422)."""


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --------------------------------------------------------------------------- RFC 6902


def json_patch(document: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise PatchMalformed("json: cannot unmarshal object into Go value of type jsonpatch.Patch")
    result = copy.deepcopy(document)
    for operation in operations:
        if not isinstance(operation, dict) or "op" not in operation:
            raise PatchMalformed("Unexpected kind: unknown")
        result = _apply(result, operation)
    return result


def _apply(document: Any, operation: dict[str, Any]) -> Any:
    op = operation["op"]
    path = _pointer(operation, "path")
    if op == "add":
        return _add(document, path, copy.deepcopy(_value(operation)))
    if op == "remove":
        return _remove(document, path, op)
    if op == "replace":
        _get(document, path, op)
        document = _remove(document, path, op)
        return _add(document, path, copy.deepcopy(_value(operation)))
    if op in ("move", "copy"):
        source = _pointer(operation, "from")
        value = copy.deepcopy(_get(document, source, op))
        if op == "move":
            document = _remove(document, source, op)
        return _add(document, path, value)
    if op == "test":
        if _get(document, path, op) != _value(operation):
            raise PatchFailed(f"testing value {'/' + '/'.join(path)} failed: test failed")
        return document
    raise PatchMalformed(f"Unexpected kind: {op}")


def _value(operation: dict[str, Any]) -> Any:
    if "value" not in operation:
        raise PatchMalformed(f"missing value for {operation['op']} operation")
    return operation["value"]


def _pointer(operation: dict[str, Any], key: str) -> list[str]:
    text = operation.get(key)
    if not isinstance(text, str):
        raise PatchMalformed(f"{operation['op']} operation missing {key} string")
    if text == "":
        return []
    if not text.startswith("/"):
        raise PatchFailed(
            f"{operation['op']} operation does not apply: doc is missing path: {text}"
        )
    return [p.replace("~1", "/").replace("~0", "~") for p in text[1:].split("/")]


def _parent(document: Any, path: list[str], op: str) -> Any:
    node = document
    for part in path[:-1]:
        node = _child(node, part, path, op)
    return node


def _child(node: Any, part: str, path: list[str], op: str) -> Any:
    if isinstance(node, dict) and part in node:
        return node[part]
    if isinstance(node, list) and part.isdigit() and int(part) < len(node):
        return node[int(part)]
    raise PatchFailed(f"{op} operation does not apply: doc is missing path: /{'/'.join(path)}")


def _get(document: Any, path: list[str], op: str) -> Any:
    if not path:
        return document
    return _child(_parent(document, path, op), path[-1], path, op)


def _add(document: Any, path: list[str], value: Any) -> Any:
    if not path:
        return value
    parent = _parent(document, path, "add")
    key = path[-1]
    if isinstance(parent, dict):
        parent[key] = value
    elif isinstance(parent, list):
        index = len(parent) if key == "-" else _index(key, len(parent), path)
        parent.insert(index, value)
    else:
        raise PatchFailed(f"add operation does not apply: doc is missing path: /{'/'.join(path)}")
    return document


def _remove(document: Any, path: list[str], op: str) -> Any:
    parent = _parent(document, path, op)
    key = path[-1]
    if isinstance(parent, dict) and key in parent:
        del parent[key]
    elif isinstance(parent, list) and key.isdigit() and int(key) < len(parent):
        del parent[int(key)]
    else:
        raise PatchFailed(f"{op} operation does not apply: doc is missing path: /{'/'.join(path)}")
    return document


def _index(key: str, size: int, path: list[str]) -> int:
    if not key.isdigit() or int(key) > size:
        raise PatchFailed(f"add operation does not apply: doc is missing path: /{'/'.join(path)}")
    return int(key)
