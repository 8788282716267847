"""``spec.runtimeClassName`` and ``spec.overhead``, and the RuntimeClass objects
(``node.k8s.io/v1``) the name resolves through.

A pod names a class; the class names the runtime handler (``handler``: the runtime's
configured runtime, ``runc``, ``kata``...) that the kubelet passes as the CRI
``runtime_handler`` when it creates the pod's sandbox. The API server's RuntimeClass
admission copies the class's ``overhead.podFixed`` into the pod's ``spec.overhead``,
which is what the kubelet counts (it never reads the class's overhead itself).
``not_found`` is the kubelet's error for a class its RuntimeClass manager does not have.
"""

from __future__ import annotations

import re
from typing import Any

from pkletd.ipc.apimodel import fieldcheck as f
from pkletd.ipc.apimodel.fieldcheck import InvalidField
from pkletd.ipc.apimodel.resourcespec import Amounts, parse_amounts

GROUP_RESOURCE = "runtimeclass.node.k8s.io"
_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def parse_name(spec: dict[str, Any]) -> str:
    """``spec.runtimeClassName``: "" (none, the runtime's default handler) or a DNS
    subdomain, as the API validates it."""
    path = "spec.runtimeClassName"
    name = f.string(spec.get("runtimeClassName"), path)
    if name and (len(name) > 253 or not _SUBDOMAIN.match(name)):
        raise InvalidField(
            f"{path}: invalid value {name!r}: a lowercase RFC 1123 subdomain must consist of "
            "lower case alphanumeric characters, '-' or '.', and must start and end with an "
            "alphanumeric character"
        )
    return name


def parse_overhead(spec: dict[str, Any]) -> Amounts:
    """``spec.overhead``: what the pod's sandbox costs beyond its containers (checked as
    a container's limits are)."""
    return parse_amounts(spec.get("overhead"), "spec.overhead")


def handler_of(runtime_class: dict[str, Any]) -> str:
    """A RuntimeClass's ``handler`` ("" if it has none, which the API does not allow)."""
    handler = runtime_class.get("handler")
    return handler if isinstance(handler, str) else ""


def name_of(runtime_class: dict[str, Any]) -> str:
    meta = runtime_class.get("metadata")
    name = meta.get("name") if isinstance(meta, dict) else None
    return name if isinstance(name, str) else ""


def not_found(name: str) -> str:
    """The kubelet's error (the API's NotFound) for a class it does not know."""
    return f'{GROUP_RESOURCE} "{name}" not found'
