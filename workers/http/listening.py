"""The http worker's listening sockets, bound once by the parent and inherited by each
incarnation of the worker, as systemd's socket activation hands a service its sockets.

The parent binds every listener (``bind_each``) before it forks the fork server; the fork
server keeps them open and every http worker it forks inherits them (``supervisor/
forkserver.py``), and finds which is which by address (``for_listen``). So while a killed
worker restarts, the kernel still completes connections into the listen backlog, and the
next worker accepts them: a client waits, it is never refused. A listener the parent cannot
bind (its port is taken) is logged and left to the worker, which binds it itself, retrying
(``server.py``): each incarnation then binds it anew.

A socket is bound as asyncio's ``create_server`` binds one: one per address the host
resolves to, ``SO_REUSEADDR``, IPv6 ones v6-only, a backlog of ``BACKLOG``.
"""

from __future__ import annotations

import ipaddress
import logging
import socket
from collections.abc import Iterable, Sequence
from typing import Any

from pkletd.workers.http.options import Listen

log = logging.getLogger(__name__)

BACKLOG = 128


def bind(listen: Listen) -> tuple[socket.socket, ...]:
    """Listening sockets for ``listen``; OSError if one of them cannot be bound."""
    infos = socket.getaddrinfo(
        listen.host or None, listen.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
    )
    bound: list[socket.socket] = []
    try:
        for family, kind, proto, _, address in dict.fromkeys(infos):
            sock = socket.socket(family, kind, proto)
            bound.append(sock)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if family == socket.AF_INET6:
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(address)
            sock.listen(BACKLOG)
    except OSError:
        for sock in bound:
            sock.close()
        raise
    return tuple(bound)


def bind_each(listens: Iterable[Listen]) -> tuple[socket.socket, ...]:
    """Every listener's sockets (the parent's); one that cannot be bound is logged and left
    to the worker."""
    bound: list[socket.socket] = []
    for listen in listens:
        try:
            bound.extend(bind(listen))
        except OSError as exc:
            log.error(
                "cannot listen api=%s address=%s:%d error=%s; the http worker retries",
                listen.api, listen.host, listen.port, exc,
            )  # fmt: skip
    return tuple(bound)


def for_listen(sockets: Sequence[socket.socket], listen: Listen) -> tuple[socket.socket, ...]:
    """The inherited sockets that serve ``listen``: those bound to its port, and to its
    address when that is an IP address."""
    return tuple(s for s in sockets if _serves(s.getsockname(), listen))


def _serves(name: tuple[Any, ...], listen: Listen) -> bool:
    if name[1] != listen.port:
        return False
    try:
        wanted = ipaddress.ip_address(listen.host)
    except ValueError:
        return True  # a host name (or all addresses): its port tells
    return ipaddress.ip_address(str(name[0]).split("%", 1)[0]) == wanted
