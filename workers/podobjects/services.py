"""The Services the service environment variables are made from: one list+watch of
every Service (the kubelet's service informer; the node authorizer allows it), kept
per namespace in the little the variables need (name, cluster IP, and each port's
name, number and protocol), so the message stays small.

Services without a cluster IP (``None``: headless, or none yet) are left out: they
make no variables, and the kubelet's informer does not even list them
(``spec.clusterIP!=None``; filtered here instead, so an API server older than 1.30,
which refuses that selector, works too).

The parent hears ``ServicesListed`` for each namespace a pod of the node is in, and
``default``, once the first list came back and whenever that namespace's list changes.
Until the first list, nothing: a pod that needs the variables waits, as under the
kubelet.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from pkletd.ipc.apiclient.reflector import (
    Broken,
    ListCall,
    Listed,
    Obj,
    Reflector,
    Seen,
)
from pkletd.ipc.bus.messages import ServicesListed
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.podobjects.parts import IDLE_S
from pkletd.workers.podobjects.reading import api_message

log = logging.getLogger(__name__)

SERVICES = "services"

Summary = dict[str, Any]
ReportServices = Callable[[str, ServicesListed], None]


def summary(service: Obj) -> Summary | None:
    """What the variables need of a Service; None if it has no cluster IP."""
    spec = service.get("spec") or {}
    cluster_ip = str(spec.get("clusterIP") or "")
    if cluster_ip in ("", "None"):
        return None
    ports = [
        {
            "name": str(port.get("name") or ""),
            "port": int(port.get("port") or 0),
            "protocol": str(port.get("protocol") or "TCP"),
        }
        for port in spec.get("ports") or ()
    ]
    name = str((service.get("metadata") or {}).get("name") or "")
    return {"name": name, "clusterIP": cluster_ip, "ports": ports}


def _where(service: Obj) -> tuple[str, str]:
    meta = service.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class Services:
    def __init__(self, lister: ListCall, report: ReportServices) -> None:
        self._report = report
        self._inbox: Inbox[Seen] = Inbox()
        self._reflector = Reflector(SERVICES, lister, self._inbox)
        self._by_namespace: dict[str, dict[str, Summary]] = {}
        self._listed = False
        self._wanted: set[str] = set()
        self._problem = ""
        self._reflector.start()

    def want(self, namespaces: set[str]) -> set[str]:
        """Report on these namespaces; the ones no longer wanted (dropped)."""
        dropped = self._wanted - namespaces
        self._wanted = set(namespaces)
        self._report_all()
        return dropped

    def fileno(self) -> int:
        return self._inbox.fileno()

    def on_readable(self) -> None:
        for seen in self._inbox.take():
            self._apply(seen)
        self._report_all()

    def tick(self, now: float) -> float:
        return now + IDLE_S

    def close(self) -> None:
        self._reflector.stop()
        self._inbox.close()

    def _apply(self, seen: Seen) -> None:
        if isinstance(seen, Broken):
            if not self._problem:
                log.warning("service watch failed error=%s", api_message(seen.error))
            self._problem = api_message(seen.error)
            return
        if self._problem:
            log.info("service watch resumed after error=%s", self._problem)
            self._problem = ""
        if isinstance(seen, Listed):
            self._listed = True
            self._by_namespace = {}
            for service in seen.items:
                self._put(service)
        elif seen.type == "DELETED":
            namespace, name = _where(seen.obj)
            self._by_namespace.get(namespace, {}).pop(name, None)
        else:
            self._put(seen.obj)

    def _put(self, service: Obj) -> None:
        namespace, name = _where(service)
        found = summary(service)
        services = self._by_namespace.setdefault(namespace, {})
        if found is None:
            services.pop(name, None)
        else:
            services[name] = found

    def _report_all(self) -> None:
        if not self._listed:
            return
        for namespace in sorted(self._wanted):
            services = self._by_namespace.get(namespace, {})
            listed = [services[name] for name in sorted(services)]
            self._report(namespace, ServicesListed(namespace, listed))
