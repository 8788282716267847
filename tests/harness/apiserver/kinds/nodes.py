"""Nodes: cluster-scoped, created with their status by the kubelet, ``/status`` for heartbeats.

As in the real registry: create keeps the status the kubelet sends (allocatable defaults to
capacity); a write to the node ignores ``.status``; a write to ``/status`` ignores ``.spec``;
``spec.podCIDR(s)`` and ``spec.providerID`` may only go from unset to set; taints must have
a key and a known effect. Field selector: ``spec.unschedulable``.
"""

from __future__ import annotations

import ipaddress

from tests.harness.apiserver.kinds.base import Obj, StatusStrategy, Strategy
from tests.harness.apiserver.kinds.pod_validation import TAINT_EFFECTS
from tests.harness.apiserver.validation import FieldError, qualified_name, validate_meta_update

ADDRESS_TYPES = ("Hostname", "InternalIP", "ExternalIP", "InternalDNS", "ExternalDNS")


class NodeStrategy(Strategy):
    kind = "Node"
    model = "V1Node"
    namespaced = False
    has_status = True
    field_labels = ("spec.unschedulable",)

    def default(self, obj: Obj) -> None:
        status = obj.get("status")
        if status and status.get("capacity") and not status.get("allocatable"):
            status["allocatable"] = dict(status["capacity"])

    def prepare_create(self, obj: Obj) -> None:
        obj.setdefault("status", {})
        obj.setdefault("spec", {}).pop("configSource", None)

    def validate(self, obj: Obj) -> list[FieldError]:
        return (
            super().validate(obj)
            + _validate_spec(obj.get("spec") or {})
            + _validate_status(obj.get("status") or {})
        )

    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        errs = validate_meta_update(new, old) + _validate_spec(new.get("spec") or {})
        new_spec, old_spec = new.get("spec") or {}, old.get("spec") or {}
        for key in ("podCIDR", "providerID"):
            if old_spec.get(key) and new_spec.get(key) != old_spec.get(key):
                errs.append(
                    FieldError.forbidden(
                        f"spec.{key}", f'node updates may not change {key} except from "" to valid'
                    )
                )
        if old_spec.get("podCIDRs") and new_spec.get("podCIDRs") != old_spec.get("podCIDRs"):
            errs.append(
                FieldError.forbidden(
                    "spec.podCIDRs", 'node updates may not change podCIDR except from "" to valid'
                )
            )
        return errs

    def selectable_fields(self, obj: Obj) -> dict[str, str]:
        unschedulable = bool((obj.get("spec") or {}).get("unschedulable"))
        return {"spec.unschedulable": "true" if unschedulable else "false"}


class NodeStatusStrategy(StatusStrategy):
    def validate_update(self, new: Obj, old: Obj) -> list[FieldError]:
        return validate_meta_update(new, old) + _validate_status(new.get("status") or {})


def _validate_spec(spec: Obj) -> list[FieldError]:
    errs: list[FieldError] = []
    for i, taint in enumerate(spec.get("taints") or []):
        path = f"spec.taints[{i}]"
        key = taint.get("key", "")
        if not key:
            errs.append(FieldError.required(f"{path}.key"))
        else:
            errs += [FieldError.invalid(f"{path}.key", key, p) for p in qualified_name(key)]
        effect = taint.get("effect", "")
        if not effect:
            errs.append(FieldError.required(f"{path}.effect"))
        elif effect not in TAINT_EFFECTS:
            errs.append(FieldError.not_supported(f"{path}.effect", effect, TAINT_EFFECTS))
    cidrs = ([spec["podCIDR"]] if spec.get("podCIDR") else []) + list(spec.get("podCIDRs") or [])
    for i, cidr in enumerate(cidrs):
        try:
            ipaddress.ip_network(cidr, strict=False)
        except ValueError:
            errs.append(
                FieldError.invalid(
                    f"spec.podCIDRs[{i}]",
                    cidr,
                    "must be a valid CIDR value, (e.g. 10.9.8.0/24 or 2001:db8::/64)",
                )
            )
    return errs


def _validate_status(status: Obj) -> list[FieldError]:
    errs = []
    for i, address in enumerate(status.get("addresses") or []):
        kind = address.get("type", "")
        if kind not in ADDRESS_TYPES:
            errs.append(
                FieldError.not_supported(f"status.addresses[{i}].type", kind, ADDRESS_TYPES)
            )
    return errs


def preferred_address(node: Obj, preference: tuple[str, ...]) -> str | None:
    """``GetPreferredNodeAddress``: the first address of the first preferred type."""
    addresses = (node.get("status") or {}).get("addresses") or []
    for kind in preference:
        for address in addresses:
            if address.get("type") == kind and address.get("address"):
                return str(address["address"])
    return None


def kubelet_port(node: Obj, default: int = 10250) -> int:
    endpoints = (node.get("status") or {}).get("daemonEndpoints") or {}
    port = (endpoints.get("kubeletEndpoint") or {}).get("Port", 0)
    return int(port) if port else default


def is_ready(node: Obj) -> bool:
    conditions = (node.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
