"""The kubelet API served by an http worker in the test process, over real TLS: who gets
in (client certificates, tokens, anonymous; 401, 403, 500), what each endpoint answers,
container and node logs, and bad requests (4xx, bounded connections, and the rest of the
server going on)."""

from __future__ import annotations

import json
import logging
import os
import socket
import ssl
import threading
import time
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest
from pkletd.ipc.bus.messages import ParentAlive
from pkletd.workers.http import AuthOptions, AuthorizationMode
from pkletd.workers.http.reviews import FakeReviewer
from pkletd.workers.http.server import Limits

from tests.harness.apiserver.certs import Pki
from tests.harness.node import wait_for
from tests.workers.http.kubeletapi_helpers import NODE, Served, serve

UID = "5f0c7d2e-0000-4000-8000-000000000001"


def pod(
    name: str = "web",
    namespace: str = "default",
    uid: str = UID,
    statuses: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": namespace, "uid": uid},
        "spec": {
            "containers": [{"name": "app", "image": "busybox:1"}, {"name": "side", "image": "x"}]
        },
        "status": {
            "phase": "Running",
            "containerStatuses": statuses
            if statuses is not None
            else [
                {
                    "name": "app",
                    "image": "busybox:1",
                    "imageID": "",
                    "ready": True,
                    "restartCount": 1,
                    "containerID": "containerd://app-1",
                    "state": {"running": {"startedAt": "2024-05-01T10:00:00Z"}},
                    "lastState": {
                        "terminated": {
                            "exitCode": 1,
                            "reason": "Error",
                            "containerID": "containerd://app-0",
                        }
                    },
                },
                {
                    "name": "side",
                    "image": "x",
                    "imageID": "",
                    "ready": False,
                    "restartCount": 0,
                    "state": {"waiting": {"reason": "ContainerCreating"}},
                    "lastState": {},
                },
            ],
        },
    }


def put_pods(served: Served, *pods: dict[str, Any]) -> None:
    served.worker.view.pods = {p["metadata"]["uid"]: p for p in pods}


def cri(text: str, second: int = 0, tag: str = "F") -> bytes:
    return f"2024-05-01T10:00:{second:02d}.000000001Z stdout {tag} {text}\n".encode()


def write_log(tmp_path: Path, restart: int, data: bytes, container: str = "app") -> Path:
    directory = tmp_path / "pods" / f"default_web_{UID}" / container
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / f"{restart}.log"
    path.write_bytes(data)
    return path


def admin_only(spec: dict[str, Any]) -> bool:
    return "system:masters" in spec.get("groups", [])


# --- who gets in ------------------------------------------------------------------------------


def test_client_certificate_signed_by_the_ca_gets_in_and_none_is_401(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        put_pods(served, pod())
        reply = served.admin("/pods")
        assert reply.status == 200
        assert reply.headers["Content-Type"].startswith("application/json")
        no_cert = served.get("/pods")
        assert (no_cert.status, no_cert.text) == (401, "Unauthorized")
        assert served.get("/nope").status == 401  # before the 404
        assert served.admin("/nope").status == 404


def test_pods_deserialize_as_the_official_clients_v1podlist(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        put_pods(served, pod(), pod("db", uid="u-2"))
        reply = served.admin("/pods")
    pods = kubernetes.client.ApiClient().deserialize(reply.text, "V1PodList", "application/json")
    assert isinstance(pods, kubernetes.client.V1PodList)
    assert [p.metadata.name for p in pods.items] == ["db", "web"]
    assert pods.items[1].status.container_statuses[0].restart_count == 1


def test_tokens_go_through_token_and_access_reviews(tmp_path: Path) -> None:
    reviewer = FakeReviewer(
        tokens={"alice-token": {"username": "alice"}, "bob-token": {"username": "bob"}},
        allow=lambda spec: spec["user"] != "bob",
    )
    with serve(tmp_path, reviewer=reviewer) as served:
        assert served.get("/pods", token="alice-token").status == 200
        assert served.get("/pods", token="alice-token").status == 200
        denied = served.get("/containerLogs/default/web/app", token="bob-token")
        assert (denied.status, denied.text) == (
            403,
            "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)",
        )
        assert served.get("/pods", token="wrong").status == 401
        assert served.get("/pods", token="wrong").status == 401
        assert reviewer.count("TokenReview") == 3  # alice, bob, wrong: each once (cached)
        specs = [spec for kind, spec in reviewer.calls if kind == "SubjectAccessReview"]
        alice = [s for s in specs if s["user"] == "alice"]
        assert len(alice) == 1  # cached: the second /pods asked nothing
        assert alice[0]["resourceAttributes"] == {
            "verb": "get",
            "version": "v1",
            "resource": "nodes",
            "subresource": "pods",
            "name": NODE,
        }
        assert alice[0]["groups"] == ["system:authenticated"]


def test_fine_grained_subresource_falls_back_to_proxy(tmp_path: Path) -> None:
    reviewer = FakeReviewer(allow=lambda spec: spec["resourceAttributes"]["subresource"] == "proxy")
    with serve(tmp_path, reviewer=reviewer) as served:
        assert served.get("/pods", user="ops").status == 200
        asked = [s["resourceAttributes"]["subresource"] for _, s in reviewer.calls]
        assert asked == ["pods", "proxy"]
        assert served.get("/metrics/probes", user="ops").status == 403  # metrics: no fallback


def test_anonymous_requests_when_enabled(tmp_path: Path) -> None:
    auth = AuthOptions(anonymous=True, mode=AuthorizationMode.WEBHOOK)
    reviewer = FakeReviewer(allow=lambda spec: spec["user"] != "system:anonymous")
    with serve(tmp_path, auth=auth, reviewer=reviewer) as served:
        reply = served.get("/healthz")
        assert reply.status == 403
        assert reply.text == (
            "Forbidden (user=system:anonymous, verb=get, resource=nodes, subresource=proxy)"
        )
        assert reviewer.calls[0][1]["groups"] == ["system:unauthenticated"]


def test_always_allow_without_an_api_server(tmp_path: Path) -> None:
    auth = AuthOptions(anonymous=True, webhook_authn=False, mode=AuthorizationMode.ALWAYS_ALLOW)
    reviewer = FakeReviewer()
    with serve(tmp_path, auth=auth, reviewer=reviewer) as served:
        assert served.get("/pods").status == 200
        assert served.get("/pods", token="anything").status == 200  # no webhook: anonymous
    assert reviewer.calls == []


def test_api_server_down_tokens_401_certificates_need_authorization(tmp_path: Path) -> None:
    reviewer = FakeReviewer(tokens={"t": {"username": "alice"}})
    reviewer.down = True
    with serve(tmp_path, reviewer=reviewer) as served:
        assert served.get("/pods", token="t").status == 401
        reply = served.admin("/pods")
        assert (reply.status, reply.text) == (
            500,
            "Authorization error (user=admin, verb=get, resource=nodes, subresource=pods)",
        )
    pki = Pki(tmp_path / "always" / "pki")
    always = AuthOptions(client_ca_file=str(pki.ca_cert_path), mode=AuthorizationMode.ALWAYS_ALLOW)
    with serve(tmp_path / "always", auth=always, reviewer=reviewer) as served:
        assert served.admin("/pods").status == 200
        assert served.get("/pods", token="t").status == 401


def test_a_certificate_from_another_ca_fails_the_handshake(tmp_path: Path) -> None:
    stranger = Pki(tmp_path / "other").client_cert("eve")
    with serve(tmp_path) as served:
        with socket.create_connection(("127.0.0.1", served.port), timeout=5) as raw:
            try:
                with served.context(stranger).wrap_socket(raw) as sock:
                    sock.sendall(b"GET /pods HTTP/1.1\r\nHost: x\r\n\r\n")
                    answer = sock.recv(1024)  # TLS 1.3: the refusal comes with the first read
            except (ssl.SSLError, ConnectionError):
                answer = b""
        assert answer == b""
        assert served.admin("/pods").status == 200


def test_a_slow_review_does_not_hold_other_requests(tmp_path: Path) -> None:
    reviewer = FakeReviewer(tokens={"slow": {"username": "slowpoke"}})
    with serve(tmp_path, reviewer=reviewer) as served:
        assert served.admin("/pods").status == 200  # its review is cached now
        reviewer.gate = threading.Event()
        slow: list[int] = []
        thread = threading.Thread(
            target=lambda: slow.append(served.get("/pods", token="slow").status)
        )
        thread.start()
        wait_for("the slow review under way", lambda: reviewer.count("TokenReview") == 1)
        started = time.monotonic()
        assert served.admin("/pods").status == 200
        assert served.plain("/healthz").status == 200
        assert time.monotonic() - started < 2.0
        assert slow == []
        reviewer.gate.set()
        thread.join(10)
        assert slow == [200]


# --- endpoints ------------------------------------------------------------------------------------


def test_healthz_and_its_checks(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        assert served.admin("/healthz").text == "ok"
        assert served.admin("/healthz/ping").text == "ok"
        assert served.admin("/healthz/log").text == "ok"
        assert served.admin("/healthz/syncloop").text == "ok"
        assert served.admin("/healthz?verbose").text == (
            "[+]ping ok\n[+]log ok\n[+]syncloop ok\nhealthz check passed\n"
        )
        assert served.admin("/healthz/nope").status == 404
        served.worker.on_broadcast(ParentAlive(sync_loop_ok=False))
        bad = served.admin("/healthz")
        assert (bad.status, bad.text) == (
            500,
            "[+]ping ok\n[+]log ok\n[-]syncloop failed: reason withheld\nhealthz check failed\n",
        )
        check = served.admin("/healthz/syncloop")
        assert (check.status, check.text) == (
            500,
            "internal server error: sync Loop took longer than expected\n",
        )
        assert served.plain("/healthz").status == 500


def test_running_pods_configz_spec_and_probe_metrics(tmp_path: Path) -> None:
    configz = {"port": 10250, "authorization": {"mode": "Webhook"}}
    with serve(tmp_path, configz=configz) as served:
        put_pods(served, pod(), pod("idle", uid="u-2", statuses=[]))
        running = served.admin("/runningpods/").json()
        assert running == {
            "kind": "PodList",
            "apiVersion": "v1",
            "metadata": {},
            "items": [
                {
                    "metadata": {
                        "name": "web",
                        "namespace": "default",
                        "uid": UID,
                        "creationTimestamp": None,
                    },
                    "spec": {
                        "containers": [{"name": "app", "image": "busybox:1", "resources": {}}]
                    },
                    "status": {},
                }
            ],
        }
        assert served.admin("/configz").json() == {"kubeletconfig": configz}
        spec = served.admin("/spec/").json()
        assert spec["num_cores"] == os.cpu_count()
        assert spec["memory_capacity"] > 0
        assert {"machine_id", "system_uuid", "boot_id"} <= set(spec)
        served.worker.view.probe_samples = [
            {"name": "prober_probe_total", "labels": {"result": "successful"}, "value": 3}
        ]
        metrics = served.admin("/metrics/probes")
        assert 'prober_probe_total{result="successful"} 3' in metrics.text
        assert metrics.headers["Content-Type"].startswith("text/plain; version=0.0.4")


def test_read_only_port_serves_its_paths_without_authentication(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        put_pods(served, pod())
        assert served.plain("/pods").json()["items"][0]["metadata"]["name"] == "web"
        assert served.plain("/healthz").text == "ok"
        assert served.plain("/configz").status == 404
        assert served.plain("/containerLogs/default/web/app").status == 404
        assert served.plain("/pods", method="POST").status == 405


# --- container logs -----------------------------------------------------------------------------


def test_container_logs_and_their_options(tmp_path: Path) -> None:
    write_log(tmp_path, 1, cri("one", 1) + cri("two", 2) + cri("thr", 3, "P") + cri("ee", 3))
    write_log(tmp_path, 0, cri("crashed", 0))
    with serve(tmp_path) as served:
        put_pods(served, pod())
        base = "/containerLogs/default/web/app"
        reply = served.admin(base)
        assert (reply.status, reply.text) == (200, "one\ntwo\nthree\n")
        assert reply.headers["Transfer-Encoding"] == "chunked"
        assert served.admin(base + "?tailLines=1").text == "ee\n"
        assert served.admin(base + "?tail=1").text == "ee\n"
        assert served.admin(base + "?tail=all&tailLines=1").text == "one\ntwo\nthree\n"
        assert served.admin(base + "?limitBytes=5").text == "one\nt"
        assert served.admin(base + "?previous=true").text == "crashed\n"
        since = served.admin(base + "?sinceTime=2024-05-01T10:00:02Z").text
        assert since == "two\nthree\n"
        assert served.admin(base + "?timestamps=true&tailLines=1").text == (
            "2024-05-01T10:00:03.000000001Z ee\n"
        )


def test_container_logs_to_an_http_1_0_client_end_with_the_connection(tmp_path: Path) -> None:
    """No chunked encoding in HTTP/1.0: a 500 and a traceback until the soak found it."""
    write_log(tmp_path, 1, cri("one", 1) + cri("two", 2))
    with serve(tmp_path) as served:
        put_pods(served, pod())
        sock = served.tls_socket("admin")
        with sock:
            sock.sendall(b"GET /containerLogs/default/web/app HTTP/1.0\r\nHost: x\r\n\r\n")
            reply = b""
            while chunk := sock.recv(65536):
                reply += chunk
        head, _, body = reply.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.0 200 OK\r\n")
        assert b"Transfer-Encoding" not in head
        assert body == b"one\ntwo\n"


@pytest.mark.parametrize(
    ("path", "status", "text"),
    [
        ("/containerLogs/default/nope/app", 404, 'pod "nope" does not exist'),
        ("/containerLogs/other/web/app", 404, 'pod "web" does not exist'),
        ("/containerLogs/default/web/nope", 404, 'container "nope" not found in pod "web"'),
        ("/containerLogs/default/web/side", 400,
         'container "side" in pod "web" is waiting to start: ContainerCreating'),
        ("/containerLogs/default/web/side?previous=1", 400,
         'previous terminated container "side" in pod "web" not found'),
        ("/containerLogs/default/web/app?tailLines=ten", 400,
         '{"message": "Unable to decode query."}'),
        ("/containerLogs/default/web/app?sinceTime=today", 400,
         '{"message": "Unable to decode query."}'),
        ("/containerLogs/default/web/app?tailLines=-1", 422, '{"message": "Invalid request."}'),
        ("/containerLogs/default/web/app?sinceSeconds=1&sinceTime=2024-05-01T10:00:00Z", 422,
         '{"message": "Invalid request."}'),
        ("/containerLogs/default/web", 404, "404 page not found\n"),
    ],
)  # fmt: skip
def test_container_log_errors(tmp_path: Path, path: str, status: int, text: str) -> None:
    with serve(tmp_path) as served:
        put_pods(served, pod())
        reply = served.admin(path)
        assert (reply.status, reply.text) == (status, text)


def test_a_missing_log_file_is_a_clear_400(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        put_pods(served, pod())
        reply = served.admin("/containerLogs/default/web/app")
        assert reply.status == 400
        assert reply.text.startswith('failed to open log file "')
        assert reply.text.endswith('/app/1.log": No such file or directory')


def _stream(served: Served, path: str) -> tuple[Any, Any]:
    sock = served.tls_socket("admin")
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    return sock, sock.makefile("rb")


def test_follow_streams_until_the_container_stops(tmp_path: Path) -> None:
    log = write_log(tmp_path, 1, cri("one", 1))
    with serve(tmp_path) as served:
        put_pods(served, pod())
        sock, reader = _stream(served, "/containerLogs/default/web/app?follow=true")
        with sock, reader:
            assert reader.readline() == b"HTTP/1.1 200 OK\r\n"
            body = ChunkedReader(reader)
            assert body.read_until(b"one\n") == b"one\n"
            with log.open("ab") as f:
                f.write(cri("two", 2))
            assert body.read_until(b"two\n") == b"two\n"
            assert served.admin("/pods").status == 200  # the stream holds nothing else up
            stopped = pod()
            stopped["status"]["containerStatuses"][0]["state"] = {"terminated": {"exitCode": 0}}
            with log.open("ab") as f:
                f.write(cri("bye", 3))
            put_pods(served, stopped)
            assert body.read_to_end() == b"bye\n"


class ChunkedReader:
    """The body of a chunked response, read as it comes."""

    def __init__(self, f: Any) -> None:
        while f.readline() not in (b"\r\n", b""):
            pass
        self._f = f
        self._data = b""
        self._ended = False

    def _chunk(self) -> None:
        size = int(self._f.readline().strip(), 16)
        if size == 0:
            self._ended = True
            return
        self._data += self._f.read(size)
        self._f.readline()

    def read_until(self, marker: bytes) -> bytes:
        while marker not in self._data and not self._ended:
            self._chunk()
        found, self._data = self._data, b""
        return found

    def read_to_end(self) -> bytes:
        while not self._ended:
            self._chunk()
        return self._data


# --- node logs ------------------------------------------------------------------------------------


def test_node_logs_listing_files_and_refusals(tmp_path: Path) -> None:
    root = tmp_path / "varlog"
    (root / "pods").mkdir(parents=True)
    (root / "syslog").write_text("boot\n")
    (root / "pods" / "a.log").write_text("a\n")
    (tmp_path / "secret").write_text("no\n")
    (root / "escape").symlink_to(tmp_path / "secret")
    os.mkfifo(root / "fifo")
    with serve(tmp_path) as served:
        listing = served.admin("/logs/")
        assert listing.status == 200
        assert listing.headers["Content-Type"] == "text/html; charset=utf-8"
        assert '<a href="pods/">pods/</a>' in listing.text
        assert '<a href="syslog">syslog</a>' in listing.text
        assert served.admin("/logs/syslog").text == "boot\n"
        assert served.admin("/logs/pods/a.log").text == "a\n"
        redirect = served.admin("/logs/pods")
        assert (redirect.status, redirect.headers["Location"]) == (301, "pods/")
        assert served.admin("/logs/escape").status == 404
        assert served.admin("/logs/fifo").status == 404
        assert served.admin("/logs/missing").status == 404
        traversal = served.admin("/logs/pods/%2e%2e/%2e%2e/secret")
        assert (traversal.status, traversal.text) == (400, "invalid URL path\n")
        ranged = served.admin("/logs/syslog", headers={"Range": "bytes=1-2"})
        assert (ranged.status, ranged.text) == (206, "oo")
        assert served.get("/logs/syslog", user="nobody-allowed").status == 200  # fake allows
        denied = FakeReviewer(allow=lambda spec: False)
        with serve(tmp_path / "x", reviewer=denied) as strict:
            reply = strict.get("/logs/syslog", user="ops")
            assert reply.text == "Forbidden (user=ops, verb=get, resource=nodes, subresource=log)"


# --- bad requests -------------------------------------------------------------------------------


def test_huge_request_lines_and_headers_are_refused(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        long_path = served.admin("/pods?" + "x" * 20_000)
        assert long_path.status in (400, 414)
        big_header = served.admin("/pods", headers={"X-Big": "y" * 20_000})
        assert big_header.status in (400, 431)
        many = served.admin("/pods", headers={f"X-H{n}": "v" for n in range(200)})
        assert many.status in (400, 431)
        assert served.admin("/pods").status == 200


def test_idle_and_slow_connections_are_closed(tmp_path: Path) -> None:
    limits = Limits(idle_timeout=1.0)
    with serve(tmp_path, limits=limits) as served:
        idle = served.tls_socket("admin")
        slow = served.tls_socket("admin")
        slow.sendall(b"GET /pods HTTP/1.1\r\nHost: x\r\n")  # and never the end
        for sock in (idle, slow):
            with sock:
                sock.settimeout(10)
                started = time.monotonic()
                assert sock.recv(1024) == b""  # closed by the server
                assert time.monotonic() - started < 5
        assert served.admin("/pods").status == 200


def test_connections_past_the_limit_get_503_and_the_rest_go_on(tmp_path: Path) -> None:
    limits = Limits(max_connections=3)
    with serve(tmp_path, limits=limits) as served:
        held = [served.tls_socket("admin") for _ in range(3)]
        for sock in held:  # each one established as a connection on the server
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            assert sock.recv(1024).startswith(b"HTTP/1.1 200")
        refused = served.admin("/pods")
        assert (refused.status, refused.text) == (503, "too many connections\n")
        for sock in held:
            sock.close()
        wait_for("a free connection again", lambda: served.admin("/pods").status == 200)


def test_many_follow_streams_keep_the_lifecycle_and_other_requests_quick(tmp_path: Path) -> None:
    write_log(tmp_path, 1, cri("one", 1))
    with serve(tmp_path) as served:
        put_pods(served, pod())
        streams = [_stream(served, "/containerLogs/default/web/app?follow=1") for _ in range(20)]
        try:
            for _sock, reader in streams:
                assert reader.readline() == b"HTTP/1.1 200 OK\r\n"
            started = time.monotonic()
            for _ in range(50):
                served.worker.on_broadcast(ParentAlive(sync_loop_ok=True))
            assert served.admin("/healthz").text == "ok"
            assert served.plain("/pods").status == 200
            assert time.monotonic() - started < 2.0
        finally:
            for sock, reader in streams:
                reader.close()
                sock.close()


def test_a_post_body_past_the_limit_is_not_read_into_memory(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        sock = served.tls_socket("admin")
        with sock:
            sock.sendall(
                b"POST /pods HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n" + b"x" * 1000
            )
            assert sock.recv(1024).startswith(b"HTTP/1.1 405")
        assert served.admin("/pods").status == 200


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"\x00\x01 NOT HTTP\r\n\r\n",
        b"GET /pods HTTP/9.9\r\nHost: x\r\n\r\n",
        b"GET /pods HTTP/1.1\r\nno colon here\r\n\r\n",
        b"GET /pods HTTP/1.1\r\n" + b"".join(b"X-H%d: v\r\n" % n for n in range(200)) + b"\r\n",
    ],
)
def test_garbage_on_the_socket_is_a_400_and_no_log_line(
    tmp_path: Path, request_bytes: bytes, caplog: pytest.LogCaptureFixture
) -> None:
    """aiohttp logs each at ERROR with a traceback; the soak's HTTP fuzzer found any client
    could fill the log with them."""
    with serve(tmp_path) as served:
        sock = served.tls_socket("admin")
        with sock:
            sock.sendall(request_bytes)
            assert sock.recv(1024).split(b"\r\n")[0].endswith(b" 400 Bad Request")
        assert served.admin("/pods").status == 200
    # the stats housekeeping runs without requests, and this worker has no runtime to ask
    served_lines = [r for r in caplog.records if not r.name.startswith("pkletd.ipc.nodestats")]
    assert [r.getMessage() for r in served_lines if r.levelno >= logging.WARNING] == []


def test_json_of_pods_is_valid_for_many_pods(tmp_path: Path) -> None:
    with serve(tmp_path) as served:
        put_pods(served, *(pod(f"p{n}", uid=f"u-{n}") for n in range(300)))
        assert len(json.loads(served.admin("/pods").body)["items"]) == 300


# --- taking a connection over (what /exec, /attach, /portForward will do) ------------------------


def test_switch_protocols_hands_over_the_raw_connection(tmp_path: Path) -> None:
    from pkletd.workers.http.options import Api, Listen
    from pkletd.workers.http.routes import Route, application
    from pkletd.workers.http.server import HttpServer, Site
    from pkletd.workers.http.upgrade import switch_protocols

    async def echo(request: Any) -> Any:
        raw = await switch_protocols(request, {"Upgrade": "SPDY/3.1", "Connection": "Upgrade"})
        while line := await raw.reader.readline():
            await raw.write(line.upper())
        raw.close()
        return raw.response

    listen = Listen("127.0.0.1", 0, Api.READ_ONLY)
    server = HttpServer([Site(listen, application([Route("/echo", echo)]))])
    server.start()
    try:
        port = wait_for("bound", lambda: server.address(listen))[1]
        with socket.create_connection(("127.0.0.1", port), timeout=5) as sock:
            sock.sendall(
                b"GET /echo HTTP/1.1\r\nHost: x\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n"
            )
            f = sock.makefile("rb")
            head = []
            while (line := f.readline()) not in (b"\r\n", b""):
                head.append(line)
            assert head[0] == b"HTTP/1.1 101 Switching Protocols\r\n"
            assert b"Upgrade: SPDY/3.1\r\n" in head
            sock.sendall(b"GET / HTTP/1.1\r\n\r\n")  # raw bytes now, not a request
            assert f.readline() == b"GET / HTTP/1.1\r\n"
            assert f.readline() == b"\r\n"
            sock.sendall(b"hello\n")
            assert f.readline() == b"HELLO\n"
            sock.shutdown(socket.SHUT_WR)
            assert f.read() == b""
            f.close()
    finally:
        server.close()
