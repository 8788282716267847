"""pkletd: http -- the kubelet's HTTP endpoints.

- healthz (``healthzBindAddress:healthzPort``, default 127.0.0.1:10248):
  ``/healthz`` answers ``ok`` while the parent's sync loop reports itself healthy,
  and 500 ``[-]syncloop failed`` when it does not or when the parent has gone
  silent.
- read-only port (``readOnlyPort``, off when 0): ``/healthz``; ``/pods``, a
  ``PodList`` of the pods on this node with their status, as the kubelet serves it;
  ``/metrics/probes``, the prober's counters in the Prometheus text format.

The pods come from the parent's snapshot and ``PodStatusUpdated`` broadcasts; the
HTTP servers run in threads and read a dict the lifecycle thread replaces whole.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from http import HTTPStatus
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from pkletd.ipc.bus import WorkerBus
from pkletd.ipc.messages import (
    Message,
    ParentAlive,
    PodForgotten,
    PodStatusUpdated,
    ProbeMetrics,
    Snapshot,
)
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

PARENT_SILENT_S = 10.0
PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"
FAMILIES = {
    "prober_probe_total": (
        "counter",
        "Cumulative number of a liveness, readiness or startup probe for a container by result.",
    ),
    "pkletd_prober_lateness_seconds": (
        "histogram",
        "How late each probe run started against its schedule.",
    ),
}


def metrics_text(samples: list[dict[str, Any]]) -> str:
    """Samples ``{"name", "labels", "value"}`` in the Prometheus text exposition format."""
    lines: list[str] = []
    for family, (kind, help_text) in FAMILIES.items():
        mine = [s for s in samples if s["name"] == family or s["name"].startswith(family + "_")]
        if not mine:
            continue
        lines += [f"# HELP {family} {help_text}", f"# TYPE {family} {kind}"]
        for sample in mine:
            labels = ",".join(f'{k}="{_escape(str(v))}"' for k, v in sample["labels"].items())
            lines.append(
                f"{sample['name']}{{{labels}}} {sample['value']}"
                if labels
                else f"{sample['name']} {sample['value']}"
            )
    return "\n".join(lines) + "\n"


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int
    paths: frozenset[str]


class NodeView:
    """What the HTTP handlers read: pods and the parent's health, thread-safe by replacement."""

    def __init__(self) -> None:
        self.pods: dict[str, dict[str, Any]] = {}
        self.probe_samples: list[dict[str, Any]] = []
        self.sync_loop_ok = True
        self.parent_seen = time.monotonic()

    def healthy(self) -> bool:
        return self.sync_loop_ok and time.monotonic() - self.parent_seen < PARENT_SILENT_S

    def pod_list(self) -> dict[str, Any]:
        items = sorted(
            self.pods.values(),
            key=lambda p: (p["metadata"]["namespace"], p["metadata"]["name"]),
        )
        return {"kind": "PodList", "apiVersion": "v1", "metadata": {}, "items": items}


def _handler(view: NodeView, paths: frozenset[str]) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        server_version = "pkletd"

        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            path = self.path.split("?", 1)[0]
            if path not in paths:
                self._send(HTTPStatus.NOT_FOUND, "text/plain", b"404 page not found\n")
            elif path == "/healthz":
                ok = view.healthy()
                body = (
                    b"ok" if ok else b"[-]syncloop failed: reason withheld\nhealthz check failed\n"
                )
                self._send(
                    HTTPStatus.OK if ok else HTTPStatus.INTERNAL_SERVER_ERROR, "text/plain", body
                )
            elif path == "/metrics/probes":
                body = metrics_text(view.probe_samples).encode()
                self._send(HTTPStatus.OK, PROMETHEUS_TEXT, body)
            else:
                body = json.dumps(view.pod_list()).encode()
                self._send(HTTPStatus.OK, "application/json", body)

        def _refuse(self) -> None:
            self._send(HTTPStatus.METHOD_NOT_ALLOWED, "text/plain", b"405 method not allowed\n")

        do_POST = do_PUT = do_DELETE = do_PATCH = _refuse  # noqa: N815

        def _send(self, status: HTTPStatus, content_type: str, body: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
            log.debug("request " + format, *args)

    return Handler


class HttpWorker:
    def __init__(self, listens: Sequence[Listen]) -> None:
        self.view = NodeView()
        self._servers = [
            ThreadingHTTPServer((x.host, x.port), _handler(self.view, x.paths)) for x in listens
        ]
        for server in self._servers:
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
            log.info("serving address=%s:%d", *server.server_address[:2])

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self.view.pods = {p["metadata"]["uid"]: p for p in snapshot.pods}
        self.view.probe_samples = snapshot.probe_metrics
        self.view.parent_seen = time.monotonic()

    def on_broadcast(self, message: Message) -> None:
        self.view.parent_seen = time.monotonic()
        if isinstance(message, PodStatusUpdated):
            pods = dict(self.view.pods)
            pods[message.pod["metadata"]["uid"]] = message.pod
            self.view.pods = pods
        elif isinstance(message, PodForgotten):
            self.view.pods = {k: v for k, v in self.view.pods.items() if k != message.uid}
        elif isinstance(message, ParentAlive):
            self.view.sync_loop_ok = message.sync_loop_ok
        elif isinstance(message, ProbeMetrics):
            self.view.probe_samples = message.samples

    def fds(self) -> Sequence[int]:
        return ()

    def on_readable(self, fd: int) -> None:
        raise AssertionError("http polls no fds in the lifecycle loop")

    def tick(self, now: float) -> float:
        return now + 3600.0

    def close(self) -> None:
        for server in self._servers:
            server.shutdown()
            server.server_close()


def main(settings: WorkerSettings, listens: Sequence[Listen]) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    return serve(settings, bus, HttpWorker(listens))
