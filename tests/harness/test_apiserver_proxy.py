"""The test API server's proxying to a node's kubelet (logs, ``logs -f``, exec over
WebSocket, ``nodes/<n>/proxy``), with a tiny HTTPS fake kubelet standing in as the test's
peer; plus request accounting (``/metrics``, ``server.requests``) and a clean stop."""

from __future__ import annotations

import base64
import hashlib
import json
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
from kubernetes.stream import stream

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.certs import Pki
from tests.harness.apiserver.client import Kube, eventually, expect_failure

WS_GUID = "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"


class FakeKubeletHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: FakeKubelet

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self.server.seen.append((self.command, self.path, self._peer()))
        if self.headers.get("Upgrade", "").lower() == "websocket":
            self._websocket()
        elif self.path.startswith("/containerLogs/"):
            self._logs()
        else:
            self._reply(200, f"{self.command} {self.path}\n".encode())

    do_POST = do_GET

    def _peer(self) -> str:
        cert = self.connection.getpeercert() if isinstance(self.connection, ssl.SSLSocket) else {}
        subject = dict(x[0] for x in (cert or {}).get("subject", ()))
        return str(subject.get("commonName", ""))

    def _reply(self, code: int, body: bytes) -> None:
        self.send_response(code)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()

    def _logs(self) -> None:
        if "/missing/" in self.path:
            self._reply(404, b'container "missing" in pod "web" is not available')
            return
        self.send_response(200)
        self.send_header("Content-Type", "text/plain")
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self._chunk(f"log {self.path}\n".encode())
        if "follow=true" in self.path:
            self.server.follow_release.wait(10)
            self._chunk(b"more\n")
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def _websocket(self) -> None:
        offered = [p.strip() for p in self.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        protocol = next(p for p in ("v5.channel.k8s.io", "v4.channel.k8s.io") if p in offered)
        accept = base64.b64encode(
            hashlib.sha1((self.headers["Sec-WebSocket-Key"] + WS_GUID).encode()).digest()
        ).decode()
        self.send_response(101)
        self.send_header("Upgrade", "websocket")
        self.send_header("Connection", "Upgrade")
        self.send_header("Sec-WebSocket-Accept", accept)
        self.send_header("Sec-WebSocket-Protocol", protocol)
        self.end_headers()
        self.wfile.flush()
        self._send_frame(2, b"\x01" + f"exec {self.path}\n".encode())
        if "input=1" in self.path:
            self._echo_stdin()
        self._send_frame(2, b"\x03" + json.dumps({"metadata": {}, "status": "Success"}).encode())
        self._send_frame(8, b"\x03\xe8")
        self.close_connection = True

    def _echo_stdin(self) -> None:
        while (frame := self._read_frame()) is not None:
            opcode, payload = frame
            if opcode == 8 or payload[:1] == b"\xff":
                return
            if payload[:1] == b"\x00" and len(payload) > 1:
                self._send_frame(2, b"\x01" + payload[1:])

    def _send_frame(self, opcode: int, payload: bytes) -> None:
        size = len(payload)
        head = bytes([0x80 | opcode])
        head += bytes([size]) if size < 126 else bytes([126]) + struct.pack(">H", size)
        self.wfile.write(head + payload)
        self.wfile.flush()

    def _read_frame(self) -> tuple[int, bytes] | None:
        head = self.rfile.read(2)
        if len(head) < 2:
            return None
        size = head[1] & 0x7F
        if size == 126:
            size = struct.unpack(">H", self.rfile.read(2))[0]
        elif size == 127:
            size = struct.unpack(">Q", self.rfile.read(8))[0]
        mask = self.rfile.read(4) if head[1] & 0x80 else b"\x00" * 4
        data = self.rfile.read(size)
        return head[0] & 0x0F, bytes(b ^ mask[i % 4] for i, b in enumerate(data))


class FakeKubelet(ThreadingHTTPServer):
    """An HTTPS 'kubelet' on 127.0.0.1 that echoes what it is asked."""

    daemon_threads = False  # server_close() joins the request threads

    def __init__(self, cert: tuple[Path, Path], ca: Path) -> None:
        super().__init__(("127.0.0.1", 0), FakeKubeletHandler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*(str(p) for p in cert))
        context.load_verify_locations(str(ca))
        context.verify_mode = ssl.CERT_OPTIONAL
        self.socket = context.wrap_socket(self.socket, server_side=True)
        self.seen: list[tuple[str, str, str]] = []
        self.follow_release = threading.Event()
        self._requests: list[socket.socket] = []
        self._thread = threading.Thread(
            target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def process_request(self, request: Any, client_address: Any) -> None:
        self._requests.append(request)
        super().process_request(request, client_address)

    def close(self) -> None:
        self.follow_release.set()
        self.shutdown()
        for request in self._requests:
            try:
                request.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            request.close()
        self.server_close()
        self._thread.join(5)


@pytest.fixture
def kubelet(apiserver: ApiServer, tmp_path: Path) -> Iterator[FakeKubelet]:
    cert = apiserver.pki.serving_cert_for("fake-kubelet", tmp_path)
    fake = FakeKubelet(cert, apiserver.ca_path)
    yield fake
    fake.close()


def register(kube: Kube, port: int, node: str = "n1") -> None:
    kube.core.create_node(
        {
            "metadata": {"name": node},
            "status": {
                "addresses": [
                    {"type": "Hostname", "address": "no-such-host.invalid"},
                    {"type": "InternalIP", "address": "127.0.0.1"},
                ],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            },
        }
    )
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"nodeName": node, "containers": [{"name": "web", "image": "nginx"}]},
        },
    )


def test_logs_go_through_the_kubelet(kube: Kube, kubelet: FakeKubelet) -> None:
    register(kube, kubelet.port)
    out = kube.kubectl("logs", "web", "--tail=5", "--timestamps").stdout
    assert out == "log /containerLogs/default/web/web?timestamps=true&tailLines=5\n"
    assert kubelet.seen[-1][2] == "kube-apiserver-kubelet-client"
    text = kube.core.read_namespaced_pod_log("web", "default", container="web", previous=True)
    assert text == "log /containerLogs/default/web/web?previous=true\n"
    body = expect_failure(kube.core.read_namespaced_pod_log, "web", "default", container="nope")
    assert (body["code"], body["message"]) == (400, "container nope is not valid for pod web")


def test_logs_follow_streams(kube: Kube, kubelet: FakeKubelet) -> None:
    register(kube, kubelet.port)
    process = subprocess.Popen(
        kube.kubectl_command("logs", "-f", "web"),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert process.stdout is not None
        first = process.stdout.readline()
        assert first == "log /containerLogs/default/web/web?follow=true\n"
        kubelet.follow_release.set()
        assert process.stdout.readline() == "more\n"
        assert process.wait(10) == 0
    finally:
        process.kill()
        process.communicate()


def test_exec_over_websocket(kube: Kube, kubelet: FakeKubelet) -> None:
    register(kube, kubelet.port)
    session = stream(
        kube.core.connect_get_namespaced_pod_exec,
        "web",
        "default",
        command=["cat"],
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    try:
        received: list[str] = []

        def output() -> str:
            session.update(timeout=0.2)
            if session.peek_stdout():
                received.append(session.read_stdout())
            return "".join(received)

        eventually(lambda: "exec /exec/default/web/web?" in output(), what="the exec echo")
        assert "command=cat" in output() and "input=1" in output()
        session.write_stdin("ping\n")
        eventually(lambda: output().endswith("ping\n"), what="stdin echoed back")
    finally:
        session.close()
    result = kube.kubectl("exec", "web", "--", "echo", "hi")
    assert result.stdout.startswith("exec /exec/default/web/web?")
    assert "command=echo&command=hi" in result.stdout


def test_node_proxy_and_proxy_errors(kube: Kube, kubelet: FakeKubelet) -> None:
    register(kube, kubelet.port)
    out = kube.kubectl("get", "--raw", "/api/v1/nodes/n1/proxy/healthz?verbose=1").stdout
    assert out == "GET /healthz?verbose=1\n"
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "pending"},
            "spec": {"containers": [{"name": "app", "image": "nginx"}]},
        },
    )
    assert kube.core.read_namespaced_pod_log("pending", "default") == ""
    code, body, _ = kube.raw(
        "POST", "/api/v1/namespaces/default/pods/pending/exec?command=ls&stdout=true"
    )
    assert (code, body["message"]) == (400, "Upgrade request required")
    result = kube.kubectl("exec", "pending", "--", "ls", check=False)
    assert result.returncode == 1
    assert "pod pending does not have a host assigned" in result.stderr
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    kube.core.create_node(
        {
            "metadata": {"name": "n2"},
            "status": {
                "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                "daemonEndpoints": {"kubeletEndpoint": {"Port": dead_port}},
            },
        }
    )
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "lost"},
            "spec": {"nodeName": "n2", "containers": [{"name": "app", "image": "nginx"}]},
        },
    )
    body = expect_failure(kube.core.read_namespaced_pod_log, "lost", "default")
    assert body["code"] == 500 and body["message"] == (
        f'Get "https://127.0.0.1:{dead_port}/containerLogs/default/lost/app": dial tcp '
        f"127.0.0.1:{dead_port}: connect: connection refused"
    )


def test_kubelet_serving_cert_verification(
    apiserver: ApiServer, kube: Kube, kubelet: FakeKubelet, tmp_path: Path
) -> None:
    register(kube, kubelet.port)
    apiserver.trust_kubelet_ca(apiserver.ca_path)
    assert kube.kubectl("logs", "web").stdout.startswith("log /containerLogs/default/web/web")
    stranger = Pki(tmp_path / "other-ca")
    other = FakeKubelet(stranger.serving_cert_for("stranger", tmp_path), apiserver.ca_path)
    try:
        kube.core.create_node(
            {
                "metadata": {"name": "n2"},
                "status": {
                    "addresses": [{"type": "InternalIP", "address": "127.0.0.1"}],
                    "daemonEndpoints": {"kubeletEndpoint": {"Port": other.port}},
                },
            }
        )
        kube.core.create_namespaced_pod(
            "default",
            {
                "metadata": {"name": "odd"},
                "spec": {"nodeName": "n2", "containers": [{"name": "app", "image": "nginx"}]},
            },
        )
        body = expect_failure(kube.core.read_namespaced_pod_log, "odd", "default")
        assert body["code"] == 500 and body["message"].endswith(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        )
        text = kube.core.read_namespaced_pod_log(
            "odd", "default", insecure_skip_tls_verify_backend=True
        )
        assert text == "log /containerLogs/default/odd/app\n"
    finally:
        other.close()


def test_request_accounting(apiserver: ApiServer, kube: Kube) -> None:
    started = time.time()
    kubelet = kube.as_user("system:node:n1", ["system:nodes"])
    kubelet.core.create_node({"metadata": {"name": "n1"}})
    for _ in range(3):
        kubelet.core.patch_node_status("n1", {"status": {"phase": "Running"}})
    kubelet.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    mine = apiserver.requests(user="system:node:n1", since=started)
    assert [(r.verb, r.resource, r.subresource, r.code) for r in mine] == [
        ("POST", "nodes", "", 201),
        *[("PATCH", "nodes", "status", 200)] * 3,
        ("LIST", "pods", "", 200),
    ]
    assert all(r.user_agent.startswith("OpenAPI-Generator") for r in mine)
    assert apiserver.request_count(user="system:node:n1", resource="nodes", verb="PATCH") == 3
    code, text, _ = kube.raw("GET", "/metrics", accept="text/plain")
    assert code == 200
    wanted = (
        'apiserver_request_total{code="200",component="apiserver",dry_run="",group="",'
        'resource="nodes",scope="resource",subresource="status",verb="PATCH",'
        'version="v1"} 3.0'
    )
    assert wanted in text


def test_stop_closes_open_watches_and_restart_keeps_objects(
    apiserver: ApiServer, kube: Kube
) -> None:
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "kept"}})
    revision = apiserver.store.revision
    watching = threading.Event()
    ended = threading.Event()

    def watch_forever() -> None:
        response = kube.core.list_namespaced_config_map(
            "default", watch=True, resource_version=str(revision), _preload_content=False
        )
        watching.set()
        try:
            for _ in response.stream(1024):
                pass
        except Exception:  # the server went away mid-stream: what this test wants
            pass
        finally:
            response.release_conn()
            ended.set()

    watcher = threading.Thread(target=watch_forever)
    watcher.start()
    watching.wait(5)
    apiserver.restart()
    assert ended.wait(5), "stop() did not end the open watch"
    watcher.join(5)
    assert kube.core.read_namespaced_config_map("kept", "default").metadata.name == "kept"
    assert apiserver.store.revision == revision
