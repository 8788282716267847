"""Playing systemd for the soak's pkletd, by the settings of ``etc/pkletd.service``.

``Unit.read()`` takes what a restart depends on from the unit file itself (RestartSec,
WatchdogSec), so the soak restarts pkletd as that unit would. ``NotifySocket`` is
systemd's end of NOTIFY_SOCKET: a datagram socket with SO_PASSCRED, read on a thread,
keeping each notification with the sender's pid (NotifyAccess=main: only the main pid
counts). From it the soak learns when a start is done (READY=1) and whether the
watchdog would ever have fired (a gap between two WATCHDOG=1 of one main pid longer than
WatchdogSec). The command runs as ``sh -c 'WATCHDOG_PID=$$ exec ...'``, so the main pid
finds its own pid in WATCHDOG_PID as under systemd.
"""

from __future__ import annotations

import os
import re
import select
import socket
import struct
import threading
import time
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

from tests.harness.node import REPO

UNIT = REPO / "etc" / "pkletd.service"
UCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid
WITH_OWN_PID = 'WATCHDOG_PID=$$ exec "$0" "$@"'


def _seconds(value: str) -> float:
    match = re.fullmatch(r"(\d+(?:\.\d+)?)(ms|s|min)?", value)
    if match is None:
        raise ValueError(f"{UNIT}: cannot read the time span {value!r}")
    scale = {"ms": 0.001, "s": 1.0, "min": 60.0, None: 1.0}[match[2]]
    return float(match[1]) * scale


@dataclass(frozen=True)
class Unit:
    restart_s: float
    watchdog_s: float

    @classmethod
    def read(cls, path: Path = UNIT) -> Unit:
        service: dict[str, str] = {}
        section = ""
        for raw in path.read_text().splitlines():
            line = raw.strip()
            if line.startswith("["):
                section = line
            elif section == "[Service]" and "=" in line and not line.startswith("#"):
                key, _, value = line.partition("=")
                service[key.strip()] = value.strip()
        return cls(_seconds(service["RestartSec"]), _seconds(service["WatchdogSec"]))

    def command(self, argv: list[str]) -> list[str]:
        return ["/bin/sh", "-c", WITH_OWN_PID, *argv]

    def environment(self, notify_socket: Path) -> dict[str, str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("NOTIFY_", "WATCHDOG_"))}
        env["NOTIFY_SOCKET"] = str(notify_socket)
        env["WATCHDOG_USEC"] = str(int(self.watchdog_s * 1_000_000))
        return env


class NotifySocket:
    """Notifications by sender pid: ``READY=1`` times and ``WATCHDOG=1`` times."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_PASSCRED, 1)
        self._sock.bind(str(path))
        self._lock = threading.Lock()
        self._ready: dict[int, float] = {}
        self._pings: dict[int, list[float]] = defaultdict(list)
        self._stop_r, self._stop_w = os.pipe()
        self._thread = threading.Thread(target=self._read, name="soak-notify", daemon=True)
        self._thread.start()

    def _read(self) -> None:
        while True:
            ready, _, _ = select.select([self._sock, self._stop_r], [], [])
            if self._stop_r in ready:
                return
            data, ancillary, _, _ = self._sock.recvmsg(4096, socket.CMSG_SPACE(UCRED.size))
            pid = next(
                (
                    UCRED.unpack(p[: UCRED.size])[0]
                    for lvl, kind, p in ancillary
                    if lvl == socket.SOL_SOCKET and kind == socket.SCM_CREDENTIALS
                ),
                0,
            )
            self._note(pid, data.decode(errors="replace").splitlines(), time.monotonic())

    def _note(self, pid: int, lines: list[str], at: float) -> None:
        with self._lock:
            if "READY=1" in lines:
                self._ready.setdefault(pid, at)
            if "WATCHDOG=1" in lines:
                self._pings[pid].append(at)

    def ready_at(self, pid: int) -> float | None:
        with self._lock:
            return self._ready.get(pid)

    def longest_silence(self, pid: int, until: float) -> float:
        """The longest time ``pid`` went without a WATCHDOG=1 from its READY=1 to ``until``
        (its death, or now): systemd aborts a service silent for WatchdogSec."""
        with self._lock:
            start = self._ready.get(pid)
            if start is None:
                return 0.0
            marks = [start, *self._pings.get(pid, []), until]
        return max(b - a for a, b in zip(marks, marks[1:], strict=False))

    def close(self) -> None:
        os.write(self._stop_w, b"x")
        self._thread.join(timeout=10)
        for fd in (self._stop_r, self._stop_w):
            os.close(fd)
        self._sock.close()
