"""The control socket: how ``pkletd status|restart-worker|stop`` talk to the parent.

A unix stream socket ``<run-dir>/control.sock`` (0600). One request per
connection, one JSON object per line each way, so the CLI needs nothing heavier
than ``socket`` and ``json`` and answers in tens of milliseconds; a request with
``"reply": "marshal"`` gets its reply in ``marshal`` (what JSON would carry) instead,
for ``pkletd status``, which then imports no ``json`` (nor, with it, ``re``). The
connection closes after the reply.

    {"command": "status"}        -> {"ok": true, "workers": [...], "pods": [...]}
    {"command": "status", "events": true}
                                 -> the same, and "events": [...] (the recent ones)
    {"command": "restart-worker", "name": "pleg"}
                                 -> {"ok": true} | {"ok": false, "error": ..., "names": [...]}
    {"command": "stop"}          -> {"ok": true}

A thread accepts connections and hands each request to the loop thread (which owns
all state) through an ``Inbox`` it polls (``fileno()``); it answers whatever the
loop puts in the request's reply slot, or an error after ``REPLY_TIMEOUT_S``.
"""

from __future__ import annotations

import json
import logging
import marshal
import os
import queue
import socket
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pkletd.ipc.wakeup import Inbox

log = logging.getLogger(__name__)

SOCKET = "control.sock"
REPLY_TIMEOUT_S = 5.0
MAX_REQUEST = 64 * 1024
MARSHAL_VERSION = 4  # the CLI runs on the same Python as the supervisor


@dataclass
class Request:
    body: dict[str, Any]
    reply: queue.SimpleQueue[dict[str, Any]] = field(default_factory=queue.SimpleQueue)


class ControlServer:
    def __init__(self, run_dir: Path) -> None:
        path = run_dir / SOCKET
        path.unlink(missing_ok=True)
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.bind(str(path))
        os.chmod(path, 0o600)
        self._sock.listen(16)
        self._requests: Inbox[Request] = Inbox()
        self._thread = threading.Thread(target=self._serve, name="control", daemon=True)
        self._thread.start()

    def fileno(self) -> int:
        return self._requests.fileno()

    def pending(self) -> list[Request]:
        return self._requests.take()

    def close(self) -> None:
        self._sock.close()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return  # closed
            with conn:
                conn.settimeout(REPLY_TIMEOUT_S)
                try:
                    self._answer(conn)
                except (OSError, ValueError) as exc:
                    log.warning("control request failed error=%s", exc)

    def _answer(self, conn: socket.socket) -> None:
        data = b""
        while not data.endswith(b"\n") and len(data) < MAX_REQUEST:
            chunk = conn.recv(4096)
            if not chunk:
                break
            data += chunk
        try:
            body = json.loads(data)
        except json.JSONDecodeError as exc:
            conn.sendall(_line({"ok": False, "error": f"request is not JSON: {exc}"}))
            return
        if not isinstance(body, dict) or not isinstance(body.get("command"), str):
            conn.sendall(_line({"ok": False, "error": 'request must be {"command": ...}'}))
            return
        request = Request(body)
        self._requests.put(request)
        try:
            reply = request.reply.get(timeout=REPLY_TIMEOUT_S)
        except queue.Empty:
            reply = {"ok": False, "error": "the supervisor loop did not answer in time"}
        conn.sendall(_encoded(reply, body.get("reply")))


def _line(obj: dict[str, Any]) -> bytes:
    return (json.dumps(obj) + "\n").encode()


def _encoded(reply: dict[str, Any], encoding: object) -> bytes:
    if encoding != "marshal":
        return _line(reply)
    line = _line(reply)  # what JSON carries: plain types only (no str enums, no tuples)
    return marshal.dumps(json.loads(line), MARSHAL_VERSION)
