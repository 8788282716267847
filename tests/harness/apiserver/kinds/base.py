"""The strategy of one kind: defaults, what create/update may change, validation, deletion.

A ``Strategy`` plays the part of a registry strategy in kube-apiserver (``PrepareForCreate``,
``PrepareForUpdate``, ``Validate``, ``ValidateUpdate``, ``CheckGracefulDelete``...) plus the
scheme defaulting of its type. ``rest.py`` calls them in the real order::

    strategy.default(obj); strategy.prepare_create(obj); errs = strategy.validate(obj)
    strategy.default(new); strategy.prepare_update(new, old); errs = strategy.validate_update(...)

A ``status`` subresource is the same kind with another strategy (``StatusStrategy``): the spec
of an update is reset to the stored one.
"""

from __future__ import annotations

import copy
from typing import Any

from tests.harness.apiserver.validation import (
    FieldError,
    NameCheck,
    dns1123_subdomain,
    validate_meta_create,
    validate_meta_update,
)

Obj = dict[str, Any]


def spec_of(obj: Obj) -> dict[str, Any]:
    spec: dict[str, Any] = obj.setdefault("spec", {})
    return spec


def semantically_equal(a: Any, b: Any) -> bool:
    """``apiequality.Semantic.DeepEqual``: empty and missing lists/maps are the same."""
    return bool(_pruned(a) == _pruned(b))


def _pruned(value: Any) -> Any:
    if isinstance(value, dict):
        out = {k: _pruned(v) for k, v in value.items()}
        return {k: v for k, v in out.items() if v not in ({}, [], None)}
    if isinstance(value, list):
        return [_pruned(v) for v in value]
    return value


class Strategy:
    """Defaults: a namespaced kind with no spec/status split and immediate deletion."""

    kind = ""
    group = ""
    model = ""  # the client model that decodes it, e.g. "V1Pod"
    namespaced = True
    name_check: NameCheck = staticmethod(dns1123_subdomain)
    allow_create_on_update = False
    allow_unconditional_update = True
    return_deleted_object = False
    has_status = False  # the main resource ignores .status (a status subresource owns it)
    tracks_generation = False  # metadata.generation: 1 on create, +1 on spec change
    field_labels: tuple[str, ...] = ()  # field selector keys besides metadata.name/namespace

    # --- create

    def default(self, obj: Obj) -> None:
        """Scheme defaulting (runs on create, update and patch results)."""

    def prepare_create(self, obj: Obj) -> None:
        if self.has_status:
            obj.pop("status", None)
        if self.tracks_generation:
            obj["metadata"]["generation"] = 1

    def validate(self, obj: Obj) -> list[FieldError]:
        return validate_meta_create(obj, self.namespaced, self.name_check)

    # --- update

    def prepare_update(self, new: Obj, old: Obj) -> None:
        if self.has_status:
            if "status" in old:
                new["status"] = copy.deepcopy(old["status"])
            else:
                new.pop("status", None)
        if self.tracks_generation:
            generation = old["metadata"].get("generation", 0)
            if not semantically_equal(new.get("spec"), old.get("spec")):
                generation += 1
            new["metadata"]["generation"] = generation

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_meta_update(new, old)

    # --- selection and deletion

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        """The field set field selectors match against (metadata.* added by the caller)."""
        return {}

    def grace_period(self, obj: Obj, requested: int | None) -> int | None:
        """``CheckGracefulDelete``: the grace period to use, or None if not graceful."""
        return None


class StatusStrategy(Strategy):
    """The ``/status`` subresource of a kind: spec and the rest stay as stored."""

    def __init__(self, main: Strategy) -> None:
        self.main = main
        self.kind = main.kind
        self.group = main.group
        self.model = main.model
        self.namespaced = main.namespaced
        self.name_check = main.name_check
        self.field_labels = main.field_labels

    def default(self, obj: Obj) -> None:
        self.main.default(obj)

    def prepare_update(self, new: Obj, old: Obj) -> None:
        if "spec" in old:
            new["spec"] = copy.deepcopy(old["spec"])
        else:
            new.pop("spec", None)
        if "generation" in old["metadata"]:
            new["metadata"]["generation"] = old["metadata"]["generation"]

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_meta_update(new, old)

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        return self.main.selectable_fields(obj)
