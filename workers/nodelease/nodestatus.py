"""The Node's status as the kubelet writes it: pure functions over API JSON.

``updated_node`` is the kubelet's ``updateNode``: the node as read, with the required
os/arch labels, the static status the parent composed (addresses, capacity,
allocatable, nodeInfo, daemonEndpoints), the images, the volumes in use (the CSI
volumes the parent has staged or published) and the conditions set; and
whether that changed anything but heartbeat times (``nodeStatusHasChanged``).
``status_patch`` is the strategic merge patch from the node as read to the node as
wanted (``PatchNodeStatus``: metadata and status only; addresses replaced whole, as
the kubelet's fix-up does, because their merge key is wrong). ``reconciled`` is what the
kubelet changes on a Node that was already registered: the attach-detach annotation,
its default labels and the hugepage resources.
"""

from __future__ import annotations

import copy
import operator
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.runtime.cri import ListedImage
from pkletd.workers.nodelease.conditions import (
    Limits,
    ParentHealth,
    RuntimeState,
    ready_errors,
    set_conditions,
)

Obj = dict[str, Any]
MAX_NAMES_PER_IMAGE = 5  # the kubelet's MaxNamesPerImageInNodeStatus
CMAD_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"
REQUIRED_LABELS = ("kubernetes.io/os", "kubernetes.io/arch")
# The labels the kubelet owns on an existing Node (updateDefaultLabels).
DEFAULT_LABELS = (
    "kubernetes.io/hostname",
    "topology.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "failure-domain.beta.kubernetes.io/region",
    "node.kubernetes.io/instance-type",
    "beta.kubernetes.io/instance-type",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "node.kubernetes.io/windows-build",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/arch",
)
STATIC_MAPS = ("capacity", "allocatable", "nodeInfo")  # merged: other writers' keys stay
STATIC_WHOLE = ("addresses", "daemonEndpoints")  # replaced
QUANTITY_MAPS = ("capacity", "allocatable")


@dataclass(frozen=True, slots=True)
class Observed:
    """Everything one status write is computed from."""

    runtime: RuntimeState
    parent: ParentHealth
    limits: Limits
    images: tuple[ListedImage, ...] | None  # None: the runtime did not list them
    max_images: int  # nodeStatusMaxImages; -1: all
    wall: float  # time.time() of this write
    mono: float  # time.monotonic() of this write


def node_images(images: Sequence[ListedImage] | None, max_images: int) -> list[Obj]:
    """The kubelet's Images setter: largest first, at most ``max_images``, 5 names each
    (repo digests, then repo tags)."""
    ordered = sorted(images or (), key=lambda image: image.size, reverse=True)
    if max_images > -1:
        ordered = ordered[:max_images]
    return [
        {
            "names": [*image.repo_digests, *image.repo_tags][:MAX_NAMES_PER_IMAGE],
            "sizeBytes": image.size,
        }
        for image in ordered
    ]


def initial_node(template: Obj, observed: Observed) -> Obj:
    """The Node to create: the template with its whole status set (``initialNode``)."""
    bare = {key: copy.deepcopy(value) for key, value in template.items() if key != "status"}
    node, _ = updated_node(bare, template, observed)
    return node


def updated_node(original: Obj, template: Obj, observed: Observed) -> tuple[Obj, bool]:
    """The node as this write wants it, and whether that is a change worth writing."""
    node = copy.deepcopy(original)
    labels_set = _ensure_required_labels(node, template)
    status = node.setdefault("status", {})
    wanted = template.get("status") or {}
    for key in STATIC_MAPS:
        if key in wanted:
            status[key] = {**(status.get(key) or {}), **wanted[key]}
    for key in STATIC_WHOLE:
        if key in wanted:
            status[key] = copy.deepcopy(wanted[key])
    if observed.parent.volumes_in_use:  # the kubelet's VolumesInUse setter
        status["volumesInUse"] = list(observed.parent.volumes_in_use)
    else:
        status.pop("volumesInUse", None)
    images = node_images(observed.images, observed.max_images)
    if images:
        status["images"] = images
    else:
        status.pop("images", None)
    errors = ready_errors(
        observed.runtime,
        observed.parent,
        observed.limits,
        observed.mono,
        status.get("capacity") or {},
    )
    status["conditions"] = set_conditions(
        status.get("conditions") or [], errors, observed.wall, observed.parent.pressure
    )
    changed = labels_set or status_changed(original.get("status") or {}, status)
    return node, changed


def _ensure_required_labels(node: Obj, template: Obj) -> bool:
    wanted = (template.get("metadata") or {}).get("labels") or {}
    labels = node.setdefault("metadata", {}).setdefault("labels", {})
    changed = False
    for key in REQUIRED_LABELS:
        if key in wanted and labels.get(key) != wanted[key]:
            labels[key] = wanted[key]
            changed = True
    return changed


def status_changed(old: Obj, new: Obj) -> bool:
    """``nodeStatusHasChanged``: any difference but the conditions' heartbeat times."""
    return bool(_comparable(old) != _comparable(new))


def _comparable(status: Obj) -> Any:
    out = {key: value for key, value in status.items() if key != "conditions"}
    for key in QUANTITY_MAPS:
        if isinstance(out.get(key), dict):
            out[key] = {name: _amount(value) for name, value in out[key].items()}
    conditions = [
        {k: v for k, v in c.items() if k != "lastHeartbeatTime"}
        for c in status.get("conditions") or []
    ]
    out["conditions"] = sorted(conditions, key=lambda c: str(c.get("type")))
    return _pruned(out)


def _amount(value: Any) -> Fraction | Any:
    try:
        return quantity.parse(value)
    except quantity.BadQuantity:
        return value


def _pruned(value: Any) -> Any:
    """Semantic equality: an empty list or map is the same as none."""
    if isinstance(value, dict):
        pruned = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in pruned.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


# --- the patch -------------------------------------------------------------------------------


def status_patch(original: Obj, modified: Obj) -> Obj:
    """The strategic merge patch for ``nodes/<name>/status`` from ``original`` to ``modified``."""
    patch: Obj = {}
    old_meta, new_meta = original.get("metadata") or {}, modified.get("metadata") or {}
    meta = {}
    for key in ("labels", "annotations"):
        diff = _map_diff(old_meta.get(key) or {}, new_meta.get(key) or {})
        if diff:
            meta[key] = diff
    if meta:
        patch["metadata"] = meta
    old_status, new_status = original.get("status") or {}, modified.get("status") or {}
    status: Obj = {}
    for key in sorted(old_status.keys() | new_status.keys()):
        old, new = old_status.get(key), new_status.get(key)
        if old == new:
            continue
        if new is None:
            status[key] = None
        elif key == "conditions":
            status[key] = _conditions_diff(old or [], new)
        elif key == "addresses":
            status[key] = [*new, {"$patch": "replace"}]
        elif isinstance(old, dict) and isinstance(new, dict):
            diff = _map_diff(old, new, _same_amount if key in QUANTITY_MAPS else operator.eq)
            if diff:
                status[key] = diff
        else:
            status[key] = new
    if status:
        patch["status"] = status
    return patch


def _map_diff(old: Obj, new: Obj, same: Callable[[Any, Any], bool] = operator.eq) -> Obj:
    diff: Obj = {}
    for key in old.keys() | new.keys():
        if key not in new:
            diff[key] = None
        elif isinstance(old.get(key), dict) and isinstance(new[key], dict):
            nested = _map_diff(old[key], new[key], same)
            if nested:
                diff[key] = nested
        elif key not in old or not same(old[key], new[key]):
            diff[key] = new[key]
    return diff


def _same_amount(a: Any, b: Any) -> bool:
    """Quantities are equal by value: the server writes ``"96636764000"`` back as
    ``"96636764k"``."""
    return bool(_amount(a) == _amount(b))


def _conditions_diff(old: list[Obj], new: list[Obj]) -> list[Obj]:
    """Conditions merge by ``type``: the changed ones whole, the gone ones deleted."""
    before = {c.get("type"): c for c in old}
    after = {c.get("type") for c in new}
    changed = [c for c in new if before.get(c.get("type")) != c]
    gone = [{"type": t, "$patch": "delete"} for t in before if t not in after]
    return changed + gone


# --- an existing Node ------------------------------------------------------------------------


def reconciled(initial: Obj, existing: Obj) -> Obj | None:
    """The existing Node with what the kubelet reconciles on it, or None if nothing."""
    node = copy.deepcopy(existing)
    changed = _reconcile_annotation(initial, node)
    changed = _reconcile_labels(initial, node) or changed
    changed = _reconcile_resources(initial, node) or changed
    return node if changed else None


def _reconcile_annotation(initial: Obj, node: Obj) -> bool:
    wanted = ((initial.get("metadata") or {}).get("annotations") or {}).get(CMAD_ANNOTATION)
    annotations = node.setdefault("metadata", {}).setdefault("annotations", {})
    if annotations.get(CMAD_ANNOTATION) == wanted:
        return False
    if wanted is None:
        del annotations[CMAD_ANNOTATION]
    else:
        annotations[CMAD_ANNOTATION] = wanted
    return True


def _reconcile_labels(initial: Obj, node: Obj) -> bool:
    wanted = (initial.get("metadata") or {}).get("labels") or {}
    labels = node.setdefault("metadata", {}).setdefault("labels", {})
    changed = False
    for key in DEFAULT_LABELS:
        if key not in wanted:
            continue
        if labels.get(key) != wanted[key]:
            labels[key] = wanted[key]
            changed = True
        if labels.get(key) == "":
            del labels[key]
    return changed


def _reconcile_resources(initial: Obj, node: Obj) -> bool:
    """Capacity and allocatable when the Node has none; hugepage sizes as the machine has."""
    wanted = initial.get("status") or {}
    status = node.setdefault("status", {})
    changed = False
    for key in ("capacity", "allocatable"):
        if status.get(key) is None and wanted.get(key) is not None:
            status[key] = dict(wanted[key])
            changed = True
        status.setdefault(key, {})
    want_capacity = wanted.get("capacity") or {}
    want_allocatable = wanted.get("allocatable") or {}
    for name in [n for n in want_capacity if n.startswith("hugepages-")]:
        for key, want in (("capacity", want_capacity), ("allocatable", want_allocatable)):
            have = status[key].get(name)
            if name in want and (have is None or _amount(have) != _amount(want[name])):
                status[key][name] = want[name]
                changed = True
    for name in [n for n in status["capacity"] if n.startswith("hugepages-")]:
        if name not in want_capacity:
            status["capacity"].pop(name, None)
            status["allocatable"].pop(name, None)
            changed = True
    return changed
