"""Mirror pods: the API's copies of static pods, as the kubelet's ``mirror_client.go``
makes them and its ``SyncPod`` keeps them.

A mirror pod has the static pod's name, namespace, labels, annotations and spec, the
annotation ``kubernetes.io/config.mirror`` set to the static pod's
``kubernetes.io/config.hash``, and the Node as its controller owner. At a static pod's
name the API may hold (``Seen``): nothing (create one), its mirror (done), a mirror of
another version of it or one being deleted (delete it with grace 0 and its UID as the
precondition, then create), or a pod that is no mirror (left alone, as the kubelet
leaves it). A mirror whose static pod the parent forgot is deleted; a mirror of a hash
no one asked about is left for the operator.
"""

from __future__ import annotations

import copy
import enum
from dataclasses import dataclass
from typing import Any

from pkletd.workers.statusmanager.podstatus import (
    HASH_ANNOTATION,
    MIRROR_ANNOTATION,
    annotations_of,
)

Obj = dict[str, Any]


class SeenKind(enum.Enum):
    UNKNOWN = "unknown"  # not looked yet, or a write left it in doubt
    ABSENT = "absent"
    MIRROR = "mirror"
    OTHER = "other"  # a pod that is not a mirror pod


@dataclass(frozen=True, slots=True)
class Seen:
    """What the API holds at a static pod's namespace/name."""

    kind: SeenKind
    uid: str = ""
    hash: str = ""
    deleting: bool = False
    status: Obj | None = None


UNKNOWN = Seen(SeenKind.UNKNOWN)
ABSENT = Seen(SeenKind.ABSENT)


def seen(api_pod: Obj | None) -> Seen:
    if api_pod is None:
        return ABSENT
    meta = api_pod.get("metadata") or {}
    mirror_hash = annotations_of(api_pod).get(MIRROR_ANNOTATION)
    if mirror_hash is None:
        return Seen(SeenKind.OTHER, meta.get("uid", ""))
    return Seen(
        SeenKind.MIRROR,
        meta.get("uid", ""),
        mirror_hash,
        meta.get("deletionTimestamp") is not None,
        api_pod.get("status") or {},
    )


class Action(enum.Enum):
    NONE = "none"
    READ = "read"
    CREATE = "create"
    DELETE = "delete"


def action(found: Seen, want_hash: str | None, forgotten: frozenset[str]) -> Action:
    """What to do at a name, given what is there and the hash of the static pod that
    wants it (None: no static pod wants it now; ``forgotten``: hashes the parent let go)."""
    if found.kind is SeenKind.UNKNOWN:
        return Action.READ
    if found.kind is SeenKind.ABSENT:
        return Action.CREATE if want_hash is not None else Action.NONE
    if found.kind is SeenKind.OTHER:
        return Action.NONE
    if want_hash is not None:
        current = found.hash == want_hash and not found.deleting
        return Action.NONE if current else Action.DELETE
    return Action.DELETE if found.hash in forgotten else Action.NONE


def is_mirror_of(found: Seen, want_hash: str) -> bool:
    """The API holds the current mirror of the static pod with ``want_hash``."""
    return found.kind is SeenKind.MIRROR and found.hash == want_hash and not found.deleting


def static_hash(static: Obj) -> str:
    found = annotations_of(static).get(HASH_ANNOTATION) or static["metadata"].get("uid", "")
    return str(found)


def _quantity_strings(values: Any) -> None:
    """Quantities as the kubelet serializes them: strings (a manifest may say ``cpu: 1``)."""
    if isinstance(values, dict):
        for key, value in values.items():
            if isinstance(value, int | float) and not isinstance(value, bool):
                values[key] = str(value)


def _serialized_spec(spec: Obj) -> Obj:
    spec = copy.deepcopy(spec)
    for group in ("initContainers", "containers", "ephemeralContainers"):
        for container in spec.get(group) or []:
            resources = container.get("resources") or {}
            for kind in ("limits", "requests"):
                _quantity_strings(resources.get(kind))
    for kind in ("limits", "requests"):
        _quantity_strings((spec.get("resources") or {}).get(kind))
    _quantity_strings(spec.get("overhead"))
    for volume in spec.get("volumes") or []:
        _quantity_strings(volume.get("emptyDir"))
    return spec


def mirror_pod(static: Obj, node_name: str, node_uid: str) -> Obj:
    """The mirror pod of ``static`` to create (``CreateMirrorPod``)."""
    meta = static.get("metadata") or {}
    spec = _serialized_spec(static.get("spec") or {})
    spec["nodeName"] = node_name
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": meta["name"],
            "namespace": meta.get("namespace") or "default",
            "labels": dict(meta.get("labels") or {}),
            "annotations": {**annotations_of(static), MIRROR_ANNOTATION: static_hash(static)},
            "ownerReferences": [
                {
                    "apiVersion": "v1",
                    "kind": "Node",
                    "name": node_name,
                    "uid": node_uid,
                    "controller": True,
                }
            ],
        },
        "spec": spec,
    }
