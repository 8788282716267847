"""The HTTP/1.1 request handler: authentication, authorization, accounting, response writing.

One instance per request on a TLS connection (keep-alive). It turns the request into a
``RequestInfo``, authenticates (client cert, bearer token), asks the authorizer (403 with the
real message), hands the request to the router, answers an ``ApiError`` with its Status, and
records the request (``metrics.RequestLog``). Streams (watches, logs, proxied bodies) use
chunked transfer encoding; an upgraded connection is handed over as a raw socket.
"""

from __future__ import annotations

import json
import logging
import socket
import ssl
import time
import uuid
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote, urlsplit

from tests.harness.apiserver import auth, errors
from tests.harness.apiserver.calls import Query
from tests.harness.apiserver.encoding import encode
from tests.harness.apiserver.metrics import RequestRecord, metric_verb, scope_of
from tests.harness.apiserver.requestinfo import RequestInfo, parse

if TYPE_CHECKING:
    from tests.harness.apiserver.server import ApiHttpServer

log = logging.getLogger(__name__)
CONNECT_SUBRESOURCES = ("exec", "attach", "portforward", "proxy")
STREAM_ERRORS = (BrokenPipeError, ConnectionResetError, ssl.SSLError, socket.timeout, OSError)


class ApiHandler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: ApiHttpServer

    def log_message(self, format: str, *args: Any) -> None:
        log.debug("%s %s", self.address_string(), format % args)

    def send_response(self, code: int, message: str | None = None) -> None:
        self.log_request(code)
        self.send_response_only(code, message)
        self.send_header("Date", self.date_time_string())
        self.code = code

    def do_GET(self) -> None:
        self.serve()

    do_POST = do_PUT = do_PATCH = do_DELETE = do_GET

    # ----------------------------------------------------------------------- serving

    def serve(self) -> None:
        self.code = 0
        self.streaming = False
        self.dry_run = False
        self.body_read = False
        started = time.monotonic()
        url = urlsplit(self.path)
        self.query = Query(url.query)
        info = parse(self.command, unquote(url.path), self.query)
        user: auth.UserInfo | None = None
        app = self.server.app
        try:
            peer = (
                self.connection.getpeercert()
                if isinstance(self.connection, ssl.SSLSocket)
                else None
            )
            user = app.authenticator.authenticate(peer, self.headers.get("Authorization"))
            self._authorize(user, info)
            self.dry_run = bool(self.query.all("dryRun"))
            app.router.route(self, info, user)
        except errors.ApiError as exc:
            self._discard_body()
            self._fail(exc)
        except STREAM_ERRORS:
            self.close_connection = True
        except Exception as exc:  # the process's top level for this request
            log.exception("request failed: %s %s", self.command, self.path)
            self._fail(errors.internal(f"{type(exc).__name__}: {exc}"))
        finally:
            self._account(info, user, time.monotonic() - started)

    def _authorize(self, user: auth.UserInfo, info: RequestInfo) -> None:
        attributes = auth.Attributes(
            user,
            info.verb,
            info.resource_request,
            info.path,
            info.namespace,
            info.group,
            info.version,
            info.resource,
            info.subresource,
            info.authorized_name,
            info.field_selector,
        )
        decision = self.server.app.authorizer(attributes)
        if not decision.allowed:
            raise auth.forbidden(attributes, decision.reason)

    def _fail(self, exc: errors.ApiError) -> None:
        if self.streaming:
            self.close_connection = True
            return
        try:
            self.send_object(exc.code, exc.status())
        except STREAM_ERRORS:
            self.close_connection = True

    def _account(self, info: RequestInfo, user: auth.UserInfo | None, seconds: float) -> None:
        connect = info.subresource in CONNECT_SUBRESOURCES
        verb = metric_verb(self.command, info.verb, info.subresource, connect)
        if not info.resource_request:
            verb = self.command
        record = RequestRecord(
            when=time.time(),
            user=user.name if user else "",
            path=info.path,
            user_agent=self.headers.get("User-Agent", ""),
            verb=verb,
            method=self.command,
            group=info.group,
            version=info.version,
            resource=info.resource,
            subresource=info.subresource,
            namespace=info.namespace,
            name=info.name,
            scope=scope_of(info.resource_request, info.verb, info.name, info.namespace),
            code=self.code,
        )
        self.server.app.request_log.record(record, self.dry_run, seconds)

    # ----------------------------------------------------------------------- reading

    def _discard_body(self) -> None:
        """Read a body a failed request left (a 403 comes before it is read): left in the
        stream, it would be taken for the next request and the connection reset under the
        answer."""
        if self.body_read or self.streaming:
            return
        try:
            self.read_body()
        except (*STREAM_ERRORS, ValueError):
            self.close_connection = True

    def read_body(self) -> bytes:
        self.body_read = True
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            return self._read_chunked()
        length = int(self.headers.get("Content-Length") or 0)
        return self.rfile.read(length) if length else b""

    def _read_chunked(self) -> bytes:
        body = b""
        while True:
            size = int(self.rfile.readline().split(b";", 1)[0].strip() or b"0", 16)
            if size == 0:
                while self.rfile.readline() not in (b"\r\n", b"\n", b""):
                    pass
                return body
            body += self.rfile.read(size)
            self.rfile.readline()

    # ----------------------------------------------------------------------- writing

    def _common_headers(self, warnings: Sequence[str] = ()) -> None:
        self.send_header("Audit-Id", str(uuid.uuid4()))
        self.send_header("Cache-Control", "no-cache, private")
        for warning in warnings:
            self.send_header("Warning", f"299 - {json.dumps(warning)}")

    def send_object(
        self,
        code: int,
        obj: Any,
        media: str = "application/json",
        content_type: str = "",
        warnings: Sequence[str] = (),
    ) -> None:
        data = encode(obj, media)
        self.send_response(code)
        self._common_headers(warnings)
        self.send_header("Content-Type", content_type or media)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def send_text(
        self, code: int, text: str, content_type: str = "text/plain; charset=utf-8"
    ) -> None:
        data = text.encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def start_stream(self, code: int, headers: Sequence[tuple[str, str]]) -> None:
        self.send_response(code)
        self._common_headers()
        for key, value in headers:
            if key.lower() not in ("content-length", "transfer-encoding", "connection"):
                self.send_header(key, value)
        self.send_header("Transfer-Encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        self.streaming = True

    def write_chunk(self, data: bytes) -> None:
        if data:
            self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
            self.wfile.flush()

    def end_stream(self) -> None:
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()

    def write_event(self, event: Any) -> None:
        self.write_chunk(encode(event))

    def raw_socket(self) -> socket.socket:
        """The connection itself, for an upgrade; it is closed when the request ends."""
        self.wfile.flush()
        self.close_connection = True
        self.streaming = True
        self.code = self.code or 101
        connection: socket.socket = self.connection
        return connection

    def peer_gone(self) -> bool:
        """Whether the client hung up (checked while a watch is idle)."""
        sock = self.connection
        try:
            sock.settimeout(0)
            data: bytes = sock.recv(1)
            return not data
        except (ssl.SSLWantReadError, BlockingIOError):
            return False
        except OSError:
            return True
        finally:
            try:
                sock.settimeout(None)
            except OSError:
                pass
