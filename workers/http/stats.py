"""``/stats/summary``, ``/metrics/resource`` and ``/metrics/cadvisor``: the node stats
(``pkletd.ipc.nodestats``) served over the http worker's routes.

Reading cgroups, ``/proc`` and the runtime blocks, so each request runs its read on a
thread of the event loop's executor; the handlers only pick the pods the worker holds
now and turn the result into a response. One ``SummaryProvider`` serves the summary
and the resource metrics, so both share its CPU samples (usageNanoCores needs two). The
CSI volumes' figures come measured already (``volumestats``).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pkletd.ipc.nodestats import cadvisor, resource
from pkletd.ipc.nodestats.cadvisor import CadvisorSource
from pkletd.ipc.nodestats.cgroupstats import CgroupReader
from pkletd.ipc.nodestats.summary import (
    CsiVolumeSource,
    NodePaths,
    StatsUnavailable,
    SummaryProvider,
)
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.workers.http.view import NodeView

log = logging.getLogger(__name__)


class NodeStats:
    def __init__(self, view: NodeView, summary: SummaryProvider, source: CadvisorSource) -> None:
        self._view = view
        self._summary = summary
        self._source = source

    @classmethod
    def of_node(
        cls, view: NodeView, paths: NodePaths, runtime: CriRuntime, csi: CsiVolumeSource
    ) -> NodeStats:
        cgroups = CgroupReader()
        summary = SummaryProvider(paths, cgroups, runtime, csi=csi)
        return cls(view, summary, CadvisorSource(cgroups, runtime))

    async def summary(self, request: web.Request) -> web.Response:
        only = request.query.get("only_cpu_and_memory") == "true"
        pods = list(self._view.pods.values())
        try:
            found = await _off_loop(lambda: self._summary.summary(pods, only))
        except StatsUnavailable as exc:
            return web.Response(status=500, text=f"Internal Error: {exc}\n")
        return web.Response(text=json.dumps(found), content_type="application/json")

    async def resource_metrics(self, request: web.Request) -> web.Response:
        pods = list(self._view.pods.values())
        text = await _off_loop(lambda: resource.resource_metrics(self._summary, pods))
        return web.Response(body=text.encode(), headers={"Content-Type": resource.CONTENT_TYPE})

    async def cadvisor_metrics(self, request: web.Request) -> web.Response:
        pods = list(self._view.pods.values())
        text = await _off_loop(lambda: cadvisor.cadvisor_metrics(self._source, pods))
        return web.Response(body=text.encode(), headers={"Content-Type": cadvisor.CONTENT_TYPE})


async def _off_loop(read: Callable[[], Any]) -> Any:
    return await asyncio.get_running_loop().run_in_executor(None, read)
