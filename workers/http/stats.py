"""``/stats/summary``, ``/metrics/resource`` and ``/metrics/cadvisor``: the node stats
(``pkletd.ipc.nodestats``) served over the http worker's routes, from the last
housekeeping pass (``statscache``).

A body already rendered is written at once; one not yet rendered for this pass is
rendered on a thread of the event loop's executor, as is the wait for the first pass.
The CSI volumes' figures come measured already (``volumestats``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import TypeVar

from aiohttp import web
from pkletd.ipc.nodestats import cadvisor, resource
from pkletd.ipc.nodestats.cgroupstats import CgroupReader
from pkletd.ipc.nodestats.housekeeping import Housekeeping
from pkletd.ipc.nodestats.summary import CsiVolumeSource, NodePaths
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.workers.http.statscache import Body, StatsCache
from pkletd.workers.http.view import NodeView

log = logging.getLogger(__name__)

T = TypeVar("T")
JSON = "application/json"
NOT_GATHERED = "the node's stats have not been gathered yet"


def stats_cache(
    view: NodeView, paths: NodePaths, runtime: CriRuntime, csi: CsiVolumeSource
) -> StatsCache:
    """The housekeeping of this node's stats (not started)."""
    housekeeping = Housekeeping(paths, CgroupReader(), runtime, csi)
    return StatsCache(housekeeping, lambda: list(view.pods.values()))


class NodeStats:
    def __init__(self, cache: StatsCache) -> None:
        self._cache = cache

    async def _body(self, kind: Body) -> tuple[bytes | None, str]:
        """The body of the last pass, and why there is none."""
        latest = self._cache.latest
        if latest is None:
            latest = await _off_loop(self._cache.first)
        if latest is None:
            return None, NOT_GATHERED
        self._cache.asked(kind)
        body = (
            latest.body(kind)
            if latest.rendered(kind)
            else await _off_loop(lambda: latest.body(kind))
        )
        return body, latest.gathered.error

    async def summary(self, request: web.Request) -> web.Response:
        only = request.query.get("only_cpu_and_memory") == "true"
        body, error = await self._body(Body.SUMMARY_CPU_AND_MEMORY if only else Body.SUMMARY)
        if body is None:
            return web.Response(status=500, text=f"Internal Error: {error}\n")
        return web.Response(body=body, content_type=JSON)

    async def resource_metrics(self, request: web.Request) -> web.Response:
        return await self._metrics(Body.RESOURCE, resource.CONTENT_TYPE)

    async def cadvisor_metrics(self, request: web.Request) -> web.Response:
        return await self._metrics(Body.CADVISOR, cadvisor.CONTENT_TYPE)

    async def _metrics(self, kind: Body, content_type: str) -> web.Response:
        body, error = await self._body(kind)
        if body is None:
            return web.Response(status=500, text=f"Internal Error: {error}\n")
        return web.Response(body=body, headers={"Content-Type": content_type})


async def _off_loop(call: Callable[[], T]) -> T:
    return await asyncio.get_running_loop().run_in_executor(None, call)
