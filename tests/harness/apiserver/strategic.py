"""Strategic merge patch (``application/strategic-merge-patch+json``) over the built-in types.

Lists merge by the patch merge key the Go struct tags declare (``PATCH_META``); a list without
one is replaced; ``finalizers`` and ``podCIDRs`` merge as sets. Directives: ``$patch``
(``replace``/``delete``/``merge``) in maps and list items, ``$setElementOrder/<list>``,
``$deleteFromPrimitiveList/<list>`` and ``$retainKeys``. Nested types come from the client's
models (``schema.field_type``), so a key is looked up on the struct it belongs to::

    patched = strategic_merge(pod, {"spec": {"containers": [{"name": "c", "image": "x:2"}]}},
                              "V1Pod")
"""

from __future__ import annotations

import copy
from typing import Any

from tests.harness.apiserver.patch import PatchMalformed
from tests.harness.apiserver.schema import element_type, field_type, is_model

_CONTAINER_LISTS = {
    "ports": ("merge", "containerPort"),
    "env": ("merge", "name"),
    "volumeMounts": ("merge", "mountPath"),
    "volumeDevices": ("merge", "devicePath"),
}
# (struct, json field) -> (patchStrategy, patchMergeKey), from the k8s.io/api struct tags.
PATCH_META: dict[tuple[str, str], tuple[str, str | None]] = {
    ("V1PodSpec", "containers"): ("merge", "name"),
    ("V1PodSpec", "initContainers"): ("merge", "name"),
    ("V1PodSpec", "ephemeralContainers"): ("merge", "name"),
    ("V1PodSpec", "volumes"): ("merge,retainKeys", "name"),
    ("V1PodSpec", "imagePullSecrets"): ("merge", "name"),
    ("V1PodSpec", "hostAliases"): ("merge", "ip"),
    ("V1PodSpec", "topologySpreadConstraints"): ("merge", "topologyKey"),
    ("V1PodSpec", "schedulingGates"): ("merge", "name"),
    ("V1PodSpec", "resourceClaims"): ("merge,retainKeys", "name"),
    **{("V1Container", k): v for k, v in _CONTAINER_LISTS.items()},
    **{("V1EphemeralContainer", k): v for k, v in _CONTAINER_LISTS.items()},
    ("V1PodStatus", "conditions"): ("merge", "type"),
    ("V1PodStatus", "podIPs"): ("merge", "ip"),
    ("V1PodStatus", "hostIPs"): ("merge", "ip"),
    ("V1PodStatus", "resourceClaimStatuses"): ("merge,retainKeys", "name"),
    ("V1NodeStatus", "conditions"): ("merge", "type"),
    ("V1NodeStatus", "addresses"): ("merge", "type"),
    ("V1NodeSpec", "podCIDRs"): ("merge", None),
    ("V1ObjectMeta", "finalizers"): ("merge", None),
    ("V1ObjectMeta", "ownerReferences"): ("merge", "uid"),
    ("V1ServiceSpec", "ports"): ("merge", "port"),
    ("V1ServiceStatus", "conditions"): ("merge", "type"),
    ("V1ServiceAccount", "secrets"): ("merge", "name"),
    ("V1NamespaceStatus", "conditions"): ("merge", "type"),
}
_DELETE = object()
_ORDER = "$setElementOrder/"
_DELETE_FROM = "$deleteFromPrimitiveList/"


class MergeKeyMissing(ValueError):
    """A list item without its merge key: the real server answers 500 with this text."""


def strategic_merge(original: dict[str, Any], patch: Any, model: str) -> dict[str, Any]:
    if not isinstance(patch, dict):
        raise PatchMalformed(
            "json: cannot unmarshal array into Go value of type map[string]interface {}"
        )
    merged = _merge_map(copy.deepcopy(original), patch, model)
    return {} if merged is _DELETE else merged


def _merge_map(original: dict[str, Any], patch: dict[str, Any], model: str | None) -> Any:
    patch = dict(patch)
    directive = patch.pop("$patch", None)
    if directive == "delete":
        return _DELETE
    if directive == "replace":
        return _merge_map({}, patch, model)
    if directive not in (None, "merge"):
        raise PatchMalformed(f"Unknown patch type: {directive} in map: {patch}")
    retain = patch.pop("$retainKeys", None)
    orders = {k[len(_ORDER) :]: patch.pop(k) for k in list(patch) if k.startswith(_ORDER)}
    removals = {
        k[len(_DELETE_FROM) :]: patch.pop(k) for k in list(patch) if k.startswith(_DELETE_FROM)
    }
    result = dict(original)
    for key, value in patch.items():
        _merge_key(result, key, value, model)
    for key, values in removals.items():
        if isinstance(result.get(key), list):
            result[key] = [v for v in result[key] if v not in values]
    for key, order in orders.items():
        if isinstance(result.get(key), list):
            result[key] = _reorder(result[key], order, _meta(model, key)[1])
    if retain is not None:
        if not isinstance(retain, list):
            raise PatchMalformed("invalid patch: $retainKeys must be a list")
        result = {k: v for k, v in result.items() if k in retain}
    return result


def _merge_key(result: dict[str, Any], key: str, value: Any, model: str | None) -> None:
    if value is None:
        result.pop(key, None)
        return
    type_name = field_type(model, key) if model else None
    child = _child_model(type_name)
    existing = result.get(key)
    if isinstance(value, dict):
        base = existing if isinstance(existing, dict) else {}
        merged = _merge_map(base, value, child)
        if merged is _DELETE:
            result.pop(key, None)
        else:
            result[key] = merged
    elif isinstance(value, list):
        items = existing if isinstance(existing, list) else []
        result[key] = _merge_list(items, value, model, key, child)
    else:
        result[key] = value


def _child_model(type_name: str | None) -> str | None:
    if type_name is None:
        return None
    inner = element_type(type_name)
    return inner if is_model(inner) else None


def _meta(model: str | None, key: str) -> tuple[str | None, str | None]:
    if model is None:
        return None, None
    return PATCH_META.get((model, key), (None, None))


def _merge_list(
    original: list[Any], patch: list[Any], model: str | None, key: str, item_model: str | None
) -> list[Any]:
    strategy, merge_key = _meta(model, key)
    if strategy is None or "merge" not in strategy:
        return [_fresh(item, item_model) for item in patch if not _is_directive(item)]
    if merge_key is None:
        return list(original) + [v for v in patch if v not in original]
    if any(isinstance(i, dict) and i.get("$patch") == "replace" for i in patch):
        return [_fresh(i, item_model) for i in patch if not _is_directive(i)]
    result = list(original)
    for item in patch:
        if not isinstance(item, dict):
            raise PatchMalformed(f"invalid patch: expected a map in list {key}, got {item!r}")
        if merge_key not in item:
            raise MergeKeyMissing(
                f"map: {_go_map(item)} does not contain declared merge key: {merge_key}"
            )
        index = next(
            (
                i
                for i, old in enumerate(result)
                if isinstance(old, dict) and old.get(merge_key) == item[merge_key]
            ),
            None,
        )
        if item.get("$patch") == "delete":
            result = [
                o
                for o in result
                if not (isinstance(o, dict) and o.get(merge_key) == item[merge_key])
            ]
            continue
        if index is None:
            result.append(_fresh(item, item_model))
        else:
            result[index] = _merge_map(result[index], item, item_model)
    return result


def _is_directive(item: Any) -> bool:
    return isinstance(item, dict) and set(item) == {"$patch"}


def _fresh(value: Any, model: str | None) -> Any:
    """A patch value with nothing under it: its directives applied to an empty base."""
    if isinstance(value, dict):
        merged = _merge_map({}, value, model)
        return {} if merged is _DELETE else merged
    return value


def _reorder(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    def identity(item: Any) -> Any:
        if merge_key is not None and isinstance(item, dict):
            return item.get(merge_key)
        return item

    wanted = [identity(o) for o in order]
    placed = sorted(
        (i for i in items if identity(i) in wanted), key=lambda i: wanted.index(identity(i))
    )
    rest = [i for i in items if identity(i) not in wanted]
    return placed + rest


def _go_map(item: dict[str, Any]) -> str:
    return "map[" + " ".join(f"{k}:{v}" for k, v in sorted(item.items())) + "]"
