"""Events (core/v1 and events.k8s.io/v1, one storage) and coordination.k8s.io/v1 Leases.

Both event APIs read and write the same objects, as in the real server: events.k8s.io/v1
is a conversion of the stored core/v1 Event (``regarding`` ↔ ``involvedObject``, ``note`` ↔
``message``, ``deprecatedCount`` ↔ ``count``...). Validation follows ``ValidateEventCreate``:
the legacy rules for core events without ``eventTime``, the strict ones (reportingController,
reportingInstance, action, reason) for new-style events.
"""

from __future__ import annotations

from typing import Any

from tests.harness.apiserver.kinds.base import Obj, Strategy
from tests.harness.apiserver.validation import (
    FieldError,
    qualified_name,
    validate_meta_update,
)

# events.k8s.io/v1 field -> core/v1 field
_TO_CORE = {
    "regarding": "involvedObject",
    "note": "message",
    "deprecatedCount": "count",
    "deprecatedFirstTimestamp": "firstTimestamp",
    "deprecatedLastTimestamp": "lastTimestamp",
    "deprecatedSource": "source",
    "reportingController": "reportingComponent",
}
_TO_EVENTS = {v: k for k, v in _TO_CORE.items()}
EVENTS_FIELD_LABELS = {
    **{
        f"regarding.{k}": f"involvedObject.{k}"
        for k in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    },
    "reportingController": "reportingComponent",
}
EVENT_TYPES = ("Normal", "Warning")


def to_events_v1(event: Obj) -> Obj:
    out = {_TO_EVENTS.get(k, k): v for k, v in event.items()}
    out["apiVersion"], out["kind"] = "events.k8s.io/v1", "Event"
    return out


def to_core_v1(event: Obj) -> Obj:
    out = {_TO_CORE.get(k, k): v for k, v in event.items()}
    out["apiVersion"], out["kind"] = "v1", "Event"
    return out


class EventStrategy(Strategy):
    kind = "Event"
    model = "CoreV1Event"
    allow_create_on_update = True
    field_labels = (
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    )

    def __init__(self, strict: bool = False) -> None:
        self.strict = strict  # requests through events.k8s.io/v1
        if strict:
            self.group = "events.k8s.io"
            self.model = "EventsV1Event"

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + validate_event(obj, self.strict)

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_meta_update(new, old) + validate_event(new, self.strict)

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        involved = obj.get("involvedObject") or {}
        source = (obj.get("source") or {}).get("component") or obj.get("reportingComponent", "")
        fields = {
            f"involvedObject.{k}": str(involved.get(k, ""))
            for k in (
                "kind",
                "namespace",
                "name",
                "uid",
                "apiVersion",
                "resourceVersion",
                "fieldPath",
            )
        }
        fields.update(
            reason=obj.get("reason", ""),
            source=source,
            type=obj.get("type", ""),
            reportingComponent=obj.get("reportingComponent", ""),
        )
        return fields


def validate_event(event: Obj, strict: bool) -> list[FieldError]:
    namespace = event["metadata"].get("namespace", "")
    involved = event.get("involvedObject") or {}
    mismatch = FieldError.invalid(
        "involvedObject.namespace", involved.get("namespace", ""), "does not match event.namespace"
    )
    errs: list[FieldError] = []
    if not event.get("eventTime") and not strict:
        if not involved.get("namespace"):
            if namespace not in ("", "default"):
                errs.append(mismatch)
        elif namespace != involved.get("namespace"):
            errs.append(mismatch)
        return errs
    if not involved.get("namespace") and namespace not in ("default", "kube-system"):
        errs.append(mismatch)
    controller = "reportingController" if strict else "reportingComponent"
    errs += _new_style_fields(event, controller)
    if strict:
        errs += _strict_fields(event)
    return errs


def _new_style_fields(event: Obj, controller_path: str) -> list[FieldError]:
    errs: list[FieldError] = []
    controller = event.get("reportingComponent", "")
    if not controller:
        errs.append(FieldError.required(controller_path))
    else:
        errs += [
            FieldError.invalid(controller_path, controller, p) for p in qualified_name(controller)
        ]
    limits = {"reportingInstance": 128, "action": 128, "reason": 128}
    for key, limit in limits.items():
        value = event.get(key, "")
        if not value:
            errs.append(FieldError.required(key))
        elif len(value) > limit:
            errs.append(FieldError.invalid(key, "", f"can have at most {limit} characters"))
    if len(event.get("message", "")) > 1024:
        errs.append(FieldError.invalid("message", "", "can have at most 1024 characters"))
    return errs


def _strict_fields(event: Obj) -> list[FieldError]:
    errs = []
    if not event.get("eventTime"):
        errs.append(FieldError.required("eventTime"))
    kind = event.get("type", "")
    if kind not in EVENT_TYPES:
        errs.append(
            FieldError.invalid("type", kind, "has invalid value, must be one of [Normal Warning]")
        )
    return errs


# --------------------------------------------------------------------------- leases


class LeaseStrategy(Strategy):
    kind = "Lease"
    group = "coordination.k8s.io"
    model = "V1Lease"
    allow_create_on_update = True

    def validate(self, obj: Obj) -> list[FieldError]:
        return super().validate(obj) + _validate_lease(obj.get("spec") or {})

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_meta_update(new, old) + _validate_lease(new.get("spec") or {})


def _validate_lease(spec: dict[str, Any]) -> list[FieldError]:
    errs = []
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and duration <= 0:
        errs.append(
            FieldError.invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")
        )
    transitions = spec.get("leaseTransitions")
    if transitions is not None and transitions < 0:
        errs.append(
            FieldError.invalid(
                "spec.leaseTransitions", transitions, "must be greater than or equal to 0"
            )
        )
    return errs
