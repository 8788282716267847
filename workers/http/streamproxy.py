"""Proxying an upgrade to the runtime's streaming server, as the kubelet's
UpgradeAwareHandler does for ``/exec``, ``/attach`` and ``/portForward``.

The client's request goes to the URL the runtime gave (CRI Exec/Attach/PortForward) with
its method and headers (``Upgrade``, ``Connection``, ``X-Stream-Protocol-Version``,
``Sec-WebSocket-*``...) and ``X-Forwarded-For`` appended; not its ``Authorization``,
which is the kubelet API's business, not the runtime's. The runtime's answer decides:

- 101: the same 101 (its headers) goes to the client, then bytes are copied both ways
  until either side closes, when both are closed (``Splice``);
- 400 and up (a WebSocket subprotocol the runtime does not speak, a bad port): its
  status, headers and body go to the client as they are, and the connection closes;
- anything else: 500 ``invalid upgrade response: status code N``; a runtime that cannot
  be reached: 500 ``error dialing backend: ...``.

Each direction holds at most a read buffer, and waits for the other side to take what it
wrote. A stream with no byte either way for ``idle_timeout`` seconds (the
KubeletConfiguration's ``streamingConnectionIdleTimeout``; 0: none) is closed.
"""

from __future__ import annotations

import asyncio
import logging
import ssl
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

from aiohttp import web
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.http.upgrade import BUFFER_LIMIT, RawConnection, switch_protocols

log = logging.getLogger(__name__)

CHUNK = 64 * 1024
DIAL_TIMEOUT_S = 30.0
HEAD_TIMEOUT_S = 30.0  # for the runtime's answer to the upgrade request
ERROR_BODY_TIMEOUT_S = 10.0  # the kubelet's deadline for relaying a refusal
MAX_ERROR_BODY = 1 << 20
NOT_SENT = ("host", "authorization", "content-length", "transfer-encoding")
NOT_RELAYED = ("content-length", "transfer-encoding", "connection", "keep-alive")


@dataclass(frozen=True, slots=True)
class Head:
    """The runtime's answer to the upgrade request, before any body."""

    status: int
    reason: str
    headers: list[tuple[str, str]]


class BadHead(Exception):
    """The runtime's answer is not an HTTP response head."""


async def proxy_upgrade(request: web.Request, url: str, idle_timeout: float) -> web.StreamResponse:
    """Serve ``request`` (an upgrade) from the streaming server at ``url``."""
    target = urlsplit(url)
    try:
        reader, writer = await asyncio.wait_for(_dial(target), DIAL_TIMEOUT_S)
    except (OSError, TimeoutError) as exc:
        return _failure(f"error dialing backend: {_dial_text(target, exc)}")
    try:
        writer.write(request_head(request, target))
        await writer.drain()
        head = parse_head(await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), HEAD_TIMEOUT_S))
        if head.status == 101:
            raw = await switch_protocols(request, head.headers)
            await Splice(raw, reader, writer, idle_timeout, request.path).run()
            raw.close()
            return raw.response
        if head.status >= 400:
            return await _refusal(head, reader)
        return _failure(f"invalid upgrade response: status code {head.status}")
    except (OSError, TimeoutError, asyncio.IncompleteReadError, asyncio.LimitOverrunError,
            BadHead) as exc:  # fmt: skip
        log.info("stream proxy failed path=%s url=%s error=%r", request.path, url, exc)
        return _failure(f"error proxying to the runtime: {exc!r}")
    finally:
        writer.close()


async def _dial(target: SplitResult) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
    tls = ssl.create_default_context() if target.scheme == "https" else None
    port = target.port or (443 if tls else 80)
    return await asyncio.open_connection(target.hostname, port, ssl=tls, limit=BUFFER_LIMIT)


def request_head(request: web.Request, target: SplitResult) -> bytes:
    """The client's upgrade request, aimed at the runtime's URL."""
    path = (target.path or "/") + (f"?{target.query}" if target.query else "")
    lines = [f"{request.method} {path} HTTP/1.1", f"Host: {target.netloc}"]
    forwarded = ""
    for name, value in request.raw_headers:
        key = name.decode("latin-1")
        if key.lower() == "x-forwarded-for":
            forwarded = value.decode("latin-1")
        elif key.lower() not in NOT_SENT:
            lines.append(f"{key}: {value.decode('latin-1')}")
    client = request.remote or ""
    lines.append(f"X-Forwarded-For: {forwarded + ', ' + client if forwarded else client}")
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def parse_head(data: bytes) -> Head:
    lines = data.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    if len(parts) < 2 or not parts[0].startswith("HTTP/") or not parts[1].isdigit():
        raise BadHead(f"not an HTTP response: {lines[0][:80]!r}")
    headers = []
    for line in lines[1:]:
        if line:
            name, sep, value = line.partition(":")
            if not sep:
                raise BadHead(f"malformed header line: {line[:80]!r}")
            headers.append((name.strip(), value.strip()))
    return Head(int(parts[1]), parts[2] if len(parts) > 2 else "", headers)


async def _refusal(head: Head, reader: asyncio.StreamReader) -> web.Response:
    """The runtime's error answer, relayed whole (its body ends with the connection, or
    at its Content-Length)."""
    length = next((v for k, v in head.headers if k.lower() == "content-length"), "")
    size = min(int(length), MAX_ERROR_BODY) if length.isdigit() else MAX_ERROR_BODY
    try:
        body = await asyncio.wait_for(_read_up_to(reader, size), ERROR_BODY_TIMEOUT_S)
    except (OSError, TimeoutError):
        body = b""
    headers = [(k, v) for k, v in head.headers if k.lower() not in NOT_RELAYED]
    response = web.Response(status=head.status, reason=head.reason or None, body=body)
    for name, value in headers:
        response.headers.add(name, value)
    response.force_close()
    return response


async def _read_up_to(reader: asyncio.StreamReader, size: int) -> bytes:
    body = b""
    while len(body) < size and (chunk := await reader.read(size - len(body))):
        body += chunk
    return body


class Splice:
    """Bytes both ways between the client and the runtime until either side closes, or
    neither has sent anything for ``idle_timeout`` seconds."""

    def __init__(
        self,
        client: RawConnection,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        idle_timeout: float,
        path: str,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._client = client
        self._reader = reader
        self._writer = writer
        self._idle_timeout = idle_timeout
        self._path = path
        self._clock = clock
        self._last = self._clock.monotonic()

    async def run(self) -> None:
        tasks = [asyncio.create_task(self._to_runtime()), asyncio.create_task(self._to_client())]
        if self._idle_timeout > 0:
            tasks.append(asyncio.create_task(self._watch_idle()))
        try:
            await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

    async def _to_runtime(self) -> None:
        try:
            while data := await self._client.reader.read(CHUNK):
                self._last = self._clock.monotonic()
                self._writer.write(data)
                await self._writer.drain()
        except OSError:
            pass

    async def _to_client(self) -> None:
        try:
            while data := await self._reader.read(CHUNK):
                self._last = self._clock.monotonic()
                await self._client.write(data)
        except OSError:
            pass

    async def _watch_idle(self) -> None:
        while (left := self._last + self._idle_timeout - self._clock.monotonic()) > 0:
            await asyncio.sleep(left)
        log.info("stream closed: idle path=%s idle_timeout=%gs", self._path, self._idle_timeout)


def _failure(message: str) -> web.Response:
    """The kubelet's proxy errors: 500 with the error's text (Go's http.Error)."""
    response = web.Response(status=500, text=message + "\n", content_type="text/plain")
    response.headers["X-Content-Type-Options"] = "nosniff"
    return response


def _dial_text(target: SplitResult, exc: BaseException) -> str:
    where = f"{target.hostname}:{target.port}"
    if isinstance(exc, ConnectionRefusedError):
        return f"dial tcp {where}: connect: connection refused"
    if isinstance(exc, TimeoutError):
        return f"dial tcp {where}: i/o timeout"
    return f"dial tcp {where}: {exc}"
