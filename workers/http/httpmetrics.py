"""The kubelet's metrics of its own HTTP servers, for this worker's:
``kubelet_http_requests_total``, ``kubelet_http_requests_duration_seconds`` and
``kubelet_http_inflight_requests``, by ``method`` (``other`` for a method HTTP does not
define), ``path`` (the kubelet's bucket: the path's first segment, ``metrics/<x>`` under
``/metrics``, ``other`` where no route of the listener starts), ``server_type``
(``readonly``: the read-only port; ``readwrite``: the kubelet API) and ``long_running``
(``exec``, ``attach``, ``portForward``, ``debug``).

The middleware goes first on a listener, so what the authentication filter refuses is
counted too, as the kubelet counts it. The healthz listener is not counted (the
kubelet's is a server of its own, not instrumented).
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import prometheus_client
from aiohttp import web
from pkletd.ipc.bus.metricfamily import DEFAULT_BUCKETS
from pkletd.workers.http.options import Api
from prometheus_client import Counter, Gauge, Histogram
from prometheus_client.registry import CollectorRegistry

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
LABELS = ("method", "path", "server_type", "long_running")
METHODS = frozenset({"OPTIONS", "GET", "HEAD", "POST", "PUT", "DELETE", "TRACE", "CONNECT"})
LONG_RUNNING = frozenset({"exec", "attach", "portForward", "debug"})
OTHER = "other"
SERVER_TYPES = {Api.READ_ONLY: "readonly", Api.KUBELET: "readwrite"}


def root_path(path: str) -> str:
    """The kubelet's bucket of a path: ``/pods/`` is ``pods``, ``/metrics/cadvisor`` is
    ``metrics/cadvisor``, ``/containerLogs/ns/pod/c`` is ``containerLogs``."""
    parts = path.lstrip("/").split("/", 2)
    if parts[0] == "metrics" and len(parts) > 1 and parts[1]:
        return f"metrics/{parts[1]}"
    return parts[0]


class HttpMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        # the kubelet's metrics have no *_created series (the function has no annotations)
        prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
        self._requests = Counter(
            "kubelet_http_requests",
            "Number of the http requests received since the server started",
            LABELS,
            registry=registry,
        )
        self._durations = Histogram(
            "kubelet_http_requests_duration_seconds",
            "Duration in seconds to serve http requests",
            LABELS,
            registry=registry,
            buckets=DEFAULT_BUCKETS,
        )
        self._inflight = Gauge(
            "kubelet_http_inflight_requests",
            "Number of the inflight http requests",
            LABELS,
            registry=registry,
        )

    def middlewares(self, api: Api, paths: Iterable[str]) -> list[Any]:
        """What counts the requests of a listener serving the route ``paths`` (nothing
        on the healthz listener)."""
        server_type = SERVER_TYPES.get(api)
        return [self._middleware(server_type, paths)] if server_type else []

    def _middleware(self, server_type: str, paths: Iterable[str]) -> Any:
        buckets = frozenset(root_path(p) for p in paths)

        @web.middleware
        async def instrumented(request: web.Request, handler: Handler) -> web.StreamResponse:
            path = root_path(request.path)
            path = path if path in buckets else OTHER
            labels = (
                request.method if request.method in METHODS else OTHER,
                path,
                server_type,
                "true" if path in LONG_RUNNING else "false",
            )
            self._requests.labels(*labels).inc()
            inflight = self._inflight.labels(*labels)
            inflight.inc()
            started = time.monotonic()
            try:
                return await handler(request)
            finally:
                inflight.dec()
                self._durations.labels(*labels).observe(time.monotonic() - started)

        return instrumented
