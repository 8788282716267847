"""Taking a connection over after ``101 Switching Protocols``: what ``/exec``, ``/attach``
and ``/portForward`` need to proxy the client's raw bytes to and from the runtime's
streaming server (the kubelet's UpgradeAwareHandler).

aiohttp has no public hijack; this does what its own WebSocketResponse does: install a
parser that hands every byte the client sends to a ``StreamReader``
(``RawConnection.reader``), then send the 101 through a prepared response; writes go out
unframed. The StreamReader pauses the socket when its buffer is full, so memory stays
bounded. The handler returns ``RawConnection.response`` once both directions are done; aiohttp then
closes the connection. Only this module touches aiohttp's internals (``set_parser``, as
aiohttp's own WebSocketResponse uses it).

aiohttp's parser treats only ``Upgrade: websocket`` as an upgrade (against request
smuggling); for any other protocol (``SPDY/3.1``) bytes a client sent before the switch
would be parsed as a next request. The parser is installed before the 101 goes out, and
SPDY clients wait for the 101 before they send, so nothing is lost.
``streamproxy.proxy_upgrade`` is the user:

    raw = await switch_protocols(request, [("Upgrade", "SPDY/3.1"), ("Connection", "Upgrade")])
    ... raw.reader.read() / await raw.write(data) ...
    raw.close()
    return raw.response
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping, Sequence

from aiohttp import web

BUFFER_LIMIT = 256 * 1024


class _RawFeeder:
    """The parser aiohttp feeds once the connection is switched: bytes in, no framing."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self._reader.feed_data(data)
        return False, b""

    def feed_eof(self) -> None:
        self._reader.feed_eof()


class RawConnection:
    def __init__(self, response: web.StreamResponse, reader: asyncio.StreamReader) -> None:
        self.response = response
        self.reader = reader

    async def write(self, data: bytes) -> None:
        await self.response.write(data)

    def close(self) -> None:
        self.response.force_close()
        self.reader.feed_eof()


async def switch_protocols(
    request: web.Request, headers: Mapping[str, str] | Sequence[tuple[str, str]]
) -> RawConnection:
    """Answer 101 with ``headers`` (``Upgrade``, ``Connection`` and the protocol's own) and
    return the connection as raw bytes both ways."""
    reader = asyncio.StreamReader(limit=BUFFER_LIMIT)
    if request.transport is not None:
        reader.set_transport(request.transport)
    request.protocol.set_parser(_RawFeeder(reader))  # type: ignore[arg-type]
    response = web.StreamResponse(status=101, headers=headers)
    response.force_close()
    await response.prepare(request)
    return RawConnection(response, reader)
