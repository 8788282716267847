"""The streaming endpoints' parts without containerd: how a request's stream options and
ports are read, and the upgrade proxy against a stand-in streaming server (101 then
bytes both ways, a refusal relayed, a dead or odd server, the idle timeout)."""

from __future__ import annotations

import argparse
import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from multidict import CIMultiDict, MultiDict
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.ipc.runtime import cri
from pkletd.ipc.runtime.cri import StreamFlags
from pkletd.supervisor import config, workeroptions
from pkletd.supervisor.pods.setup import runtimespec
from pkletd.workers.http.options import Api, Listen
from pkletd.workers.http.routes import Route, application
from pkletd.workers.http.server import HttpServer, Site
from pkletd.workers.http.streamoptions import (
    BadStreamRequest,
    exec_command,
    forwarded_ports,
    is_upgrade_request,
    run_command,
    stream_flags,
)
from pkletd.workers.http.streamproxy import parse_head, proxy_upgrade

from tests.harness.node import wait_for

SPDY = CIMultiDict({"Connection": "Upgrade", "Upgrade": "SPDY/3.1"})
WEBSOCKET = CIMultiDict({"Connection": "keep-alive, Upgrade", "Upgrade": "websocket"})


# --- stream options -----------------------------------------------------------------------


def query(text: str) -> MultiDict[str]:
    pairs = [tuple(p.split("=", 1)) for p in text.split("&") if p]
    return MultiDict(pairs)


@pytest.mark.parametrize(
    ("text", "flags"),
    [
        ("output=1", StreamFlags(stdin=False, stdout=True, stderr=False, tty=False)),
        ("input=1&error=1", StreamFlags(stdin=True, stdout=False, stderr=True, tty=False)),
        # a terminal has no separate stderr: the kubelet drops it rather than refuse
        ("input=1&output=1&error=1&tty=1", StreamFlags(True, True, False, True)),
    ],
)
def test_stream_flags_as_the_kubelet_reads_them(text: str, flags: StreamFlags) -> None:
    assert stream_flags(query(text)) == flags


@pytest.mark.parametrize(
    "text",
    # the client's names are the API server's, not the kubelet's
    ["", "tty=1", "output=true", "output=0&input=yes", "tty=1&error=1", "stdout=1&stdin=1"],
)
def test_no_stream_is_the_kubelets_400(text: str) -> None:
    with pytest.raises(BadStreamRequest, match="^you must specify at least 1 of stdin, stdout"):
        stream_flags(query(text))


def test_commands_of_exec_and_run() -> None:
    assert exec_command(query("command=sh&command=-c&command=echo a b")) == ("sh", "-c", "echo a b")
    assert exec_command(query("output=1")) == ()
    assert run_command(query("cmd=ls -l /")) == ("ls", "-l", "/")
    assert run_command(query("")) == ("",)


def test_upgrade_requests_are_known_by_their_connection_header() -> None:
    assert is_upgrade_request(SPDY) and is_upgrade_request(WEBSOCKET)
    assert not is_upgrade_request(CIMultiDict({"Upgrade": "SPDY/3.1"}))
    assert not is_upgrade_request(CIMultiDict({"Connection": "keep-alive"}))


def test_spdy_port_forward_names_its_ports_per_stream() -> None:
    assert forwarded_ports(query("port=abc"), SPDY) == ()
    assert forwarded_ports(query("port=80,8080&port=9090"), WEBSOCKET) == (80, 8080, 9090)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", 'query parameter "port" is required'),
        ("port=", 'query parameter "port" cannot be empty'),
        ("port=0", 'port "0" must be > 0'),
        ("port=80,x", 'unable to parse "80,x" as a port: strconv.ParseUint: parsing "x": '
         "invalid syntax"),
        ("port=65536", 'unable to parse "65536" as a port: strconv.ParseUint: parsing "65536": '
         "value out of range"),
        ("port=-1", 'unable to parse "-1" as a port: strconv.ParseUint: parsing "-1": '
         "invalid syntax"),
    ],
)  # fmt: skip
def test_websocket_port_forward_needs_good_ports(text: str, message: str) -> None:
    with pytest.raises(BadStreamRequest) as caught:
        forwarded_ports(query(text), WEBSOCKET)
    assert str(caught.value) == message


def test_response_heads_are_parsed() -> None:
    head = parse_head(
        b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n"
        b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
    )
    assert (head.status, head.reason) == (101, "Switching Protocols")
    assert head.headers == [
        ("Upgrade", "SPDY/3.1"),
        ("X-Stream-Protocol-Version", "v4.channel.k8s.io"),
    ]


def test_the_idle_timeout_is_the_kubelet_configurations(tmp_path: Path) -> None:
    parser = argparse.ArgumentParser()
    config.add_flags(parser)
    path = tmp_path / "kubelet-config.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "streamingConnectionIdleTimeout: 30m\n"
    )
    given = config.load(parser.parse_args(["--config", str(path)])).config
    assert workeroptions.http_options(given).streaming_idle_timeout == 1800.0
    default = config.load(parser.parse_args([])).config
    assert workeroptions.http_options(default).streaming_idle_timeout == 4 * 3600.0
    flag = config.load(parser.parse_args(["--streaming-connection-idle-timeout", "5m"])).config
    assert workeroptions.http_options(flag).streaming_idle_timeout == 300.0


# --- what attach needs of a container -------------------------------------------------------


def test_stdin_and_tty_of_a_container_reach_the_runtime() -> None:
    containers = [
        {"name": "plain", "image": "busybox"},
        {"name": "shell", "image": "busybox", "stdin": True, "stdinOnce": True, "tty": True},
    ]
    pod = parse_pod({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": containers}})
    configs = [cri._container_config(runtimespec.container_spec(pod, c, 0)) for c in pod.containers]
    assert [(c.stdin, c.stdin_once, c.tty) for c in configs] == [
        (False, False, False),
        (True, True, True),
    ]
    containers[1]["tty"] = "yes"
    with pytest.raises(InvalidPod, match=r"^spec.containers\[1\].tty: must be true or false"):
        parse_pod({"metadata": {"name": "p", "uid": "u"}, "spec": {"containers": containers}})


# --- the proxy, against a stand-in for the runtime's streaming server ------------------------


class StandIn:
    """A plain-TCP server on 127.0.0.1 that answers each connection's request head with
    ``answer`` and then, after a 101, echoes what it gets in upper case."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.seen: list[bytes] = []
        self._sock = socket.create_server(("127.0.0.1", 0))
        self._sock.settimeout(0.1)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._sock.getsockname()[1]}/exec/token123"

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            with conn:
                self._talk(conn)

    def _talk(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        data = b""
        while b"\r\n\r\n" not in data:
            data += conn.recv(4096)
        self.seen.append(data)
        conn.sendall(self.answer)
        if b" 101 " not in self.answer.split(b"\r\n")[0]:
            return
        try:
            while chunk := conn.recv(4096):
                conn.sendall(chunk.upper())
        except OSError:
            pass

    def close(self) -> None:
        self._stop.set()
        self._thread.join(5)
        self._sock.close()


@contextmanager
def proxied(url: Callable[[], str], idle_timeout: float = 0.0) -> Iterator[int]:
    """A server whose ``/exec`` proxies every request to ``url()``; its port."""

    async def handle(request: object) -> object:
        return await proxy_upgrade(request, url(), idle_timeout)  # type: ignore[arg-type]

    listen = Listen("127.0.0.1", 0, Api.READ_ONLY)
    server = HttpServer([Site(listen, application([Route("/exec", handle, ("GET", "POST"))]))])
    server.start()
    try:
        yield wait_for("bound", lambda: server.address(listen))[1]
    finally:
        server.close()


def upgrade(port: int, extra: bytes = b"") -> tuple[socket.socket, bytes]:
    """Send an upgrade request; the socket and the response head."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=5)
    sock.sendall(
        b"POST /exec?command=x HTTP/1.1\r\nHost: kubelet\r\nConnection: Upgrade\r\n"
        b"Upgrade: SPDY/3.1\r\nX-Stream-Protocol-Version: v4.channel.k8s.io\r\n"
        b"X-Stream-Protocol-Version: v3.channel.k8s.io\r\nAuthorization: Bearer secret\r\n"
        + extra
        + b"\r\n"
    )
    head = b""
    while b"\r\n\r\n" not in head:
        chunk = sock.recv(1)
        if not chunk:
            break
        head += chunk
    return sock, head


def test_a_switch_splices_bytes_both_ways() -> None:
    backend = StandIn(
        b"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n"
        b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n\r\n"
    )
    try:
        with proxied(lambda: backend.url) as port:
            sock, head = upgrade(port)
            with sock:
                assert head.startswith(b"HTTP/1.1 101 Switching Protocols\r\n")
                assert b"X-Stream-Protocol-Version: v4.channel.k8s.io\r\n" in head
                payload = b"spdy frames " * 50000  # 600 kB: more than any buffer on the way
                sender = threading.Thread(target=sock.sendall, args=(payload,))
                sender.start()
                received = b""
                while len(received) < len(payload):
                    received += sock.recv(65536)
                sender.join(5)
                assert received == payload.upper()
                sock.shutdown(socket.SHUT_WR)  # the client leaves: the stream ends
                assert sock.recv(10) == b""
        sent = backend.seen[0].decode()
        assert sent.startswith("POST /exec/token123 HTTP/1.1\r\n")
        assert sent.count("X-Stream-Protocol-Version: ") == 2
        assert "Authorization" not in sent and "X-Forwarded-For: 127.0.0.1\r\n" in sent
    finally:
        backend.close()


def test_a_refusal_is_relayed_and_odd_answers_are_500s() -> None:
    refusal = StandIn(b"HTTP/1.1 403 Forbidden\r\nContent-Length: 7\r\n\r\nno, v5.")
    odd = StandIn(b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        dead_port = probe.getsockname()[1]
    dead = f"http://127.0.0.1:{dead_port}/exec/x"
    try:
        answers = []
        for url in (refusal.url, odd.url, dead):
            with proxied(lambda url=url: url) as port:  # type: ignore[misc]
                sock, head = upgrade(port)
                with sock:
                    answers.append(head.split(b"\r\n")[0] + b" " + sock.recv(4096))
        assert answers[0] == b"HTTP/1.1 403 Forbidden no, v5."
        assert answers[1] == (
            b"HTTP/1.1 500 Internal Server Error invalid upgrade response: status code 200\n"
        )
        assert answers[2] == (
            b"HTTP/1.1 500 Internal Server Error error dialing backend: "
            + f"dial tcp 127.0.0.1:{dead_port}: connect: connection refused\n".encode()
        )
    finally:
        refusal.close()
        odd.close()


def test_an_idle_stream_is_closed_after_the_idle_timeout() -> None:
    backend = StandIn(b"HTTP/1.1 101 Switching Protocols\r\nUpgrade: SPDY/3.1\r\n\r\n")
    try:
        with proxied(lambda: backend.url, idle_timeout=0.5) as port:
            sock, head = upgrade(port)
            with sock:
                assert b" 101 " in head
                for _ in range(4):  # traffic keeps it open past the timeout
                    sock.sendall(b"x")
                    assert sock.recv(1) == b"X"
                    time.sleep(0.2)
                started = time.monotonic()
                assert sock.recv(10) == b""  # then silence closes it
                assert 0.2 < time.monotonic() - started < 3.0
    finally:
        backend.close()
