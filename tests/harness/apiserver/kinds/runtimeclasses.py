"""RuntimeClasses (``node.k8s.io/v1``, cluster-scoped): a name pods use in
``spec.runtimeClassName`` for a handler of the node's runtime, with the pod overhead and
scheduling constraints admission applies (``admission.py``).

As ``pkg/apis/node/validation``: the name is a DNS subdomain, ``handler`` a DNS label
(required) that may not change, ``overhead.podFixed`` holds standard resources with
quantities of at least 0, and ``scheduling.nodeSelector`` valid labels.
"""

from __future__ import annotations

from tests.harness.apiserver import quantities
from tests.harness.apiserver.kinds.base import Obj, Strategy
from tests.harness.apiserver.validation import (
    FieldError,
    dns1123_label,
    immutable,
    validate_labels,
    validate_meta_update,
)

STANDARD_RESOURCES = ("cpu", "memory", "ephemeral-storage")


class RuntimeClassStrategy(Strategy):
    kind = "RuntimeClass"
    group = "node.k8s.io"
    model = "V1RuntimeClass"
    namespaced = False

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate(obj)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old)
        if new.get("handler") != old.get("handler"):
            errs.append(immutable("handler", new.get("handler", "")))
        return errs


def _validate(obj: Obj) -> list[FieldError]:
    handler = obj.get("handler") or ""
    errs = [FieldError.invalid("handler", handler, p) for p in dns1123_label(handler)]
    fixed = (obj.get("overhead") or {}).get("podFixed") or {}
    for name, value in fixed.items():
        path = f"overhead.podFixed[{name}]"
        if name not in STANDARD_RESOURCES and not name.startswith("hugepages-"):
            errs.append(FieldError.invalid(path, name, "must be a standard resource type"))
        elif quantities.parse(value) < 0:
            errs.append(FieldError.invalid(path, value, "must be greater than or equal to 0"))
    selector = (obj.get("scheduling") or {}).get("nodeSelector") or {}
    errs += validate_labels(selector, "scheduling.nodeSelector")
    return errs


# --------------------------------------------------------------------------- admission
# plugin/pkg/admission/runtimeclass: on a pod's creation, its class must exist; the class's
# overhead becomes the pod's (a different one is refused), its node selector and
# tolerations are merged into the pod's. Each returns why the pod is refused, or None.


def admit_pod(pod: Obj, runtime_class: Obj | None) -> str | None:
    spec = pod.setdefault("spec", {})
    name = spec.get("runtimeClassName")
    if name is None:
        return None
    if runtime_class is None:
        return f'pod rejected: RuntimeClass "{name}" not found'
    fixed = (runtime_class.get("overhead") or {}).get("podFixed")
    if fixed is not None:
        if spec.get("overhead") is not None and not _same_amounts(spec["overhead"], fixed):
            return OVERHEAD_MISMATCH
        spec["overhead"] = dict(fixed)
    return _merge_scheduling(spec, runtime_class.get("scheduling") or {})


def validate_pod(pod: Obj, runtime_class: Obj | None) -> str | None:
    spec = pod.get("spec") or {}
    fixed = ((runtime_class or {}).get("overhead") or {}).get("podFixed")
    if fixed is not None:
        return None if _same_amounts(spec.get("overhead") or {}, fixed) else OVERHEAD_MISMATCH
    if spec.get("overhead") is not None:
        return "pod rejected: Pod Overhead set without corresponding RuntimeClass defined Overhead"
    return None


OVERHEAD_MISMATCH = "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"


def _same_amounts(a: Obj, b: Obj) -> bool:
    return a.keys() == b.keys() and all(quantities.parse(a[k]) == quantities.parse(b[k]) for k in a)


def _merge_scheduling(spec: Obj, scheduling: Obj) -> str | None:
    wanted = scheduling.get("nodeSelector") or {}
    selector = spec.get("nodeSelector")
    if wanted and selector is None:
        spec["nodeSelector"] = dict(wanted)
    for key, value in wanted.items() if selector is not None else ():
        if key in selector and selector[key] != value:
            return (
                f"conflict: runtimeClass.scheduling.nodeSelector[{key}] = {value}; "
                f"pod.spec.nodeSelector[{key}] = {selector[key]}"
            )
        selector[key] = value
    tolerations = spec.get("tolerations") or []
    added = [t for t in scheduling.get("tolerations") or [] if t not in tolerations]
    if added:
        spec["tolerations"] = tolerations + added
    return None
