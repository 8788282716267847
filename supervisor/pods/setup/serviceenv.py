"""Service environment variables: the kubelet's ``getServiceEnvVarMap`` and
``envvars.FromServices``.

Which Services a pod sees: ``default/kubernetes`` always (the master service, even
with ``enableServiceLinks: false``), and with ``enableServiceLinks`` (true unless set
false) every Service of the pod's own namespace, one of which named ``kubernetes``
replaces the master's. A Service without a cluster IP (``None``: headless, or empty)
gives nothing.

For each, by name (``my-svc`` -> ``MY_SVC``, a leading digit gets ``_``):
``<SVC>_SERVICE_HOST``, ``<SVC>_SERVICE_PORT`` (the first port),
``<SVC>_SERVICE_PORT_<NAME>`` per named port, and Docker's link variables:
``<SVC>_PORT`` (the first port's URL), and per port ``<SVC>_PORT_<port>_<PROTO>`` with
``_PROTO``, ``_PORT`` and ``_ADDR``. Services are taken in name order (the kubelet's
map order is random; two names that make the same variable are a clash either way).

Services travel as ``ServicesListed`` has them: ``{"name", "clusterIP", "ports":
[{"name", "port", "protocol"}]}``.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

DEFAULT_NAMESPACE = "default"  # where the master service lives
MASTER_SERVICES = ("kubernetes",)

Service = Mapping[str, Any]


def visible(default: Iterable[Service], own: Iterable[Service], links: bool) -> list[Service]:
    """The Services a pod gets variables for, in name order: ``default`` and ``own`` are
    the Services of the ``default`` namespace and of the pod's (the same list for a pod
    of ``default``)."""
    chosen: dict[str, Service] = {}
    for service in default:
        if service.get("name") in MASTER_SERVICES and _has_ip(service):
            chosen[service["name"]] = service
    for service in own if links else ():
        if _has_ip(service):
            chosen[service["name"]] = service  # a pod namespace's "kubernetes" wins
    return [chosen[name] for name in sorted(chosen)]


def _has_ip(service: Service) -> bool:
    """``IsServiceIPSet``: a cluster IP that is neither empty nor ``None``."""
    return service.get("clusterIP", "") not in ("", "None")


def variable_name(name: str) -> str:
    """``makeEnvVariableName``: upper case, ``.`` and ``-`` as ``_``, no leading digit."""
    made = name.replace(".", "_").replace("-", "_").upper()
    return "_" + made if made[:1].isdigit() else made


def from_services(services: Sequence[Service]) -> list[tuple[str, str]]:
    """``FromServices``: each Service's variables, in the kubelet's order."""
    found: list[tuple[str, str]] = []
    for service in services:
        ports = service.get("ports") or []
        if not _has_ip(service) or not ports:
            continue
        prefix = variable_name(service["name"])
        found.append((f"{prefix}_SERVICE_HOST", service["clusterIP"]))
        found.append((f"{prefix}_SERVICE_PORT", str(ports[0]["port"])))
        found += [
            (f"{prefix}_SERVICE_PORT_{variable_name(port['name'])}", str(port["port"]))
            for port in ports
            if port.get("name")
        ]
        found += _link_variables(prefix, service["clusterIP"], ports)
    return found


def _link_variables(
    prefix: str, ip: str, ports: Sequence[Mapping[str, Any]]
) -> list[tuple[str, str]]:
    """Docker's link variables (``makeLinkVariables``)."""
    found = []
    host = f"[{ip}]" if ":" in ip else ip  # net.JoinHostPort
    for i, port in enumerate(ports):
        protocol = port.get("protocol") or "TCP"
        url = f"{protocol.lower()}://{host}:{port['port']}"
        if i == 0:
            found.append((f"{prefix}_PORT", url))
        each = f"{prefix}_PORT_{port['port']}_{protocol.upper()}"
        found += [
            (each, url),
            (f"{each}_PROTO", protocol.lower()),
            (f"{each}_PORT", str(port["port"])),
            (f"{each}_ADDR", ip),
        ]
    return found
