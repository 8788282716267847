"""Which paths each API serves: one table per listener kind, and the application built
from one. A new endpoint (``/stats/summary``, ``/metrics/resource``, ``/exec/...``) is a
handler plus a ``Route`` in the tables it belongs to; the kubelet API's filter
(authentication, authorization) covers every route of ``kubelet_routes`` by itself.

Unknown paths answer 404 ``404 page not found``, known paths with another method 405,
as Go's mux does; on the kubelet API only after the filter let the request through.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from pkletd.workers.http.containerlogs import ContainerLogs
from pkletd.workers.http.endpoints import Endpoints
from pkletd.workers.http.kubeletmetrics import KubeletMetrics
from pkletd.workers.http.nodelogs import NodeLogs
from pkletd.workers.http.options import Api
from pkletd.workers.http.stats import NodeStats
from pkletd.workers.http.streaming import Streaming

log = logging.getLogger(__name__)

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
MAX_BODY = 1 << 20  # bytes of request body any handler may read


@dataclass(frozen=True, slots=True)
class Route:
    path: str  # aiohttp's pattern syntax: "/containerLogs/{namespace}/{pod}/{container}"
    handler: Handler
    methods: tuple[str, ...] = ("GET",)


@dataclass(frozen=True, slots=True)
class Handlers:
    """Everything the tables are made of."""

    metrics: KubeletMetrics
    endpoints: Endpoints
    container_logs: ContainerLogs
    node_logs: NodeLogs
    stats: NodeStats
    streaming: Streaming


def healthz_routes(h: Handlers) -> list[Route]:
    return [
        Route("/healthz", h.endpoints.healthz),
        Route("/healthz/{check}", h.endpoints.healthz_check),
    ]


def read_only_routes(h: Handlers) -> list[Route]:
    """The kubelet's InstallDefaultHandlers: no authentication needed, so only these."""
    return [
        *healthz_routes(h),
        Route("/pods", h.endpoints.pods),
        Route("/metrics", h.metrics.handle),
        Route("/metrics/probes", h.endpoints.probe_metrics),
        Route("/stats/summary", h.stats.summary, ("GET", "POST")),
        Route("/metrics/resource", h.stats.resource_metrics),
        Route("/metrics/cadvisor", h.stats.cadvisor_metrics),
    ]


def streaming_routes(h: Handlers) -> list[Route]:
    """``/exec``, ``/attach`` and ``/portForward`` (GET or POST, with or without the pod's
    UID), ``/run`` (POST): the kubelet's streaming endpoints."""
    both = ("GET", "POST")
    pod = "{namespace}/{pod}"
    routes = [
        Route(f"/portForward/{pod}", h.streaming.port_forward, both),
        Route(f"/portForward/{pod}/{{uid}}", h.streaming.port_forward, both),
    ]
    kinds = (
        ("exec", h.streaming.exec, both),
        ("attach", h.streaming.attach, both),
        ("run", h.streaming.run, ("POST",)),
    )
    for kind, handler, methods in kinds:
        routes.append(Route(f"/{kind}/{pod}/{{container}}", handler, methods))
        routes.append(Route(f"/{kind}/{pod}/{{uid}}/{{container}}", handler, methods))
    return routes


def kubelet_routes(h: Handlers) -> list[Route]:
    """The default handlers, plus what the kubelet's enableDebuggingHandlers adds: the
    streaming ones among them."""
    return [
        *read_only_routes(h),
        Route("/pods/", h.endpoints.pods),
        Route("/runningpods/", h.endpoints.running_pods),
        Route("/configz", h.endpoints.configz),
        Route("/spec/", h.endpoints.spec),
        Route("/containerLogs/{namespace}/{pod}/{container}", h.container_logs.handle),
        Route("/logs/", h.node_logs.handle),
        Route("/logs/{path:.*}", h.node_logs.handle),
        *streaming_routes(h),
    ]


TABLES: dict[Api, Callable[[Handlers], list[Route]]] = {
    Api.HEALTHZ: healthz_routes,
    Api.READ_ONLY: read_only_routes,
    Api.KUBELET: kubelet_routes,
}


@web.middleware
async def plain_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Go's texts for 404 and 405; a handler's bug is a 500 and one log line."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        return web.Response(status=404, text="404 page not found\n", content_type="text/plain")
    except web.HTTPMethodNotAllowed as exc:
        return web.Response(
            status=405,
            text="405 method not allowed\n",
            content_type="text/plain",
            headers={"Allow": ", ".join(sorted(exc.allowed_methods))},
        )
    except web.HTTPException:
        raise
    except Exception:
        log.exception("handler failed path=%s", request.path)
        return web.Response(status=500, text="Internal Server Error\n", content_type="text/plain")


def application(routes: Sequence[Route], middlewares: Sequence[Any] = ()) -> web.Application:
    app = web.Application(middlewares=[plain_errors, *middlewares], client_max_size=MAX_BODY)
    for route in routes:
        for method in route.methods:
            if method == "GET":
                app.router.add_get(route.path, route.handler)
            else:
                app.router.add_route(method, route.path, route.handler)
    return app
