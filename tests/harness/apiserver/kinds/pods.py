"""Pods: the pod strategy, its ``status`` strategy, validation and the binding step.

What the real registry does and a node agent notices: status is reset on create (phase
Pending, qosClass) and ignored by writes to the pod; the spec is immutable but for images,
``activeDeadlineSeconds`` (may only shrink), new tolerations and removed scheduling gates;
``/status`` writes keep the spec and owner references; deletion is graceful on a bound,
non-terminal pod (``grace_period``); ``bind`` is what ``pods/binding`` does. Ephemeral
containers come only through ``pods/<name>/ephemeralcontainers`` (``pod_ephemeral``): a pod
is not created with any, and its status may not show an ended one running again.
"""

from __future__ import annotations

import copy
import datetime as dt
import ipaddress
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.kinds.base import Obj, StatusStrategy, Strategy
from tests.harness.apiserver.kinds.pod_defaults import default_pod, qos_class
from tests.harness.apiserver.kinds.pod_validation import spec_changes, validate_spec
from tests.harness.apiserver.validation import (
    FieldError,
    validate_meta_update,
)


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class PodStrategy(Strategy):
    kind = "Pod"
    model = "V1Pod"
    has_status = True
    return_deleted_object = True
    field_labels = (
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "spec.hostNetwork",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    )

    def __init__(self, tracks_generation: bool = False) -> None:
        self.tracks_generation = tracks_generation

    def default(self, obj: Obj) -> None:
        default_pod(obj)

    def prepare_create(self, obj: Obj) -> None:
        super().prepare_create(obj)
        obj["status"] = {"phase": "Pending", "qosClass": qos_class(obj)}

    def validate(self, obj: Obj) -> list[FieldError]:
        spec = obj.get("spec") or {}
        errs = super().validate(obj) + validate_spec(spec)
        if spec.get("ephemeralContainers"):  # only the ephemeralcontainers subresource adds them
            errs.append(FieldError.forbidden("spec.ephemeralContainers", "cannot be set on create"))
        return errs

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old)
        errs += validate_spec(new.get("spec") or {})
        errs += spec_changes(new.get("spec") or {}, old.get("spec") or {})
        return errs

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        pod_ips = status.get("podIPs") or []
        return {
            "spec.nodeName": spec.get("nodeName", ""),
            "spec.restartPolicy": spec.get("restartPolicy", ""),
            "spec.schedulerName": spec.get("schedulerName", ""),
            "spec.serviceAccountName": spec.get("serviceAccountName", ""),
            "spec.hostNetwork": "true" if spec.get("hostNetwork") else "false",
            "status.phase": status.get("phase", ""),
            "status.podIP": pod_ips[0].get("ip", "") if pod_ips else "",
            "status.nominatedNodeName": status.get("nominatedNodeName", ""),
        }

    def grace_period(self, obj: Obj, requested: int | None) -> int | None:
        spec, status = obj.get("spec") or {}, obj.get("status") or {}
        period = (
            requested if requested is not None else spec.get("terminationGracePeriodSeconds", 0)
        )
        if not spec.get("nodeName") or status.get("phase") in ("Failed", "Succeeded"):
            period = 0
        return 1 if period < 0 else period


class PodStatusStrategy(StatusStrategy):
    def prepare_update(self, new: Obj, old: Obj) -> None:
        super().prepare_update(new, old)
        owners = old["metadata"].get("ownerReferences")
        if owners is None:
            new["metadata"].pop("ownerReferences", None)
        else:
            new["metadata"]["ownerReferences"] = copy.deepcopy(owners)
        status = new.setdefault("status", {})
        if not status.get("qosClass"):
            status["qosClass"] = (old.get("status") or {}).get("qosClass", "")

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old)
        status = new.get("status") or {}
        for field in ("podIPs", "hostIPs"):
            for i, entry in enumerate(status.get(field) or []):
                errs += _ip_errors(f"status.{field}[{i}].ip", entry.get("ip", ""))
        policy = (old.get("spec") or {}).get("restartPolicy", "")
        errs += _terminated_stays(new, old, "containerStatuses", policy)
        # the kubelet never restarts an ephemeral container: an implicit Never
        errs += _terminated_stays(new, old, "ephemeralContainerStatuses", "Never")
        return errs


def _terminated_stays(new: Obj, old: Obj, key: str, policy: str) -> list[FieldError]:
    """``ValidateContainerStateTransition``: under ``policy`` a terminated container (of the
    status list ``key``) may not be shown running or waiting again."""
    if policy == "Always":
        return []
    after = {s.get("name"): s for s in (new.get("status") or {}).get(key) or []}
    errs = []
    for i, before in enumerate((old.get("status") or {}).get(key) or []):
        terminated = (before.get("state") or {}).get("terminated")
        if terminated is None or (terminated.get("exitCode") != 0 and policy == "OnFailure"):
            continue
        now = after.get(before.get("name"))
        if now is not None and "terminated" not in (now.get("state") or {}):
            errs.append(
                FieldError.forbidden(
                    f"status.{key}[{i}].state", "may not be transitioned to non-terminated state"
                )
            )
    return errs


def _ip_errors(path: str, value: str) -> list[FieldError]:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return [FieldError.invalid(path, value, "must be a valid IP address")]
    return []


# --------------------------------------------------------------------------- binding


def bind(pod: Obj, binding: Obj) -> None:
    """``pods/binding``: set spec.nodeName and the PodScheduled condition, or fail."""
    name = pod["metadata"]["name"]
    spec = pod.setdefault("spec", {})
    if pod["metadata"].get("deletionTimestamp"):
        raise errors.conflict(
            "", "pods/binding", name, f"pod {name} is being deleted, cannot be assigned to a host"
        )
    if spec.get("nodeName"):
        raise errors.conflict(
            "", "pods/binding", name, f'pod {name} is already assigned to node "{spec["nodeName"]}"'
        )
    spec["nodeName"] = binding["target"]["name"]
    annotations = (binding.get("metadata") or {}).get("annotations") or {}
    if annotations:
        pod["metadata"].setdefault("annotations", {}).update(annotations)
    conditions = pod.setdefault("status", {}).setdefault("conditions", [])
    conditions[:] = [c for c in conditions if c.get("type") != "PodScheduled"]
    conditions.append(
        {
            "type": "PodScheduled",
            "status": "True",
            "lastProbeTime": None,
            "lastTransitionTime": now_rfc3339(),
        }
    )


def validate_binding(binding: Obj) -> list[FieldError]:
    target: dict[str, Any] = binding.get("target") or {}
    errs = []
    if target.get("kind") not in (None, "", "Node"):
        errs.append(FieldError.not_supported("target.kind", target["kind"], ("Node", "<empty>")))
    if not target.get("name"):
        errs.append(FieldError.required("target.name"))
    return errs
