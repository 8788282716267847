"""The HTTP pod source without containerd: bodies, fetching on loopback, and what it sends."""

from __future__ import annotations

import hashlib
import json
import select
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from pkletd.ipc.apimodel.manifests import ManifestError
from pkletd.ipc.bus.messages import (
    ManifestAccepted,
    ManifestRejected,
    Message,
    PodsListed,
    Snapshot,
)
from pkletd.ipc.bus.sender import FakeSender
from pkletd.workers.httpsource import (
    MAX_BODY,
    FetchError,
    HttpSource,
    fetch,
    pods_from_body,
    request_headers,
)

from tests.workers.source_helpers import WEB_POD_YAML

NODE = "node-a"
URL = "http://127.0.0.1:1/pods"
POD_YAML = WEB_POD_YAML


def pod(name: str = "web", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, **meta},
        "spec": {"containers": [{"name": "app", "image": "nginx:1.25"}]},
    }


def pod_list(*items: dict[str, Any]) -> bytes:
    return json.dumps({"apiVersion": "v1", "kind": "PodList", "items": list(items)}).encode()


# --- bodies ---------------------------------------------------------------------------------


def test_single_pod_gets_the_kubelet_identity_for_http() -> None:
    (result,), dropped = pods_from_body(POD_YAML.encode(), URL, NODE)
    assert dropped == []
    meta = result["metadata"]
    assert (meta["name"], meta["namespace"]) == ("web-node-a", "default")
    assert result["spec"]["nodeName"] == NODE
    assert meta["annotations"]["kubernetes.io/config.source"] == "http"
    assert meta["annotations"]["kubernetes.io/config.hash"] == meta["uid"]
    # The UID is derived from the pod as served and the URL (common.go's "url:<url>").
    digest = hashlib.md5(usedforsecurity=False)
    digest.update(json.dumps(pod(), sort_keys=True).encode())
    digest.update(f"url:{URL}".encode())
    assert meta["uid"] == digest.hexdigest()


def test_uid_depends_on_url_and_content_and_an_explicit_uid_is_kept() -> None:
    def uid(body: bytes, url: str = URL) -> str:
        return str(pods_from_body(body, url, NODE)[0][0]["metadata"]["uid"])

    body = json.dumps(pod()).encode()
    assert uid(body) == uid(POD_YAML.encode())  # JSON or YAML: the same pod
    assert uid(body, URL + "?v=2") != uid(body)
    assert uid(json.dumps(pod(labels={"a": "b"})).encode()) != uid(body)
    assert uid(json.dumps(pod(uid="fixed")).encode()) == "fixed"


def test_pod_list_json_and_yaml() -> None:
    pods, _ = pods_from_body(pod_list(pod("a"), pod("b", namespace="kube-system")), URL, NODE)
    assert [(p["metadata"]["namespace"], p["metadata"]["name"]) for p in pods] == [
        ("default", "a-node-a"),
        ("kube-system", "b-node-a"),
    ]
    yaml_list = "apiVersion: v1\nkind: PodList\nitems:\n" + "".join(
        "- " + POD_YAML.replace("\n", "\n  ").replace("web", name).rstrip() + "\n"
        for name in ("x", "y")
    )
    names = [p["metadata"]["name"] for p in pods_from_body(yaml_list.encode(), URL, NODE)[0]]
    assert names == ["x-node-a", "y-node-a"]


def test_empty_pod_list_is_an_empty_set() -> None:
    assert pods_from_body(pod_list(), URL, NODE) == ([], [])
    assert pods_from_body(b"kind: PodList\nitems:\n", URL, NODE) == ([], [])


def test_duplicate_names_in_a_list_keep_the_first() -> None:
    first = pod("a", labels={"n": "1"})
    pods, dropped = pods_from_body(pod_list(first, pod("a", labels={"n": "2"})), URL, NODE)
    assert [p["metadata"]["labels"]["n"] for p in pods] == ["1"]
    assert dropped == [(URL, f"duplicate pod name default/a-node-a (first from {URL})")]


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"metadata: [unclosed", "not valid YAML or JSON"),
        (b"\xff\xfe", "not UTF-8 text"),
        (b"   \n", "want one Pod or PodList, found 0 documents"),
        (POD_YAML.encode() + b"---\n" + POD_YAML.encode(), "found 2 documents"),
        (b"- a\n- b\n", "not a Pod or a PodList: the document is not a mapping"),
        (b"kind: ConfigMap\n", "not a Pod or a PodList: kind 'ConfigMap'"),
        (b"apiVersion: v2\nkind: PodList\nitems: []\n", "apiVersion: must be v1"),
        (b"kind: PodList\nitems: {a: b}\n", "items: must be a list"),
        (pod_list(pod("a"), pod("Bad_Name")), "items[1]: metadata.name"),
        (b"kind: Pod\nmetadata: {name: web}\nspec: {}\n", "spec.containers"),
    ],
    ids=[
        "yaml",
        "binary",
        "blank",
        "two-docs",
        "list",
        "kind",
        "list-version",
        "items",
        "bad-item",
        "no-containers",
    ],
)
def test_bad_body_is_rejected_whole(body: bytes, reason: str) -> None:
    with pytest.raises(ManifestError) as caught:
        pods_from_body(body, URL, NODE)
    assert reason in str(caught.value)
    assert "\n" not in str(caught.value)


def test_repeated_headers_are_joined() -> None:
    headers = (("A", "1"), ("B", "x"), ("A", "2"))
    assert request_headers(headers) == {"A": "1, 2", "B": "x"}


# --- fetching from a server on loopback -----------------------------------------------------


class Server:
    """A manifest server on 127.0.0.1: replies with ``status`` and ``body``; records requests."""

    def __init__(self) -> None:
        self.status = 200
        self.body = b""
        self.location = ""
        self.requests: list[dict[str, str]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (the stdlib's name)
                server.requests.append({k.lower(): v for k, v in self.headers.items()})
                if server.location and self.path == "/old":
                    self.send_response(302)
                    self.send_header("Location", server.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                self.send_response(server.status)
                self.send_header("Content-Length", str(len(server.body)))
                self.end_headers()
                self.wfile.write(server.body)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/pods"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    try:
        yield s
    finally:
        s.close()


def test_fetch_sends_the_headers_and_returns_the_body(server: Server) -> None:
    server.body = POD_YAML.encode()
    assert fetch(server.url, (("X-Token", "secret"), ("X-Multi", "a"), ("X-Multi", "b"))) == (
        POD_YAML.encode()
    )
    assert server.requests[-1]["x-token"] == "secret"
    assert server.requests[-1]["x-multi"] == "a, b"


def test_fetch_follows_redirects(server: Server) -> None:
    server.body = b"moved"
    server.location = server.url
    assert fetch(server.url.replace("/pods", "/old"), ()) == b"moved"


def test_fetch_errors_name_the_url_and_status(server: Server) -> None:
    server.status = 500
    with pytest.raises(FetchError, match=rf"^{server.url}: 500 Internal Server Error$"):
        fetch(server.url, ())
    server.status = 204
    with pytest.raises(FetchError, match=r": 204 No Content$"):
        fetch(server.url, ())


def test_fetch_refuses_a_body_over_10_mib(server: Server) -> None:
    server.body = b"x" * (MAX_BODY + 1)
    with pytest.raises(FetchError, match="body larger than"):
        fetch(server.url, ())
    server.body = b"x" * MAX_BODY
    assert len(fetch(server.url, ())) == MAX_BODY


def test_fetch_connection_refused(server: Server) -> None:
    url = server.url
    server.close()
    with pytest.raises(FetchError, match=rf"^{url}: .*[Cc]onnection refused"):
        fetch(url, (), timeout=2)


# --- what the worker sends ----------------------------------------------------------------


def names(message: Message) -> list[str]:
    assert isinstance(message, PodsListed) and message.source == "http"
    return [p["metadata"]["name"] for p in message.pods]


def rejected(messages: list[Message]) -> list[str]:
    out = []
    for m in messages:
        assert isinstance(m, ManifestRejected)
        assert (m.source, m.path) == ("http", URL)
        out.append(m.reason)
    return out


@pytest.fixture
def source() -> Iterator[tuple[HttpSource, FakeSender]]:
    bus = FakeSender()
    worker = HttpSource(bus, URL, (), NODE, 20.0)  # type: ignore[arg-type]
    try:
        yield worker, bus
    finally:
        worker.close()


def test_good_bodies_are_sent_once_each(source: tuple[HttpSource, FakeSender]) -> None:
    worker, bus = source
    worker.on_fetched(POD_YAML.encode())
    (listed,) = bus.take()
    assert names(listed) == ["web-node-a"]
    worker.on_fetched(POD_YAML.encode())  # unchanged: nothing to say
    assert bus.take() == []
    worker.on_fetched(pod_list(pod("web"), pod("db")))
    (listed,) = bus.take()
    assert names(listed) == ["web-node-a", "db-node-a"]


def test_failures_keep_the_last_set_and_are_reported_once(
    source: tuple[HttpSource, FakeSender],
) -> None:
    worker, bus = source
    worker.on_fetched(POD_YAML.encode())
    bus.take()
    worker.on_fetched(FetchError(f"{URL}: 500 Internal Server Error"))
    worker.on_fetched(FetchError(f"{URL}: 500 Internal Server Error"))
    assert rejected(bus.take()) == [f"{URL}: 500 Internal Server Error"]
    worker.on_fetched(POD_YAML.encode())  # the URL answers again, with the same pods
    assert bus.take() == [ManifestAccepted("http", URL)]
    worker.on_fetched(b"kind: Pod\nmetadata: [")
    worker.on_fetched(b"kind: Pod\nmetadata: [")
    (reason,) = rejected(bus.take())
    assert reason.startswith("not valid YAML or JSON")
    worker.on_fetched(FetchError(f"{URL}: timed out"))
    worker.on_fetched(b"kind: Pod\nmetadata: [")  # still the same bad body: said again
    assert rejected(bus.take()) == [f"{URL}: timed out", reason]
    worker.on_fetched(POD_YAML.encode())  # the good set was never withdrawn: nothing to send
    assert bus.take() == [ManifestAccepted("http", URL)]


def test_an_empty_body_empties_the_set_as_the_kubelet_does(
    source: tuple[HttpSource, FakeSender],
) -> None:
    worker, bus = source
    worker.on_fetched(POD_YAML.encode())
    bus.take()
    worker.on_fetched(b"")
    listed, problem = bus.take()
    assert names(listed) == []
    assert rejected([problem]) == [f"zero-length data received from {URL}"]
    worker.on_fetched(POD_YAML.encode())  # the same body as before the empty one: back
    listed, accepted = bus.take()
    assert names(listed) == ["web-node-a"]
    assert accepted == ManifestAccepted("http", URL)


def test_a_first_empty_body_still_marks_the_source_seen(
    source: tuple[HttpSource, FakeSender],
) -> None:
    worker, bus = source
    worker.on_fetched(b"")
    listed, _ = bus.take()
    assert isinstance(listed, PodsListed) and listed.pods == []


def test_duplicates_are_reported_and_the_rest_is_sent(
    source: tuple[HttpSource, FakeSender],
) -> None:
    worker, bus = source
    worker.on_fetched(pod_list(pod("a"), pod("a", labels={"x": "y"}), pod("b")))
    listed, problem = bus.take()
    assert rejected([problem]) == [f"duplicate pod name default/a-node-a (first from {URL})"]
    assert names(listed) == ["a-node-a", "b-node-a"]


def test_a_new_snapshot_sends_the_set_again(source: tuple[HttpSource, FakeSender]) -> None:
    worker, bus = source
    worker.on_fetched(POD_YAML.encode())
    bus.take()
    worker.on_snapshot(Snapshot(0, [], {}))
    worker.on_fetched(POD_YAML.encode())
    (listed,) = bus.take()
    assert names(listed) == ["web-node-a"]


def test_the_fetch_runs_in_a_thread_and_wakes_the_loop() -> None:
    bus = FakeSender()
    release = threading.Event()
    calls: list[tuple[str, tuple[tuple[str, str], ...]]] = []

    def fetcher(url: str, headers: tuple[tuple[str, str], ...]) -> bytes:
        calls.append((url, headers))
        release.wait(10)
        return POD_YAML.encode()

    worker = HttpSource(bus, URL, (("A", "b"),), NODE, 20.0, fetcher)  # type: ignore[arg-type]
    try:
        due = worker.tick(100.0)
        assert due == 120.0  # nothing due while the fetch runs but the fd
        worker.tick(100.5)  # one fetch at a time
        (fd,) = worker.fds()
        assert select.select([fd], [], [], 0.2)[0] == []  # the loop is not held up
        release.set()
        assert select.select([fd], [], [], 10)[0] == [fd]
        worker.on_readable(fd)
        (listed,) = bus.take()
        assert names(listed) == ["web-node-a"]
        assert calls == [(URL, (("A", "b"),))]
        # The next fetch: a period after this one ended (wait.Until's sliding period).
        assert worker.tick(time.monotonic()) > time.monotonic() + 19
    finally:
        worker.close()


def test_a_fetcher_bug_is_reported_and_the_next_fetch_still_happens() -> None:
    bus = FakeSender()

    def fetcher(url: str, headers: tuple[tuple[str, str], ...]) -> bytes:
        raise RuntimeError("boom")

    worker = HttpSource(bus, URL, (), NODE, 0.0, fetcher)  # type: ignore[arg-type]
    try:
        for _ in range(2):
            worker.tick(time.monotonic())
            (fd,) = worker.fds()
            assert select.select([fd], [], [], 10)[0] == [fd]
            worker.on_readable(fd)
        assert rejected(bus.take()) == [f"{URL}: boom"]  # said once, fetched twice
    finally:
        worker.close()
