"""The kubelet's small endpoints: healthz and its checks, ``/pods``, ``/runningpods/``,
``/configz``, ``/spec/`` and ``/metrics/probes``.

healthz answers as k8s.io/apiserver's healthz handler: ``ok``; with ``?verbose`` every
check (``[+]ping ok``...) and ``healthz check passed``; on a failure 500 with every check
and ``healthz check failed`` (the reason withheld); ``/healthz/<check>`` runs one check
(500 ``internal server error: <reason>``). The checks are ping, log and syncloop (the
supervisor's sync loop is healthy and the supervisor has been heard from lately).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from aiohttp import web
from pkletd.workers.http import machine
from pkletd.workers.http.probemetrics import PROMETHEUS_TEXT, metrics_text
from pkletd.workers.http.view import NodeView, pod_list

CHECKS = ("ping", "log", "syncloop")


def _json(doc: Any) -> web.Response:
    return web.Response(body=json.dumps(doc).encode(), content_type="application/json")


def _text(text: str, status: int = 200) -> web.Response:
    return web.Response(status=status, text=text, content_type="text/plain")


class Endpoints:
    def __init__(
        self,
        view: NodeView,
        configz: dict[str, Any],
        machine_info: Callable[[], dict[str, Any]] = machine.machine_info,
    ) -> None:
        self._view = view
        self._configz = configz
        self._machine_info = machine_info

    def _failure(self, check: str) -> str | None:
        if check == "syncloop" and not self._view.healthy():
            return self._view.unhealthy_reason()
        return None

    async def healthz(self, request: web.Request) -> web.Response:
        failed = any(self._failure(check) for check in CHECKS)
        if not failed and "verbose" not in request.query:
            return _text("ok")
        lines = [
            f"[-]{check} failed: reason withheld" if self._failure(check) else f"[+]{check} ok"
            for check in CHECKS
        ]
        lines.append("healthz check failed" if failed else "healthz check passed")
        return _text("\n".join(lines) + "\n", 500 if failed else 200)

    async def healthz_check(self, request: web.Request) -> web.Response:
        check = request.match_info["check"]
        if check not in CHECKS:
            return _text("404 page not found\n", 404)
        reason = self._failure(check)
        return _text(f"internal server error: {reason}\n", 500) if reason else _text("ok")

    async def pods(self, request: web.Request) -> web.Response:
        return _json(self._view.pod_list())

    async def running_pods(self, request: web.Request) -> web.Response:
        return _json(pod_list(self._view.running_pods()))

    async def configz(self, request: web.Request) -> web.Response:
        return _json({"kubeletconfig": self._configz})

    async def spec(self, request: web.Request) -> web.Response:
        return _json(self._machine_info())

    async def probe_metrics(self, request: web.Request) -> web.Response:
        body = metrics_text(self._view.probe_samples).encode()
        return web.Response(body=body, headers={"Content-Type": PROMETHEUS_TEXT})
