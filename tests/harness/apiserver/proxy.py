"""Proxying to a node's kubelet, as kube-apiserver does for logs, exec/attach/portforward and
``nodes/<n>/proxy``.

The kubelet is found at the node's preferred address (``preferred_address_types``; the real
default puts Hostname first, tests put InternalIP first since hostnames do not resolve here)
and ``status.daemonEndpoints.kubeletEndpoint.Port``. The apiserver authenticates with its
kubelet-client certificate and, like kube-apiserver without
``--kubelet-certificate-authority``, does not verify the kubelet's serving cert unless a CA is
configured. Errors take the real forms: 400 ``container x is not valid for pod y``, 400 ``pod
y does not have a host assigned`` (exec), an empty 200 for logs of an unscheduled pod, 500
with the dial error when the kubelet is unreachable.

exec, attach and portforward are relayed as they come: the client's method and headers go to
the kubelet, the kubelet's answer (101 and then raw bytes both ways, or a refusal) comes
back. That is kube-apiserver 1.32 with its feature gates ``TranslateStreamCloseWebsocketRequests``
and ``PortForwardWebsockets`` off; with them on (their 1.32 default) the real API server
itself ends kubectl's WebSocket (``v5.channel.k8s.io`` for exec and attach, the
``SPDY/3.1+portforward.k8s.io`` tunnel for port-forward) and speaks SPDY to the kubelet.
Relayed, kubectl 1.32's WebSocket request reaches the runtime's streaming server, which does
not speak v5 (containerd 1.6 answers 403) or needs a ``port`` for a WebSocket port-forward
(the kubelet answers 400); kubectl takes either as an upgrade failure and retries over SPDY,
which every kubelet serves. So ``kubectl exec``, ``attach`` and ``port-forward`` work, over
SPDY after one refused WebSocket request each (seen in ``requests()``: a GET, then a POST).
The Python client's ``stream()`` asks for ``v4.channel.k8s.io``, which the runtime speaks:
the WebSocket path end to end."""

from __future__ import annotations

import http.client
import select
import socket
import ssl
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import urlencode

from tests.harness.apiserver import errors
from tests.harness.apiserver.kinds.nodes import kubelet_port, preferred_address
from tests.harness.apiserver.kinds.pod_defaults import CONTAINER_LISTS
from tests.harness.apiserver.store import Store

Obj = dict[str, Any]
DIAL_TIMEOUT = 10.0
LOG_FLAGS = ("follow", "previous", "timestamps")
LOG_NUMBERS = ("sinceSeconds", "tailLines", "limitBytes")
HOP_HEADERS = (
    "connection",
    "keep-alive",
    "proxy-connection",
    "transfer-encoding",
    "te",
    "trailer",
    "upgrade",
    "host",
    "authorization",
    "content-length",
)


class Downstream(Protocol):
    """The client side of a proxied request (the HTTP handler)."""

    def start_stream(self, code: int, headers: Sequence[tuple[str, str]]) -> None: ...

    def write_chunk(self, data: bytes) -> None: ...

    def end_stream(self) -> None: ...

    def raw_socket(self) -> socket.socket: ...


@dataclass
class KubeletClientConfig:
    cert: tuple[Path, Path]
    ca: Path | None = None
    preferred_address_types: tuple[str, ...] = (
        "InternalIP",
        "Hostname",
        "InternalDNS",
        "ExternalDNS",
        "ExternalIP",
    )
    default_port: int = 10250


class SocketTracker(Protocol):
    def add(self, sock: socket.socket) -> None: ...

    def discard(self, sock: socket.socket) -> None: ...


class KubeletProxy:
    def __init__(self, store: Store, config: KubeletClientConfig, tracker: SocketTracker) -> None:
        self.store = store
        self.config = config
        self.tracker = tracker

    # ----------------------------------------------------------------------- locating

    def pod(self, namespace: str, name: str) -> Obj:
        pod = self.store.get("pods", namespace, name)
        if pod is None:
            raise errors.not_found("", "pods", name)
        return pod

    def node_location(self, node_name: str) -> tuple[str, int]:
        node = self.store.get("nodes", "", node_name)
        if node is None:
            raise errors.not_found("", "nodes", node_name)
        host = preferred_address(node, self.config.preferred_address_types)
        if host is None:
            known = (node.get("status") or {}).get("addresses") or []
            raise errors.unknown(500, f"no preferred addresses found; known addresses: {known}")
        return host, kubelet_port(node, self.config.default_port)

    def _context(self, insecure: bool = False) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.load_cert_chain(*(str(p) for p in self.config.cert))
        context.set_alpn_protocols(["http/1.1"])
        if self.config.ca is None or insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        else:
            context.load_verify_locations(str(self.config.ca))
        return context

    # ----------------------------------------------------------------------- logs

    def logs(self, namespace: str, name: str, query: dict[str, list[str]], out: Downstream) -> None:
        pod = self.pod(namespace, name)
        container = validate_container(pod, _first(query, "container"))
        node_name = (pod.get("spec") or {}).get("nodeName", "")
        if not node_name:
            out.start_stream(200, [("Content-Type", "text/plain")])
            out.end_stream()
            return
        host, port = self.node_location(node_name)
        params = [(k, "true") for k in LOG_FLAGS if _first(query, k) in ("true", "1")]
        params += [(k, _first(query, k)) for k in LOG_NUMBERS if _first(query, k)]
        if _first(query, "sinceTime"):
            params.append(("sinceTime", _first(query, "sinceTime")))
        path = f"/containerLogs/{namespace}/{name}/{container}"
        if params:
            path += "?" + urlencode(params)
        insecure = _first(query, "insecureSkipTLSVerifyBackend") in ("true", "1")
        response, connection = self._request("GET", host, port, path, {}, b"", insecure)
        try:
            if not 200 <= response.status < 300:
                raise _backend_error(response, "pods/log", name)
            out.start_stream(
                200, [("Content-Type", response.getheader("Content-Type") or "text/plain")]
            )
            _relay_body(response, out)
        finally:
            self._close(connection)

    def _request(
        self,
        method: str,
        host: str,
        port: int,
        path: str,
        headers: dict[str, str],
        body: bytes,
        insecure: bool = False,
    ) -> tuple[http.client.HTTPResponse, http.client.HTTPSConnection]:
        connection = http.client.HTTPSConnection(
            host, port, timeout=DIAL_TIMEOUT, context=self._context(insecure)
        )
        try:
            connection.request(method, path, body=body or None, headers=headers)
            response = connection.getresponse()
        except OSError as exc:
            connection.close()
            url = f"https://{_join(host, port)}{path}"
            raise errors.unknown(
                500, f'{method.capitalize()} "{url}": {_dial_text(host, port, exc)}'
            ) from None
        if connection.sock is not None:
            connection.sock.settimeout(None)
            self.tracker.add(connection.sock)
        return response, connection

    def _close(self, connection: http.client.HTTPSConnection) -> None:
        if connection.sock is not None:
            self.tracker.discard(connection.sock)
        connection.close()

    # ----------------------------------------------------------------------- node proxy

    def node_proxy(
        self,
        node_name: str,
        method: str,
        rest: str,
        query: str,
        headers: dict[str, str],
        body: bytes,
        out: Downstream,
    ) -> None:
        host, port = self.node_location(node_name)
        path = "/" + rest + (f"?{query}" if query else "")
        forward = {k: v for k, v in headers.items() if k.lower() not in HOP_HEADERS}
        try:
            response, connection = self._request(method, host, port, path, forward, body)
        except errors.ApiError as exc:
            raise errors.ApiError(
                503,
                "ServiceUnavailable",
                f"error trying to reach service: {exc.message.split(': ', 1)[-1]}",
            ) from None
        try:
            passed = [(k, v) for k, v in response.getheaders() if k.lower() not in HOP_HEADERS]
            out.start_stream(response.status, passed)
            _relay_body(response, out)
        finally:
            self._close(connection)

    # ----------------------------------------------------------------------- upgrades

    def upgrade(
        self,
        kind: str,
        namespace: str,
        name: str,
        query: dict[str, list[str]],
        method: str,
        request_line_headers: list[tuple[str, str]],
        out: Downstream,
    ) -> None:
        """exec/attach/portforward: relay the upgrade to the kubelet, then splice bytes."""
        pod = self.pod(namespace, name)
        path = self._stream_path(kind, pod, query)
        node_name = (pod.get("spec") or {}).get("nodeName", "")
        if not node_name:
            raise errors.bad_request(f"pod {name} does not have a host assigned")
        host, port = self.node_location(node_name)
        try:
            raw = socket.create_connection((host, port), timeout=DIAL_TIMEOUT)
            backend = self._context().wrap_socket(raw, server_hostname=host)
        except OSError as exc:
            raise errors.unknown(
                500, "error dialing backend: " + _dial_text(host, port, exc)
            ) from None
        self.tracker.add(backend)
        try:
            self._relay_upgrade(backend, host, port, method + " " + path, request_line_headers, out)
        finally:
            self.tracker.discard(backend)
            backend.close()

    def _stream_path(self, kind: str, pod: Obj, query: dict[str, list[str]]) -> str:
        namespace, name = pod["metadata"]["namespace"], pod["metadata"]["name"]
        if kind == "portforward":
            ports = query.get("ports", [])
            params = [("port", ",".join(ports))] if ports else []
            return f"/portForward/{namespace}/{name}" + (f"?{urlencode(params)}" if params else "")
        container = validate_container(pod, _first(query, "container"))
        flags = {k: _first(query, k) in ("true", "1") for k in ("stdin", "stdout", "stderr", "tty")}
        commands = query.get("command", [])
        if kind == "exec" and not commands:
            raise errors.bad_request("you must specify at least one command for the container")
        if not (flags["stdin"] or flags["stdout"] or flags["stderr"]):
            raise errors.bad_request("you must specify at least 1 of stdin, stdout, stderr")
        # the kubelet's names for the streams, as kube-apiserver's streamParams sends them
        kubelet_names = {"stdin": "input", "stdout": "output", "stderr": "error", "tty": "tty"}
        params = [(kubelet_names[k], "1") for k in kubelet_names if flags[k]]
        if kind == "exec":
            params += [("command", c) for c in commands]
        return f"/{kind}/{namespace}/{name}/{container}?{urlencode(params)}"

    def _relay_upgrade(
        self,
        backend: ssl.SSLSocket,
        host: str,
        port: int,
        target: str,
        headers: list[tuple[str, str]],
        out: Downstream,
    ) -> None:
        lines = [f"{target} HTTP/1.1", f"Host: {_join(host, port)}"]
        lines += [
            f"{k}: {v}"
            for k, v in headers
            if k.lower() not in ("host", "authorization", "content-length")
        ]
        backend.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        head, rest = _read_head(backend)
        client = out.raw_socket()
        client.sendall(head + rest)
        if not head.split(b" ", 2)[1:2] == [b"101"]:
            _drain(backend, client)
            return
        splice(client, backend)


def validate_container(pod: Obj, container: str) -> str:
    """``validateContainer``: the named container, or the only one; 400 otherwise."""
    spec, name = pod.get("spec") or {}, pod["metadata"]["name"]
    names = [c.get("name") for kind in CONTAINER_LISTS for c in spec.get(kind) or []]
    if container:
        if container not in names:
            raise errors.bad_request(f"container {container} is not valid for pod {name}")
        return container
    containers = spec.get("containers") or []
    if len(containers) == 1:
        return str(containers[0]["name"])
    if not containers:
        raise errors.bad_request(f"a container name must be specified for pod {name}")
    raise errors.bad_request(
        f"a container name must be specified for pod {name}, choose one "
        f"of: [{' '.join(n for n in names if n)}]"
    )


def splice(a: socket.socket, b: socket.socket) -> None:
    """Copy bytes both ways until either side closes."""
    sockets: list[socket.socket] = [a, b]
    peer = {a: b, b: a}
    while True:
        ready: list[socket.socket] = [
            s for s in sockets if isinstance(s, ssl.SSLSocket) and s.pending()
        ]
        if not ready:
            ready, _, broken = select.select(sockets, [], sockets, 1.0)
            if broken:
                return
        for source in ready:
            try:
                data = source.recv(65536)
            except ssl.SSLWantReadError:
                continue
            except OSError:
                return
            if not data:
                _half_close(peer[source])
                return
            try:
                peer[source].sendall(data)
            except OSError:
                return


def _half_close(sock: socket.socket) -> None:
    try:
        sock.shutdown(socket.SHUT_WR)
    except OSError:
        pass


def _read_head(sock: socket.socket) -> tuple[bytes, bytes]:
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = sock.recv(65536)
        if not chunk:
            break
        data += chunk
    head, sep, rest = data.partition(b"\r\n\r\n")
    return head + sep, rest


def _drain(backend: socket.socket, client: socket.socket) -> None:
    backend.settimeout(5.0)
    try:
        while chunk := backend.recv(65536):
            client.sendall(chunk)
    except OSError:
        pass


def _relay_body(response: http.client.HTTPResponse, out: Downstream) -> None:
    while True:
        data = response.read1(65536) if hasattr(response, "read1") else response.read(65536)
        if not data:
            break
        out.write_chunk(data)
    out.end_stream()


def _backend_error(response: http.client.HTTPResponse, resource: str, name: str) -> errors.ApiError:
    body = response.read(4096).decode(errors="replace")
    if response.status == 500:
        return errors.internal(body)
    if response.status == 400:
        return errors.bad_request(body)
    if response.status == 404:
        return errors.ApiError(404, "NotFound", body, {"name": name, "kind": resource})
    return errors.unknown(response.status, body)


def _first(query: dict[str, list[str]], key: str) -> str:
    return (query.get(key) or [""])[0]


def _join(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _dial_text(host: str, port: int, exc: OSError) -> str:
    if isinstance(exc, ssl.SSLCertVerificationError):
        reason = exc.verify_message or str(exc)
        if "mismatch" in reason:
            reason = f"x509: certificate is not valid for {host}"
        elif "expired" in reason:
            reason = "x509: certificate has expired or is not yet valid"
        else:
            reason = "x509: certificate signed by unknown authority"
        return f"tls: failed to verify certificate: {reason}"
    if isinstance(exc, ConnectionRefusedError):
        return f"dial tcp {_join(host, port)}: connect: connection refused"
    if isinstance(exc, TimeoutError | socket.timeout):
        return f"dial tcp {_join(host, port)}: i/o timeout"
    return f"dial tcp {_join(host, port)}: {exc}"
