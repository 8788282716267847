"""The downward API: a pod's own fields and its containers' resources, as strings.

``field_value`` is the kubelet's ``podFieldSelectorRuntimeValue`` and
``fieldpath.ExtractFieldPathAsString``: whole label and annotation maps are
``key="value"`` lines sorted by key, values quoted as Go's ``%q`` does.
``resource_value`` is ``ExtractContainerResourceValue`` after
``defaultPodLimitsForDownwardAPI``: a missing (or zero) cpu, memory or
ephemeral-storage limit is the node's allocatable; a missing request is the
limit the manifest sets (the API's defaulting), else zero; the value divided by
the divisor is rounded up.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from fractions import Fraction
from typing import Any

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.apimodel.envspec import ResourceRef, split_subscript
from pkletd.ipc.apimodel.podspec import Pod
from pkletd.supervisor.pods.nodeinfo import NodeInfo

_GO_ESCAPES = {
    "\a": r"\a",
    "\b": r"\b",
    "\f": r"\f",
    "\n": r"\n",
    "\r": r"\r",
    "\t": r"\t",
    "\v": r"\v",
    "\\": "\\\\",
    '"': '\\"',
}


def go_quote(text: str) -> str:
    """Go's ``strconv.Quote``: printable characters as they are, the rest escaped."""
    out = ['"']
    for ch in text:
        if ch in _GO_ESCAPES:
            out.append(_GO_ESCAPES[ch])
        elif ch.isprintable():
            out.append(ch)
        elif ord(ch) < 0x80:
            out.append(f"\\x{ord(ch):02x}")
        elif ord(ch) <= 0xFFFF:
            out.append(f"\\u{ord(ch):04x}")
        else:
            out.append(f"\\U{ord(ch):08x}")
    out.append('"')
    return "".join(out)


def format_map(values: dict[str, str]) -> str:
    return "\n".join(f"{key}={go_quote(values[key])}" for key in sorted(values))


def field_value(
    pod: Pod, path: str, pod_ips: Sequence[str] = (), host_ips: Sequence[str] = ()
) -> str:
    """The value of a validated ``fieldRef.fieldPath``."""
    spec = pod.raw.get("spec") or {}
    subscripted = split_subscript(path)
    if subscripted is not None:
        head, key = subscripted
        return (pod.labels if head == "metadata.labels" else pod.annotations).get(key, "")
    simple: dict[str, Any] = {
        "metadata.name": pod.name,
        "metadata.namespace": pod.namespace,
        "metadata.uid": pod.uid,
        "spec.nodeName": spec.get("nodeName") or "",
        # v1 -> internal conversion: the deprecated serviceAccount fills an empty name
        "spec.serviceAccountName": spec.get("serviceAccountName") or spec.get("serviceAccount"),
        "status.hostIP": host_ips[0] if host_ips else "",
        "status.hostIPs": ",".join(host_ips),
        "status.podIP": pod_ips[0] if pod_ips else "",
        "status.podIPs": ",".join(pod_ips),
    }
    if path in simple:
        return str(simple[path] or "")
    if path == "metadata.labels":
        return format_map(pod.labels)
    if path == "metadata.annotations":
        return format_map(pod.annotations)
    raise LookupError(f"unsupported fieldPath: {path}")


def raw_container(pod: Pod, name: str) -> dict[str, Any] | None:
    spec = pod.raw.get("spec") or {}
    for group in ("containers", "initContainers", "ephemeralContainers"):
        for container in spec.get(group) or []:
            if isinstance(container, dict) and container.get("name") == name:
                return container
    return None


def _amounts(container: dict[str, Any], kind: str) -> dict[str, Fraction]:
    resources = container.get("resources") or {}
    found = {}
    for name, value in (resources.get(kind) or {}).items():
        try:
            found[name] = quantity.parse(value)
        except quantity.BadQuantity:
            continue
    return found


def resource_amount(container: dict[str, Any], resource: str, node: NodeInfo) -> Fraction:
    """``limits.memory`` etc. for one container, with the kubelet's defaults."""
    kind, _, name = resource.partition(".")
    limits = _amounts(container, "limits")
    allocatable = {
        "cpu": node.cpu,
        "memory": node.memory,
        "ephemeral-storage": node.ephemeral_storage,
    }
    if kind == "limits":
        limit = limits.get(name, Fraction(0))
        return allocatable[name] if not limit and name in allocatable else limit
    requests = _amounts(container, "requests")
    return requests.get(name, limits.get(name, Fraction(0)))


def resource_value(pod: Pod, own: str, ref: ResourceRef, node: NodeInfo) -> str:
    """A ``resourceFieldRef``'s value; ``own`` is the container an env var belongs to."""
    name = ref.container_name or own
    container = raw_container(pod, name)
    if container is None:
        raise LookupError(f"container {name} not found")
    amount = resource_amount(container, ref.resource, node)
    if ref.resource.endswith(".cpu"):
        return str(math.ceil(Fraction(quantity.milli(amount), quantity.milli(ref.divisor))))
    return str(math.ceil(Fraction(quantity.ceil_int(amount), quantity.ceil_int(ref.divisor))))
