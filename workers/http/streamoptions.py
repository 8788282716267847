"""What a streaming request asks for, read as the kubelet reads it.

- exec and attach (``remotecommand.NewOptions``): the streams are the query's ``input``,
  ``output``, ``error`` and ``tty``, each on only as ``1``: what kube-apiserver sends the
  kubelet for a client's ``stdin``, ``stdout``, ``stderr`` and ``tty`` (``streamParams``
  of its pod registry); with ``tty`` there is no separate stderr, so ``error`` is dropped;
  none of the three streams is a 400 ``you must specify at least 1 of stdin, stdout,
  stderr``. exec's command is every ``command`` value, in order.
- ``/run``: its command is the one ``cmd`` value split on single spaces.
- port-forward (``portforward.NewV4Options``): SPDY clients name their ports in stream
  headers, so only a WebSocket request reads ``port`` (repeated or comma-separated, each
  1..65535), with the kubelet's 400s.
- Upgrades (``httpstream.IsUpgradeRequest``, ``wsstream.IsWebSocketRequest``): any
  ``Connection`` value containing ``upgrade``; WebSocket when ``Upgrade`` is
  ``websocket`` as well.
"""

from __future__ import annotations

from multidict import MultiMapping
from pkletd.ipc.runtime.cri import StreamFlags

ON = "1"
MAX_PORT = 65535


class BadStreamRequest(Exception):
    """A request the kubelet answers 400 to, in its words."""


def stream_flags(query: MultiMapping[str]) -> StreamFlags:
    tty = query.get("tty") == ON
    stdin, stdout = query.get("input") == ON, query.get("output") == ON
    stderr = query.get("error") == ON and not tty
    if not (stdin or stdout or stderr):
        raise BadStreamRequest("you must specify at least 1 of stdin, stdout, stderr")
    return StreamFlags(stdin=stdin, stdout=stdout, stderr=stderr, tty=tty)


def exec_command(query: MultiMapping[str]) -> tuple[str, ...]:
    return tuple(query.getall("command", []))


def run_command(query: MultiMapping[str]) -> tuple[str, ...]:
    return tuple(query.get("cmd", "").split(" "))


def is_upgrade_request(headers: MultiMapping[str]) -> bool:
    return any("upgrade" in value.lower() for value in headers.getall("Connection", []))


def is_websocket_request(headers: MultiMapping[str]) -> bool:
    return headers.get("Upgrade", "").lower() == "websocket" and is_upgrade_request(headers)


def forwarded_ports(query: MultiMapping[str], headers: MultiMapping[str]) -> tuple[int, ...]:
    """The ports a port-forward request names; () for SPDY, which names them per stream."""
    if not is_websocket_request(headers):
        return ()
    values = query.getall("port", [])
    if not values:
        raise BadStreamRequest('query parameter "port" is required')
    ports = []
    for value in values:
        if not value:
            raise BadStreamRequest('query parameter "port" cannot be empty')
        ports += [_port(text, value) for text in value.split(",")]
    return tuple(ports)


def _port(text: str, value: str) -> int:
    """One port as Go's ``strconv.ParseUint(text, 10, 16)`` reads it, then > 0."""
    problem = ""
    if not (text.isascii() and text.isdigit()):
        problem = "invalid syntax"
    elif int(text) > MAX_PORT:
        problem = "value out of range"
    if problem:
        raise BadStreamRequest(
            f'unable to parse "{value}" as a port: strconv.ParseUint: parsing "{text}": {problem}'
        )
    if int(text) < 1:
        raise BadStreamRequest(f'port "{value}" must be > 0')
    return int(text)
