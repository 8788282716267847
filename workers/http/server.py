"""The http worker's servers: aiohttp applications on one asyncio loop, in one thread
beside the worker's lifecycle loop (which only swaps the data they read, so heartbeats
never wait for a request).

Bounds, per listener: at most ``max_connections`` open connections (more get a 503 and
are closed); an idle connection (none of a request in ``idle_timeout``, the kubelet's 90
s, counted from the connection's start) is closed; a TLS handshake has
``handshake_timeout``; request lines and header fields at most 8190 bytes and 128
headers (431/400 past that, from aiohttp's parser); bodies at most 1 MiB (413). A
follow stream or a slow client costs one coroutine, not a thread.

Each listener serves on the sockets the parent bound and the worker inherited
(``listening.py``), so a restarted worker serves what waited in the backlog. One the parent
could not bind (the port was taken) the worker binds itself: an error is logged and the
bind retried every ``bind_retry`` seconds; the other listeners serve meanwhile.

A request aiohttp cannot parse gets its 400 and no log line: aiohttp would log each at
ERROR with a traceback (``_ClientMistakes``), so any client could fill the log, and it
is no operator's to act on; the kubelet's Go server logs nothing for them either.
"""

from __future__ import annotations

import asyncio
import logging
import resource
import socket
import ssl
import threading
import time
from dataclasses import dataclass
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from pkletd.workers.http import listening
from pkletd.workers.http.options import Listen

log = logging.getLogger(__name__)


class _ClientMistakes(logging.Filter):
    """Drops aiohttp's report of a request it could not parse (request line, headers)."""

    def filter(self, record: logging.LogRecord) -> bool:
        error = record.exc_info[1] if record.exc_info else None
        return not isinstance(error, HttpProcessingError)


REQUESTS_LOG = logging.getLogger(f"{__name__}.requests")  # aiohttp's server logger, ours
REQUESTS_LOG.addFilter(_ClientMistakes())

REFUSED_BODY = b"too many connections\n"
REFUSED = (
    b"HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain; charset=utf-8\r\n"
    b"Connection: close\r\nContent-Length: " + str(len(REFUSED_BODY)).encode() + b"\r\n\r\n"
    + REFUSED_BODY
)  # fmt: skip


@dataclass(frozen=True, slots=True)
class Limits:
    max_connections: int = 512
    idle_timeout: float = 90.0
    handshake_timeout: float = 10.0
    max_line_size: int = 8190
    max_field_size: int = 8190
    max_headers: int = 128
    bind_retry: float = 10.0
    stop_timeout: float = 2.0


@dataclass(frozen=True, slots=True)
class Site:
    listen: Listen
    app: web.Application
    tls: ssl.SSLContext | None = None
    sockets: tuple[socket.socket, ...] = ()  # bound by the parent; () to bind them here


class _Refused(asyncio.Protocol):
    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        assert isinstance(transport, asyncio.WriteTransport)
        transport.write(REFUSED)
        transport.close()


class _Bounded:
    """A protocol factory that refuses connections past the listener's limit."""

    def __init__(self, server: web.Server, listen: Listen, limit: int) -> None:
        self._server = server
        self._listen = listen
        self._limit = limit
        self._last_warning = 0.0

    def __call__(self) -> asyncio.BaseProtocol:
        if len(self._server.connections) < self._limit:
            return self._server()
        now = time.monotonic()
        if now - self._last_warning > 10.0:
            self._last_warning = now
            log.warning(
                "connection refused: too many connections api=%s limit=%d",
                self._listen.api, self._limit,
            )  # fmt: skip
        return _Refused()


def raise_fd_limit(ceiling: int = 65536) -> int:
    """Raise this process's soft open-files limit towards its hard one, as Go programs
    (the kubelet) do at start: every connection is a descriptor. The new soft limit."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = min(ceiling, hard) if hard != resource.RLIM_INFINITY else ceiling
    if wanted > soft:
        resource.setrlimit(resource.RLIMIT_NOFILE, (wanted, hard))
        return wanted
    return soft


class HttpServer:
    def __init__(self, sites: list[Site], limits: Limits = Limits()) -> None:
        self._sites = sites
        self._limits = limits
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()  # bound to the loop when first awaited, in its thread
        self._thread = threading.Thread(target=self._run, name="http-server", daemon=True)
        self._bound: dict[Listen, tuple[str, int]] = {}
        self._settled: set[Listen] = set()  # serving, or waiting to bind
        self._started = threading.Event()  # every listener settled
        if not sites:
            self._started.set()
        self._lock = threading.Lock()

    def start(self, wait: float = 0.0) -> None:
        """Start the servers' thread; wait up to ``wait`` seconds for every listener to
        serve (or to have failed to bind once), so nothing else holds the GIL meanwhile."""
        self._thread.start()
        self._started.wait(wait)

    def address(self, listen: Listen) -> tuple[str, int] | None:
        """Where ``listen`` is bound (its real port when it asked for 0), None if not yet."""
        with self._lock:
            return self._bound.get(listen)

    def _settle(self, listen: Listen) -> None:
        with self._lock:
            self._settled.add(listen)
            if len(self._settled) == len(self._sites):
                self._started.set()

    def close(self) -> None:
        if self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(self._limits.stop_timeout + 2.0)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._main())
        finally:
            self._loop.close()

    async def _main(self) -> None:
        runners: list[web.AppRunner] = []
        tasks = [asyncio.create_task(self._serve(site, runners)) for site in self._sites]
        await self._stop.wait()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for runner in runners:
            await runner.cleanup()

    async def _serve(self, site: Site, runners: list[web.AppRunner]) -> None:
        runner = web.AppRunner(site.app, **self._runner_options())
        await runner.setup()
        runners.append(runner)
        assert runner.server is not None
        factory = _Bounded(runner.server, site.listen, self._limits.max_connections)
        sockets = site.sockets or await self._bind(site.listen)
        servers = [
            await asyncio.get_running_loop().create_server(
                factory,
                sock=sock,
                ssl=site.tls,
                ssl_handshake_timeout=self._limits.handshake_timeout if site.tls else None,
                backlog=listening.BACKLOG,
            )
            for sock in sockets
        ]
        host, port = sockets[0].getsockname()[:2]
        with self._lock:
            self._bound[site.listen] = (host, port)
        self._settle(site.listen)
        log.info(
            "serving api=%s address=%s:%d tls=%s inherited=%s",
            site.listen.api, host, port, bool(site.tls), bool(site.sockets),
        )  # fmt: skip
        try:
            await asyncio.Event().wait()  # until cancelled
        finally:
            for server in servers:
                server.close()  # our copies: the fork server's keep the port bound

    async def _bind(self, listen: Listen) -> tuple[socket.socket, ...]:
        """Bind ``listen`` here (the parent could not), retrying until it can be."""
        last_error = ""
        while True:
            try:
                return await asyncio.to_thread(listening.bind, listen)  # a host name resolves
            except OSError as exc:
                self._settle(listen)
                if str(exc) != last_error:
                    last_error = str(exc)
                    log.error(
                        "cannot listen api=%s address=%s:%d error=%s; retrying every %gs",
                        listen.api, listen.host, listen.port, exc, self._limits.bind_retry,
                    )  # fmt: skip
                await asyncio.sleep(self._limits.bind_retry)

    def _runner_options(self) -> dict[str, Any]:
        limits = self._limits
        return {
            "handle_signals": False,
            "access_log": None,
            "logger": REQUESTS_LOG,
            "handler_cancellation": True,
            "shutdown_timeout": limits.stop_timeout,
            "keepalive_timeout": limits.idle_timeout,
            "max_line_size": limits.max_line_size,
            "max_field_size": limits.max_field_size,
            "max_headers": limits.max_headers,
        }
