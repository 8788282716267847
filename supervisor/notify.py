"""systemd's notify protocol (sd_notify), spoken directly over NOTIFY_SOCKET.

READY=1 once the workers are up, WATCHDOG=1 every WatchdogSec/2 while every
running worker's heartbeat is fresh (only the main pid may send it), STOPPING=1
on shutdown. Without NOTIFY_SOCKET (not under systemd) every call does nothing.
"""

from __future__ import annotations

import logging
import os
import socket

log = logging.getLogger(__name__)


class Notifier:
    def __init__(self, environ: dict[str, str] | None = None) -> None:
        env = dict(os.environ if environ is None else environ)
        self._address = env.get("NOTIFY_SOCKET", "")
        if self._address.startswith("@"):
            self._address = "\0" + self._address[1:]
        usec = env.get("WATCHDOG_USEC", "")
        pid = env.get("WATCHDOG_PID", "")
        ours = not pid or pid == str(os.getpid())
        self.watchdog_interval = int(usec) / 1e6 / 2 if usec.isdigit() and ours else 0.0

    def send(self, state: str) -> None:
        if not self._address:
            return
        with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sock:
            try:
                sock.sendto(state.encode(), self._address)
            except OSError as exc:
                log.warning("sd_notify failed state=%s error=%s", state, exc)
