"""What the status manager writes of a pod's status, and whether the API already has it.

The parent computes the whole status; the API pod's status also holds what others
wrote. The kubelet's ``mergePodStatus`` keeps the conditions it does not own (a
readiness gate's, a controller's) and sends its own; pkletd sends its own conditions
in a strategic-merge patch, which the API merges by ``type``, so the others stay
without being read first. Of the kubelet-owned ``PodScheduled`` (the scheduler's for an
API pod; the kubelet keeps its time) pkletd sends its own only where the API pod has
none (a mirror pod, a pod created with ``nodeName``). ``qosClass`` is the API server's
(set at creation) and is not sent. ``podIPs`` and ``hostIPs`` are lists the API merges
by ``ip``: they carry ``$patch: replace``, so a changed IP replaces the old one.

Each condition sent says every field it has, and ``null`` for a ``reason`` or
``message`` it has not: the API merges a condition field by field, so a Ready that
turns True would otherwise keep its old ``reason: ContainersNotReady``. The kubelet's
two-way patch (old status against new) nulls what it dropped the same way, and lists the
whole order in ``$setElementOrder/conditions``: others' conditions first, then the
kubelet's (with ``PodScheduled`` in its place even when the scheduler's is kept), which
is how ``kubectl describe pod`` lists them.

``covers(have, want)``: ``have`` (the API's status, or the last one written) already
says all that ``want`` says, with ``null``, ``""``, ``[]`` and ``{}`` alike (the API
omits them) and conditions matched by type.
"""

from __future__ import annotations

import copy
from typing import Any

from pkletd.ipc.apimodel.podenums import PodSource

Obj = dict[str, Any]

SOURCE_ANNOTATION = "kubernetes.io/config.source"
HASH_ANNOTATION = "kubernetes.io/config.hash"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
STATIC_SOURCES = (PodSource.FILE, PodSource.HTTP)
SCHEDULED = "PodScheduled"
# pkg/kubelet/types/pod_status.go: owned (less PodScheduled, above) and shared.
KUBELET_CONDITIONS = frozenset(
    {
        "PodReadyToStartContainers",
        "Initialized",
        "ContainersReady",
        "Ready",
        "PodResizePending",
        "PodResizeInProgress",
        "DisruptionTarget",
    }
)
NOT_SENT = ("qosClass",)
REPLACED_LISTS = ("podIPs", "hostIPs")
EXPLICIT = ("reason", "message")  # sent as null when a condition has none
ORDER = "$setElementOrder/conditions"


def annotations_of(pod: Obj) -> dict[str, str]:
    found: dict[str, str] = (pod.get("metadata") or {}).get("annotations") or {}
    return found


def is_static(pod: Obj) -> bool:
    """A pod of the file or HTTP source, whose API reflection is a mirror pod."""
    return annotations_of(pod).get(SOURCE_ANNOTATION) in STATIC_SOURCES


def has_scheduled(status: Obj | None) -> bool:
    return any(c.get("type") == SCHEDULED for c in (status or {}).get("conditions") or [])


def owned(status: Obj, with_scheduled: bool) -> Obj:
    """The part of the parent's ``status`` the status manager writes."""
    mine = {k: copy.deepcopy(v) for k, v in status.items() if k not in NOT_SENT}
    if "conditions" in mine:
        mine["conditions"] = [
            {**dict.fromkeys(EXPLICIT), **c}
            for c in mine["conditions"]
            if c.get("type") in KUBELET_CONDITIONS
            or (with_scheduled and c.get("type") == SCHEDULED)
        ]
    return mine


def condition_order(status: Obj) -> list[Obj]:
    """The order of the parent's conditions (``PodScheduled`` after ``ContainersReady``
    if it has none), as ``$setElementOrder/conditions`` lists it."""
    kinds = [c.get("type") for c in status.get("conditions") or []]
    if SCHEDULED not in kinds:
        after = kinds.index("ContainersReady") + 1 if "ContainersReady" in kinds else len(kinds)
        kinds.insert(after, SCHEDULED)
    return [{"type": kind} for kind in kinds]


def patch(uid: str, status: Obj, order: list[Obj] | None = None) -> Obj:
    """The strategic-merge patch of ``pods/<name>/status``, with ``uid`` as precondition;
    ``order``: the conditions' order (``condition_order``)."""
    wire = dict(status)
    for key in REPLACED_LISTS:
        if wire.get(key):
            wire[key] = [*wire[key], {"$patch": "replace"}]
    if order and wire.get("conditions"):
        wire[ORDER] = order
    return {"metadata": {"uid": uid}, "status": wire}


def _empty(value: Any) -> bool:
    return value is None or value == "" or value == [] or value == {}


def covers(have: Any, want: Any) -> bool:
    """``have`` says all that ``want`` says (see the module doc)."""
    if isinstance(want, dict):
        if not isinstance(have, dict):
            return _empty(have) and all(_empty(v) for v in want.values())
        return all(covers(have.get(k), v) for k, v in want.items())
    if isinstance(want, list):
        have = have if isinstance(have, list) else ([] if _empty(have) else None)
        if have is None or len(have) != len(want):
            return False
        return all(covers(h, w) for h, w in zip(have, want, strict=True))
    if _empty(want):
        return _empty(have)
    return bool(have == want)


def status_covers(have: Obj | None, want: Obj) -> bool:
    """``covers`` for pod statuses: conditions are matched by type, others left alone."""
    have = have or {}
    for key, value in want.items():
        if key == "conditions":
            theirs = {c.get("type"): c for c in have.get("conditions") or []}
            if not all(covers(theirs.get(c.get("type")), c) for c in value):
                return False
        elif not covers(have.get(key), value):
            return False
    return True


def newer(version: str, than: str) -> bool:
    """``version`` is a newer resourceVersion of an object than ``than`` ("": none yet).
    The API calls them opaque; every server (etcd's revisions, the test server) makes
    them integers that grow, so digits are compared as numbers, anything else by
    inequality (a different one is taken as newer)."""
    if not than:
        return True
    if version.isdigit() and than.isdigit():
        return int(version) > int(than)
    return version != than
