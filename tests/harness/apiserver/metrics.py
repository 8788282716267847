"""Request accounting: ``GET /metrics`` and an in-process log of every request.

``apiserver_request_total`` has the real server's labels and verb names (GET, LIST, WATCH,
POST, PUT, PATCH, DELETE, DELETECOLLECTION, CONNECT; the Kubernetes metric uses the HTTP
method for writes) and scope (resource, namespace, cluster). Each request is also kept as a
``RequestRecord`` with its user and user agent, so a benchmark can count the calls a node
agent makes::

    server.requests(user="system:node:n1", resource="pods", verb="PATCH")
    server.request_count(resource="leases", subresource="")
"""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

LABELS = (
    "verb",
    "dry_run",
    "group",
    "version",
    "resource",
    "subresource",
    "scope",
    "component",
    "code",
)


@dataclass(frozen=True)
class RequestRecord:
    when: float  # time.time()
    user: str
    user_agent: str
    verb: str  # the metric's verb: GET LIST WATCH POST PUT PATCH DELETE DELETECOLLECTION CONNECT
    method: str
    path: str
    group: str
    version: str
    resource: str
    subresource: str
    namespace: str
    name: str
    scope: str
    code: int


def metric_verb(method: str, verb: str, subresource: str, connect: bool) -> str:
    """``metrics.CleanVerb``: LIST and WATCH for collection reads, CONNECT for proxies."""
    if connect:
        return "CONNECT"
    if verb in ("list", "watch", "deletecollection"):
        return verb.upper()
    return method.upper()


def scope_of(resource_request: bool, verb: str, name: str, namespace: str) -> str:
    if not resource_request:
        return ""
    if name or verb == "create":
        return "resource"
    return "namespace" if namespace else "cluster"


class RequestLog:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        self._total = Counter(
            "apiserver_request_total",
            "Counter of apiserver requests broken out for each verb, dry run value, group, "
            "version, resource, scope, component, and HTTP response code.",
            LABELS,
            registry=self.registry,
        )
        self._duration = Histogram(
            "apiserver_request_duration_seconds",
            "Response latency distribution in seconds for each verb, dry run value, group, "
            "version, resource, subresource, scope and component.",
            ("verb", "group", "version", "resource", "subresource", "scope", "component"),
            registry=self.registry,
        )
        self._lock = threading.Lock()
        self._records: list[RequestRecord] = []

    def record(self, record: RequestRecord, dry_run: bool, seconds: float) -> None:
        with self._lock:
            self._records.append(record)
        self._total.labels(
            verb=record.verb,
            dry_run="All" if dry_run else "",
            group=record.group,
            version=record.version,
            resource=record.resource,
            subresource=record.subresource,
            scope=record.scope,
            component="apiserver",
            code=str(record.code),
        ).inc()
        if record.verb != "WATCH":
            self._duration.labels(
                verb=record.verb,
                group=record.group,
                version=record.version,
                resource=record.resource,
                subresource=record.subresource,
                scope=record.scope,
                component="apiserver",
            ).observe(seconds)

    def requests(
        self,
        user: str | None = None,
        resource: str | None = None,
        verb: str | None = None,
        subresource: str | None = None,
        user_agent: str | None = None,
        since: float | None = None,
        namespace: str | None = None,
    ) -> list[RequestRecord]:
        """Recorded requests matching every given filter (``since`` is a ``time.time()``)."""
        with self._lock:
            records = list(self._records)
        wanted = {
            "user": user,
            "resource": resource,
            "verb": verb,
            "subresource": subresource,
            "user_agent": user_agent,
            "namespace": namespace,
        }
        return [
            r
            for r in records
            if all(v is None or getattr(r, k) == v for k, v in wanted.items())
            and (since is None or r.when >= since)
        ]

    def reset(self) -> None:
        with self._lock:
            self._records.clear()

    def exposition(self) -> bytes:
        return generate_latest(self.registry)


def now() -> float:
    return time.time()
