"""The kubelet API's filter: every request on the authenticated port is authenticated
(401 ``Unauthorized``), then authorized (403 ``Forbidden (user=..., verb=...,
resource=nodes, subresource=...)``, or 500 ``Authorization error (...)`` when the API
server cannot answer), before any route runs, unknown paths included."""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.http.authn import Authenticator, Unauthenticated, User
from pkletd.workers.http.authz import Authorizer, attributes
from pkletd.workers.http.reviews import ReviewUnavailable

log = logging.getLogger(__name__)

USER_KEY = web.RequestKey("user", User)
ERROR_LOG_EVERY_S = 10.0
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Throttle:
    """At most one ``due()`` per ``every`` seconds: an API server that is down fails every
    request, and one line says so as well as a thousand."""

    def __init__(self, every: float, clock: Clock = SYSTEM_CLOCK) -> None:
        self._every = every
        self._clock = clock
        self._last = -every

    def due(self) -> bool:
        now = self._clock.monotonic()
        if now - self._last < self._every:
            return False
        self._last = now
        return True


def auth_filter(authn: Authenticator, authz: Authorizer, node: str) -> Any:
    throttle = Throttle(ERROR_LOG_EVERY_S)

    @web.middleware
    async def middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        try:
            user = await authn.authenticate(peer, request.headers.get("Authorization"))
        except Unauthenticated as exc:
            failed = isinstance(exc.__cause__, ReviewUnavailable)
            level = logging.WARNING if failed and throttle.due() else logging.DEBUG
            log.log(level, "unauthenticated path=%s peer=%s reason=%s", request.path,
                    request.remote, exc)  # fmt: skip
            return web.Response(status=401, text="Unauthorized")
        tried = attributes(user, request.method, request.path, node)
        for attrs in tried:
            try:
                allowed = await authz.authorize(attrs)
            except ReviewUnavailable as exc:
                if throttle.due():
                    log.error(
                        "authorization error user=%s verb=%s subresource=%s reason=%s "
                        "(at most one such line per %gs)",
                        user.name, attrs.verb, attrs.subresource, exc, ERROR_LOG_EVERY_S,
                    )  # fmt: skip
                return web.Response(status=500, text=attrs.error())
            if allowed:
                request[USER_KEY] = user
                return await handler(request)
        last = tried[-1]
        log.debug("forbidden user=%s verb=%s path=%s", user.name, last.verb, request.path)
        return web.Response(status=403, text=last.forbidden())

    return middleware
