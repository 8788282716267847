"""Server-side printing: ``Accept: application/json;as=Table;g=meta.k8s.io;v=v1``.

kubectl asks the server for a Table and prints its cells, so ``kubectl get`` shows what these
printers compute, as kube-apiserver's printers do: pods (NAME READY STATUS RESTARTS AGE; wide
IP NODE NOMINATED NODE READINESS GATES, STATUS from the reasons of the container states and
``Terminating``), nodes (NAME STATUS ROLES AGE VERSION; wide INTERNAL-IP EXTERNAL-IP OS-IMAGE
KERNEL-VERSION CONTAINER-RUNTIME), events, namespaces, configmaps, secrets, services,
serviceaccounts, endpoints, leases, runtimeclasses, the storage kinds
(``storageprinters.py``); anything else NAME and CREATED AT. All
columns are always sent (the server prints wide); kubectl hides those of priority 1::

    table = to_table(resource, [pod], {"resourceVersion": "7"}, include="Metadata")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness.apiserver.kinds.events import to_core_v1
from tests.harness.apiserver.printers import age, event_cells, node_cells, pod_cells, pod_conditions
from tests.harness.apiserver.resources import ResourceType
from tests.harness.apiserver.storageprinters import STORAGE_PRINTERS

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority
NAME_DOC = (
    "Name must be unique within a namespace. Is required when creating resources, "
    "although some resources may allow a client to request the generation of an "
    "appropriate name automatically. Name is primarily intended for creation "
    "idempotence and configuration definition. Cannot be updated. More info: "
    "https://kubernetes.io/docs/concepts/overview/working-with-objects/names#names"
)


def _service_cells(svc: Obj) -> list[Any]:
    spec = svc.get("spec") or {}
    ingress = ((svc.get("status") or {}).get("loadBalancer") or {}).get("ingress") or []
    external = ",".join(i.get("ip") or i.get("hostname", "") for i in ingress) or (
        ",".join(spec.get("externalIPs") or [])
        or ("<pending>" if spec.get("type") == "LoadBalancer" else "<none>")
    )
    ports = (
        ",".join(
            f"{p.get('port')}"
            + (f":{p['nodePort']}" if p.get("nodePort") else "")
            + f"/{p.get('protocol', 'TCP')}"
            for p in spec.get("ports") or []
        )
        or "<none>"
    )
    selector = ",".join(f"{k}={v}" for k, v in sorted((spec.get("selector") or {}).items()))
    return [
        svc["metadata"]["name"],
        spec.get("type", ""),
        spec.get("clusterIP") or "<none>",
        external,
        ports,
        age(svc["metadata"].get("creationTimestamp")),
        selector or "<none>",
    ]


def _simple(*extra: Callable[[Obj], Any]) -> Callable[[Obj], list[Any]]:
    def cells(obj: Obj) -> list[Any]:
        values = [f(obj) for f in extra]
        return [obj["metadata"]["name"], *values, age(obj["metadata"].get("creationTimestamp"))]

    return cells


def _endpoints(obj: Obj) -> str:
    pairs = [
        f"{a.get('ip')}:{p.get('port')}"
        for s in obj.get("subsets") or []
        for a in s.get("addresses") or []
        for p in s.get("ports") or []
    ]
    if not pairs:
        return "<none>"
    return ",".join(pairs[:3]) + (f" + {len(pairs) - 3} more..." if len(pairs) > 3 else "")


PRINTERS: dict[str, tuple[list[Column], Callable[[Obj], list[Any]]]] = {
    "pods": (
        [
            ("Name", "string", 0),
            ("Ready", "string", 0),
            ("Status", "string", 0),
            ("Restarts", "string", 0),
            ("Age", "string", 0),
            ("IP", "string", 1),
            ("Node", "string", 1),
            ("Nominated Node", "string", 1),
            ("Readiness Gates", "string", 1),
        ],
        pod_cells,
    ),
    "nodes": (
        [
            ("Name", "string", 0),
            ("Status", "string", 0),
            ("Roles", "string", 0),
            ("Age", "string", 0),
            ("Version", "string", 0),
            ("Internal-IP", "string", 1),
            ("External-IP", "string", 1),
            ("OS-Image", "string", 1),
            ("Kernel-Version", "string", 1),
            ("Container-Runtime", "string", 1),
        ],
        node_cells,
    ),
    "events": (
        [
            ("Last Seen", "string", 0),
            ("Type", "string", 0),
            ("Reason", "string", 0),
            ("Object", "string", 0),
            ("Subobject", "string", 1),
            ("Source", "string", 1),
            ("Message", "string", 0),
            ("First Seen", "string", 1),
            ("Count", "integer", 1),
            ("Name", "string", 1),
        ],
        event_cells,
    ),
    "namespaces": (
        [("Name", "string", 0), ("Status", "string", 0), ("Age", "string", 0)],
        _simple(lambda o: (o.get("status") or {}).get("phase", "")),
    ),
    "configmaps": (
        [("Name", "string", 0), ("Data", "integer", 0), ("Age", "string", 0)],
        _simple(lambda o: len(o.get("data") or {}) + len(o.get("binaryData") or {})),
    ),
    "secrets": (
        [
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Data", "integer", 0),
            ("Age", "string", 0),
        ],
        _simple(lambda o: o.get("type", ""), lambda o: len(o.get("data") or {})),
    ),
    "services": (
        [
            ("Name", "string", 0),
            ("Type", "string", 0),
            ("Cluster-IP", "string", 0),
            ("External-IP", "string", 0),
            ("Port(s)", "string", 0),
            ("Age", "string", 0),
            ("Selector", "string", 1),
        ],
        _service_cells,
    ),
    "serviceaccounts": (
        [("Name", "string", 0), ("Secrets", "integer", 0), ("Age", "string", 0)],
        _simple(lambda o: len(o.get("secrets") or [])),
    ),
    "endpoints": (
        [("Name", "string", 0), ("Endpoints", "string", 0), ("Age", "string", 0)],
        _simple(_endpoints),
    ),
    "leases": (
        [("Name", "string", 0), ("Holder", "string", 0), ("Age", "string", 0)],
        _simple(lambda o: (o.get("spec") or {}).get("holderIdentity", "")),
    ),
    "runtimeclasses": (
        [("Name", "string", 0), ("Handler", "string", 0), ("Age", "string", 0)],
        _simple(lambda o: o.get("handler", "")),
    ),
    **STORAGE_PRINTERS,
}


def to_table(
    resource: ResourceType,
    items: list[Obj],
    list_meta: Obj,
    include: str = "Metadata",
    version: str = "v1",
) -> Obj:
    """A ``meta.k8s.io`` Table of wire-form objects."""
    printer = PRINTERS.get(resource.plural)
    columns = printer[0] if printer else [("Name", "string", 0), ("Created At", "date", 0)]
    cells = printer[1] if printer else None
    definitions = [
        {
            "name": n,
            "type": t,
            "format": "name" if n == "Name" else "",
            "description": NAME_DOC if n == "Name" else n,
            "priority": p,
        }
        for n, t, p in columns
    ]
    rows = []
    for obj in items:
        printable = to_core_v1(obj) if resource.group == "events.k8s.io" else obj
        row: Obj = {
            "cells": cells(printable)
            if cells
            else [obj["metadata"]["name"], obj["metadata"].get("creationTimestamp")]
        }
        if resource.plural == "pods" and pod_conditions(obj):
            row["conditions"] = pod_conditions(obj)
        if include == "Object":
            row["object"] = obj
        elif include == "Metadata":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": f"meta.k8s.io/{version}",
                "metadata": obj.get("metadata", {}),
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": f"meta.k8s.io/{version}",
        "metadata": list_meta,
        "columnDefinitions": definitions,
        "rows": rows,
    }
