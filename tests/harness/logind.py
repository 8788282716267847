"""A systemd-logind stand-in on a private system bus, for graceful node shutdown tests.

``PrivateBus`` runs Debian's ``dbus-daemon`` with a configuration of its own (a socket
under the test's tmp dir, every peer allowed, unix fd passing on), so nothing touches
the machine's bus. ``LogindStandIn`` serves, on that bus and on an asyncio loop in a
thread of the test process (dbus-fast):

- ``org.freedesktop.login1`` ``/org/freedesktop/login1``, interface
  ``org.freedesktop.login1.Manager``: ``Inhibit(ssss) -> h`` (the write end of a new
  pipe; the stand-in keeps the read end and notes when its holder closes it, as logind
  watches its FIFO), the properties ``InhibitDelayMaxUSec`` and
  ``PreparingForShutdown``, and the signal ``PrepareForShutdown(b)``;
- ``org.freedesktop.systemd1`` ``/org/freedesktop/systemd1``, ``KillUnit(ssi)``: SIGHUP
  to ``systemd-logind.service`` reads ``InhibitDelayMaxSec`` again from the drop-in
  directory it was given, as logind reloads ``logind.conf.d``.

The test asks it from its own thread: ``prepare_for_shutdown``, ``inhibitors``,
``delay_s``, ``reads`` (the properties asked for) and ``kills``.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import threading
import time
from concurrent.futures import Future
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from dbus_fast import Message, MessageType, Variant
from dbus_fast.aio import MessageBus

T = TypeVar("T")
LOGIND = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
MANAGER = "org.freedesktop.login1.Manager"
SYSTEMD = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
PROPERTIES = "org.freedesktop.DBus.Properties"
START_S = 10.0

BUS_CONFIG = """<!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
<busconfig>
  <type>custom</type>
  <listen>unix:path={socket}</listen>
  <auth>EXTERNAL</auth>
  <policy context="default">
    <allow user="*"/>
    <allow own="*"/>
    <allow send_destination="*" eavesdrop="true"/>
    <allow receive_sender="*"/>
  </policy>
</busconfig>
"""


def ensure_installed() -> str:
    path = shutil.which("dbus-daemon")
    if path is None:
        raise RuntimeError("dbus-daemon is missing: apt-get install dbus")
    return path


class PrivateBus:
    """A ``dbus-daemon`` of the test's own; ``address`` is what DBUS_SYSTEM_BUS_ADDRESS says."""

    def __init__(self, base: Path) -> None:
        base.mkdir(parents=True, exist_ok=True)
        self.socket = base / "system_bus_socket"
        self.address = f"unix:path={self.socket}"
        self._config = base / "bus.conf"
        self._config.write_text(BUS_CONFIG.format(socket=self.socket))
        self._proc: subprocess.Popen[bytes] | None = None

    def start(self) -> PrivateBus:
        command = [ensure_installed(), f"--config-file={self._config}", "--nofork", "--nopidfile"]
        self._proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + START_S
        while not self.socket.exists():
            if self._proc.poll() is not None or time.monotonic() > deadline:
                error = self._proc.stderr.read().decode() if self._proc.stderr else ""
                self.stop()
                raise RuntimeError(f"dbus-daemon did not start: {error}")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        if self._proc is None:
            return
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(10)
            except subprocess.TimeoutExpired:
                self._proc.kill()
                self._proc.wait()
        if self._proc.stderr is not None:
            self._proc.stderr.close()
        self._proc = None


@dataclass
class Inhibitor:
    """One lock the stand-in handed out; ``closed_at`` (monotonic) once its holder closed it."""

    what: str
    who: str
    why: str
    mode: str
    taken_at: float
    read_fd: int
    closed_at: float | None = None

    @property
    def open(self) -> bool:
        return self.closed_at is None


class LogindStandIn:
    def __init__(self, address: str, delay_s: float, conf_dir: Path) -> None:
        self._address = address
        self._delay_usec = int(delay_s * 1e6)
        self._conf_dir = conf_dir
        self._preparing = False
        self._inhibitors: list[Inhibitor] = []
        self.kills: list[tuple[str, str, int]] = []
        self.reads: list[str] = []  # the properties asked for, in order
        self._loop = asyncio.new_event_loop()
        self._bus: MessageBus | None = None
        self._thread = threading.Thread(target=self._loop.run_forever, name="logind-standin")

    # --- the test's side ---------------------------------------------------------------

    def start(self) -> LogindStandIn:
        self._thread.start()
        self._call(self._connect())
        return self

    def stop(self) -> None:
        if self._thread.is_alive():
            self._call(self._disconnect())
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(10)
        self._loop.close()
        for inhibitor in self._inhibitors:
            if inhibitor.read_fd >= 0:
                os.close(inhibitor.read_fd)
                inhibitor.read_fd = -1

    def prepare_for_shutdown(self, active: bool) -> float:
        """Announce (or cancel) a shutdown; the monotonic time it was sent."""
        return self._call(self._emit(active))

    def inhibitors(self) -> list[Inhibitor]:
        """Every lock handed out, oldest first (as they were when it stopped, after)."""
        if not self._thread.is_alive():
            return [Inhibitor(**vars(i)) for i in self._inhibitors]
        return self._call(self._copy())

    def delay_s(self) -> float:
        return self._delay_usec / 1e6

    # --- the loop's side ------------------------------------------------------------------

    def _call(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self._loop)
        return future.result(START_S)

    async def _connect(self) -> None:
        bus = MessageBus(bus_address=self._address, negotiate_unix_fd=True)
        await bus.connect()
        bus.add_message_handler(self._on_message)
        for name in (LOGIND, SYSTEMD):
            await bus.request_name(name)
        self._bus = bus

    async def _disconnect(self) -> None:
        if self._bus is not None:
            self._bus.disconnect()
            await self._bus.wait_for_disconnect()
        for inhibitor in self._inhibitors:
            if inhibitor.read_fd >= 0:
                self._loop.remove_reader(inhibitor.read_fd)

    async def _emit(self, active: bool) -> float:
        assert self._bus is not None
        self._preparing = active
        signal = Message.new_signal(LOGIND_PATH, MANAGER, "PrepareForShutdown", "b", [active])
        await self._bus.send(signal)
        return time.monotonic()

    async def _copy(self) -> list[Inhibitor]:
        return [Inhibitor(**vars(i)) for i in self._inhibitors]

    def _on_message(self, message: Message) -> Message | bool | None:
        if message.message_type is not MessageType.METHOD_CALL:
            return None
        key = (message.path, message.interface, message.member)
        if key == (LOGIND_PATH, PROPERTIES, "Get"):
            return self._get(message)
        if key == (LOGIND_PATH, MANAGER, "Inhibit"):
            return self._inhibit(message)
        if key == (SYSTEMD_PATH, f"{SYSTEMD}.Manager", "KillUnit"):
            return self._kill_unit(message)
        return None

    def _get(self, message: Message) -> Message:
        _, name = message.body
        self.reads.append(name)
        values = {
            "InhibitDelayMaxUSec": Variant("t", self._delay_usec),
            "PreparingForShutdown": Variant("b", self._preparing),
        }
        if name not in values:
            return Message.new_error(message, "org.freedesktop.DBus.Error.UnknownProperty", name)
        return Message.new_method_return(message, "v", [values[name]])

    def _inhibit(self, message: Message) -> bool:
        what, who, why, mode = message.body
        read, write = os.pipe()
        inhibitor = Inhibitor(what, who, why, mode, time.monotonic(), read)
        self._inhibitors.append(inhibitor)
        self._loop.add_reader(read, self._on_lock_readable, inhibitor)
        reply = Message.new_method_return(message, "h", [0], unix_fds=[write])
        assert self._bus is not None
        sent = self._bus.send(reply)
        sent.add_done_callback(lambda _: os.close(write))  # the holder has its own copy now
        return True  # answered here

    def _on_lock_readable(self, inhibitor: Inhibitor) -> None:
        if os.read(inhibitor.read_fd, 4096):
            return
        inhibitor.closed_at = time.monotonic()
        self._loop.remove_reader(inhibitor.read_fd)

    def _kill_unit(self, message: Message) -> Message:
        unit, who, signal = message.body
        self.kills.append((unit, who, signal))
        if unit == "systemd-logind.service" and signal == 1:
            self._reload()
        return Message.new_method_return(message)

    def _reload(self) -> None:
        """Read InhibitDelayMaxSec from the drop-ins, the last one in name order winning."""
        for path in sorted(self._conf_dir.glob("*.conf")):
            found = re.findall(r"^InhibitDelayMaxSec=(\d+)$", path.read_text(), re.MULTILINE)
            if found:
                self._delay_usec = int(found[-1]) * 1_000_000
