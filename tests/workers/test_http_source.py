"""Pods from staticPodURL on the real containerd: Pod, PodList, edits, errors, bad bodies."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from tests.harness.containerd import list_pod_sandboxes
from tests.harness.node import NODE, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

TOKEN = "s3cret-token"


class ManifestServer:
    """Serves ``body`` with ``status`` on 127.0.0.1, but only to requests with the token."""

    def __init__(self) -> None:
        self.status = 200
        self.body = b""
        self.headers: list[dict[str, str]] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                with server.lock:
                    server.headers.append({k.lower(): v for k, v in self.headers.items()})
                    status, body = server.status, server.body
                if self.headers.get("X-Pod-Token") != TOKEN:
                    status, body = 403, b"forbidden"
                self.send_response(status)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/node/pods.yaml"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def serve(self, body: bytes | dict[str, Any], status: int = 200) -> None:
        with self.lock:
            self.body = body if isinstance(body, bytes) else json.dumps(body).encode()
            self.status = status

    def requests(self) -> int:
        with self.lock:
            return len(self.headers)

    def wait_requests(self, more: int) -> None:
        """Wait until the source has fetched ``more`` times from now."""
        target = self.requests() + more
        wait_for(f"{more} more fetches", lambda: self.requests() >= target, timeout=30)

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[ManifestServer]:
    s = ManifestServer()
    try:
        yield s
    finally:
        s.close()


def pod_list(*pods: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "PodList", "items": list(pods)}


def use_url(pkletd: Pkletd, server: ManifestServer) -> None:
    pkletd.write_config(
        staticPodURL=server.url,
        staticPodURLHeader={"X-Pod-Token": [TOKEN]},
        httpCheckFrequency="1s",
    )


def container_id(pkletd: Pkletd, name: str) -> str:
    pod = pkletd.pod(name)
    assert pod is not None, f"pod {name} is gone"
    assert pod["phase"] == "Running" and pod["containers"][0]["state"] == "running"
    return str(pod["containers"][0]["container_id"])


def test_pods_from_a_url(pkletd: Pkletd, server: ManifestServer) -> None:
    web = pod_manifest("web")
    web_yaml = (
        "apiVersion: v1\nkind: Pod\nmetadata:\n  name: web\n  labels: {test: web}\n"
        + "spec:\n"
        + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in web["spec"].items())
    )
    server.serve(web_yaml.encode())
    use_url(pkletd, server)
    pkletd.put("local", pod_manifest("local"))
    pkletd.start()
    assert {"http-source", "file-source", "log-rotator"} <= set(pkletd.workers())

    # A single Pod, in YAML, fetched with the header.
    first = pkletd.wait_running("web")
    pkletd.wait_running("local")
    assert server.headers[0]["x-pod-token"] == TOKEN
    (sandbox,) = [
        s for s in list_pod_sandboxes(pkletd.endpoint) if s.metadata.name == f"web-{NODE}"
    ]
    assert sandbox.annotations["kubernetes.io/config.source"] == "http"
    assert sandbox.annotations["kubernetes.io/config.hash"] == first["uid"]
    web_id = container_id(pkletd, "web")

    # A PodList: the same web pod (same UID, left alone) and a new one.
    db = pod_manifest("db")
    server.serve(pod_list(web, db))
    db_first = pkletd.wait_running("db")
    assert pkletd.pod("web")["uid"] == first["uid"]  # type: ignore[index]
    assert container_id(pkletd, "web") == web_id

    # An edit replaces the edited pod only.
    db["spec"]["containers"][0]["command"] = ["sh", "-c", "trap 'exit 0' TERM; sleep 1d & wait"]
    server.serve(pod_list(web, db))
    wait_for(
        "edited db pod running",
        lambda: (
            (p := pkletd.pod("db")) is not None
            and p["uid"] != db_first["uid"]
            and p["phase"] == "Running"
        ),
    )
    db_id = container_id(pkletd, "db")

    # An error response keeps the last good set running.
    server.serve(b"oops", status=500)
    server.wait_requests(3)
    assert (container_id(pkletd, "web"), container_id(pkletd, "db")) == (web_id, db_id)
    wait_for(
        "fetch error logged",
        lambda: (
            f"manifest rejected source=http path={server.url} "
            f"reason={server.url}: 500 Internal Server Error" in pkletd.log()
        ),
    )

    # A bad body too; the other pods, from both sources, go on.
    server.serve(b"apiVersion: v1\nkind: Pod\nmetadata: [unclosed\n")
    wait_for(
        "bad body rejected",
        lambda: (
            "manifest rejected source=http" in pkletd.log()
            and "not valid YAML or JSON" in pkletd.log()
        ),
    )
    pkletd.put("local2", pod_manifest("local2"))
    pkletd.wait_running("local2")
    assert (container_id(pkletd, "web"), container_id(pkletd, "db")) == (web_id, db_id)

    # The URL answers well again: a pod left out of the list is removed.
    server.serve(pod_list(web))
    wait_for("db removed", lambda: pkletd.pod("db") is None, timeout=30)
    assert container_id(pkletd, "web") == web_id
    assert container_id(pkletd, "local")


def test_orphans_wait_for_the_url_to_answer(pkletd: Pkletd, server: ManifestServer) -> None:
    """The parent cleans up pods no source wants only after the file AND the URL reported."""
    server.serve(pod_list())
    use_url(pkletd, server)
    pkletd.put("leftover", pod_manifest("leftover"))
    pkletd.start()
    pkletd.wait_running("leftover")
    pkletd.stop()  # pods keep running
    pkletd.remove("leftover")
    server.serve(b"down", status=503)
    pkletd.start()

    server.wait_requests(5)  # the URL has not answered: the http source is not seen yet
    running = [
        s for s in list_pod_sandboxes(pkletd.endpoint) if s.metadata.name == f"leftover-{NODE}"
    ]
    assert running and running[0].state == 0  # SANDBOX_READY: not treated as an orphan

    server.serve(pod_list())  # the URL answers (no pods): now the leftover is an orphan
    wait_for(
        "orphan sandbox removed",
        lambda: (
            not [
                s
                for s in list_pod_sandboxes(pkletd.endpoint)
                if s.metadata.name == f"leftover-{NODE}"
            ]
        ),
        timeout=30,
    )
