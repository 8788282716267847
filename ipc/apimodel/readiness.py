"""``spec.readinessGates``: conditions other clients write on a pod (a load balancer
controller's ``target-health.example.com/ready``), each of which must be True before the
kubelet calls the pod Ready.

``parse_gates`` checks the field as the API does (each ``conditionType`` a qualified
name); ``gate_conditions`` picks the conditions the gates name out of an API pod's
status: what the api-watcher forwards to the parent, and what the parent's Ready
condition reads (the kubelet's ``GeneratePodReadyCondition`` reads them from the pod's
conditions as the API has them).
"""

from __future__ import annotations

from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel import labels
from pkletd.ipc.apimodel.fieldcheck import InvalidField

PATH = "spec.readinessGates"


def parse_gates(spec: dict[str, Any]) -> tuple[str, ...]:
    """The gates' condition types, in the spec's order."""
    found = []
    for i, item in enumerate(f.items(spec.get("readinessGates"), PATH)):
        where = f"{PATH}[{i}].conditionType"
        kind = f.string(f.mapping(item, f"{PATH}[{i}]").get("conditionType"), where, True)
        try:
            labels.qualified_name(kind)
        except labels.InvalidLabel as exc:
            raise InvalidField(f"{where}: invalid value {exc}") from exc
        found.append(kind)
    return tuple(found)


def gate_types(pod: dict[str, Any]) -> frozenset[str]:
    """The condition types a pod's gates name (none for a malformed field: the parser says
    what is wrong with it)."""
    spec = pod.get("spec")
    gates = spec.get("readinessGates") if isinstance(spec, dict) else None
    if not isinstance(gates, list):
        return frozenset()
    return frozenset(
        g["conditionType"]
        for g in gates
        if isinstance(g, dict) and isinstance(g.get("conditionType"), str)
    )


def gate_conditions(pod: dict[str, Any]) -> list[dict[str, Any]]:
    """The conditions of the pod's status that its gates name, in the status's order."""
    wanted = gate_types(pod)
    status = pod.get("status")
    found = status.get("conditions") if isinstance(status, dict) and wanted else None
    if not isinstance(found, list):
        return []
    return [c for c in found if isinstance(c, dict) and c.get("type") in wanted]
