"""``/metrics``: pkletd's own metrics, under the kubelet's names where it has them.

One registry of this worker's holds four sources: the parent's last ``MetricsReport``
(pods, PLEG, runtime operations, workers, the bus: ``reportcollector``), this worker's
HTTP servers (``httpmetrics``), the claims' volume stats as last measured
(``volumemetrics``) and this process (prometheus_client's ``process_*``). Rendering reads
no file but this process's own ``/proc`` entries, so it runs on the event loop.
"""

from __future__ import annotations

from aiohttp import web
from pkletd.workers.http.httpmetrics import HttpMetrics
from pkletd.workers.http.reportcollector import ReportCollector
from pkletd.workers.http.view import NodeView
from prometheus_client import ProcessCollector
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from prometheus_client.registry import Collector, CollectorRegistry


class KubeletMetrics:
    def __init__(self, view: NodeView, volumes: Collector | None = None) -> None:
        self._registry = CollectorRegistry()
        self._registry.register(ReportCollector(lambda: view.metrics_report))
        if volumes is not None:
            self._registry.register(volumes)
        ProcessCollector(registry=self._registry)
        self.http = HttpMetrics(self._registry)

    async def handle(self, request: web.Request) -> web.Response:
        body = generate_latest(self._registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_PLAIN_0_0_4})
