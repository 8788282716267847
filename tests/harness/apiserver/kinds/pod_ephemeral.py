"""Ephemeral containers as the real API server takes them: only through
``pods/<name>/ephemeralcontainers``, only added, and validated as containers.

- The subresource (GET, PUT, PATCH of the Pod) changes nothing but
  ``spec.ephemeralContainers``: the rest of the spec, the status and the metadata the
  status subresource resets (labels, annotations, finalizers, owner references) stay as
  stored (``dropNonEphemeralContainerUpdates``); the generation moves when the spec did.
- ``ValidatePodEphemeralContainersUpdate``: the whole spec validated; a mirror pod's
  refused (``[]: Forbidden: static pods do not support ephemeral containers``); an
  existing one removed or changed is ``Forbidden: existing ephemeral containers "x" may
  not be removed`` / ``may not be changed`` with the difference.

The containers themselves are validated with the rest of the spec (``pod_validation``:
``validate_ephemeral``); a pod may not be created with any, nor have them changed by an
update of the pod (``pods``).
"""

from __future__ import annotations

import copy

from tests.harness.apiserver.kinds.base import Obj, StatusStrategy, semantically_equal
from tests.harness.apiserver.kinds.pod_validation import validate_spec
from tests.harness.apiserver.validation import FieldError, go_value, validate_meta_update

MIRROR = "kubernetes.io/config.mirror"
STATUS_RESET = ("labels", "annotations", "finalizers", "ownerReferences", "generation")
PATH = "spec.ephemeralContainers"


class PodEphemeralContainersStrategy(StatusStrategy):
    """The ``ephemeralcontainers`` subresource of pods."""

    def prepare_update(self, new: Obj, old: Obj) -> None:
        added = (new.get("spec") or {}).get("ephemeralContainers")
        new["spec"] = copy.deepcopy(old.get("spec") or {})
        if added is None:
            new["spec"].pop("ephemeralContainers", None)
        else:
            new["spec"]["ephemeralContainers"] = added
        _restore(new, old, "status")
        for key in STATUS_RESET:
            _restore(new["metadata"], old["metadata"], key)
        if self.main.tracks_generation and not semantically_equal(new["spec"], old.get("spec")):
            new["metadata"]["generation"] = old["metadata"].get("generation", 0) + 1

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + validate_spec(new.get("spec") or {})
        if MIRROR in (old["metadata"].get("annotations") or {}):
            return [FieldError.forbidden("[]", "static pods do not support ephemeral containers")]
        return errs + only_additions(new.get("spec") or {}, old.get("spec") or {})


def only_additions(new: Obj, old: Obj) -> list[FieldError]:
    now = {c.get("name"): c for c in new.get("ephemeralContainers") or []}
    errs = []
    for before in old.get("ephemeralContainers") or []:
        name = before.get("name")
        after = now.get(name)
        if after is None:
            why = f"existing ephemeral containers {go_value(name)} may not be removed\n"
            errs.append(FieldError.forbidden(PATH, why))
        elif not semantically_equal(after, before):
            why = f"existing ephemeral containers {go_value(name)} may not be changed\n"
            errs.append(FieldError.forbidden(PATH, why + _diff(after, before)))
    return errs


def _restore(new: Obj, old: Obj, key: str) -> None:
    if key in old:
        new[key] = copy.deepcopy(old[key])
    else:
        new.pop(key, None)


def _diff(new: Obj, old: Obj) -> str:
    keys = sorted(k for k in set(new) | set(old) if not semantically_equal(new.get(k), old.get(k)))
    lines = [f"  \t- {k}: {old.get(k)!r}\n  \t+ {k}: {new.get(k)!r}" for k in keys]
    return "  core.EphemeralContainer{\n" + "\n".join(lines) + "\n  }\n"
