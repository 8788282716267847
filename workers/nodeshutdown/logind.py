"""systemd-logind over the system D-Bus: the ``Logind`` seam and the real one (dbus-fast).

What the node-shutdown worker asks of logind is what the kubelet asks
(``pkg/kubelet/nodeshutdown/systemd``): the ``InhibitDelayMaxUSec`` property, a
``delay`` inhibitor lock from ``Inhibit`` (a file descriptor: the lock lasts while it is
open), the ``PrepareForShutdown`` signal, and a reload of logind's configuration
(systemd's ``KillUnit`` sending SIGHUP to ``systemd-logind.service``). Beyond the kubelet,
it reads ``PreparingForShutdown`` on connecting (a shutdown announced while the worker
was down) and takes a signal only from the bus name's owner, not from any peer that
sends one to it directly. A change of that owner (logind restarted: the lock went with
it) ends the connection, as a dropped bus does; the worker then connects again.

Every call has a deadline; a failure is a ``LogindError`` saying which call and why.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Callable
from typing import Any, Protocol

from dbus_fast import BusType, Message, MessageType
from dbus_fast.aio import MessageBus
from dbus_fast.errors import DBusFastError

LOGIND = "org.freedesktop.login1"
LOGIND_PATH = "/org/freedesktop/login1"
MANAGER = "org.freedesktop.login1.Manager"
SYSTEMD = "org.freedesktop.systemd1"
SYSTEMD_PATH = "/org/freedesktop/systemd1"
DBUS = "org.freedesktop.DBus"
DBUS_PATH = "/org/freedesktop/DBus"
PROPERTIES = "org.freedesktop.DBus.Properties"
CALL_TIMEOUT_S = 10.0
SIGHUP = 1
FAILURES = (OSError, EOFError, TimeoutError, DBusFastError)  # what the bus raises

ShutdownCallback = Callable[[bool], None]


class LogindError(Exception):
    """A call to logind (or the bus) failed; the message names the call."""


class Logind(Protocol):
    """What the worker asks of logind. One connection: ``close`` ends it."""

    async def inhibit_delay_max_s(self) -> float: ...

    async def preparing_for_shutdown(self) -> bool: ...

    async def inhibit(self, what: str, who: str, why: str, mode: str) -> int:
        """A new inhibitor lock: the file descriptor to keep open (the caller's to close)."""
        ...

    async def reload(self) -> None:
        """Have logind read its configuration again."""
        ...

    def on_prepare_for_shutdown(self, callback: ShutdownCallback) -> None: ...

    async def closed(self) -> None:
        """Return when the connection is gone (the bus dropped, logind replaced, ``close``)."""
        ...

    def close(self) -> None: ...


async def connect(address: str) -> DbusLogind:
    """A connection to the bus at ``address`` that follows logind's shutdown signal."""
    bus = MessageBus(bus_address=address, bus_type=BusType.SYSTEM, negotiate_unix_fd=True)
    try:
        await asyncio.wait_for(bus.connect(), CALL_TIMEOUT_S)
    except FAILURES as exc:
        raise LogindError(f"cannot connect to the system bus {address}: {_text(exc)}") from exc
    logind = DbusLogind(bus)
    try:
        await logind.follow()
    except LogindError:
        logind.close()
        raise
    return logind


def _text(exc: BaseException) -> str:
    return str(exc) or type(exc).__name__


class DbusLogind:
    def __init__(self, bus: MessageBus) -> None:
        self._bus = bus
        self._owner = ""  # logind's unique bus name: the only sender of its signals
        self._callbacks: list[ShutdownCallback] = []
        self._gone = asyncio.Event()
        bus.add_message_handler(self._on_message)

    async def follow(self) -> None:
        """Subscribe to PrepareForShutdown and to changes of logind's owner; learn it."""
        rules = (
            f"type='signal',sender='{LOGIND}',interface='{MANAGER}',"
            f"member='PrepareForShutdown',path='{LOGIND_PATH}'",
            f"type='signal',sender='{DBUS}',interface='{DBUS}',member='NameOwnerChanged',"
            f"arg0='{LOGIND}'",
        )
        for rule in rules:
            await self._call(DBUS, DBUS_PATH, DBUS, "AddMatch", "s", [rule])
        reply = await self._call(DBUS, DBUS_PATH, DBUS, "GetNameOwner", "s", [LOGIND])
        self._owner = str(reply.body[0])

    async def inhibit_delay_max_s(self) -> float:
        usec = await self._property("InhibitDelayMaxUSec")
        if not isinstance(usec, int):
            raise LogindError(f"InhibitDelayMaxUSec from logind is not a uint64: {usec!r}")
        return usec / 1e6

    async def preparing_for_shutdown(self) -> bool:
        return bool(await self._property("PreparingForShutdown"))

    async def inhibit(self, what: str, who: str, why: str, mode: str) -> int:
        reply = await self._call(
            LOGIND, LOGIND_PATH, MANAGER, "Inhibit", "ssss", [what, who, why, mode]
        )
        fds = list(reply.unix_fds or [])
        index = reply.body[0] if reply.body else None
        if not isinstance(index, int) or not 0 <= index < len(fds):
            for fd in fds:
                os.close(fd)
            raise LogindError("Inhibit: logind's reply carries no file descriptor")
        for fd in fds[:index] + fds[index + 1 :]:
            os.close(fd)
        return int(fds[index])

    async def reload(self) -> None:
        args = ["systemd-logind.service", "all", SIGHUP]
        await self._call(SYSTEMD, SYSTEMD_PATH, f"{SYSTEMD}.Manager", "KillUnit", "ssi", args)

    def on_prepare_for_shutdown(self, callback: ShutdownCallback) -> None:
        self._callbacks.append(callback)

    async def closed(self) -> None:
        disconnected = self._bus.wait_for_disconnect()  # type: ignore[no-untyped-call]
        waiter = asyncio.ensure_future(disconnected)
        gone = asyncio.ensure_future(self._gone.wait())
        await asyncio.wait((waiter, gone), return_when=asyncio.FIRST_COMPLETED)
        for task in (waiter, gone):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def close(self) -> None:
        self._gone.set()
        self._bus.disconnect()

    # --- inside ---------------------------------------------------------------------------

    async def _property(self, name: str) -> Any:
        reply = await self._call(LOGIND, LOGIND_PATH, PROPERTIES, "Get", "ss", [MANAGER, name])
        return reply.body[0].value

    async def _call(
        self,
        destination: str,
        path: str,
        interface: str,
        member: str,
        signature: str,
        body: list[Any],
    ) -> Message:
        message = Message(
            destination=destination,
            path=path,
            interface=interface,
            member=member,
            signature=signature,
            body=body,
        )
        try:
            reply = await asyncio.wait_for(self._bus.call(message), CALL_TIMEOUT_S)
        except FAILURES as exc:
            raise LogindError(f"{member}: {_text(exc)}") from exc
        if reply is None:
            raise LogindError(f"{member}: no reply (the bus is gone)")
        if reply.message_type is MessageType.ERROR:
            detail = reply.body[0] if reply.body else ""
            raise LogindError(f"{member}: {reply.error_name}: {detail}")
        return reply

    def _on_message(self, message: Message) -> None:
        if message.message_type is not MessageType.SIGNAL:
            return
        if message.member == "NameOwnerChanged" and message.sender == DBUS:
            if message.body and message.body[0] == LOGIND:
                self._gone.set()  # logind restarted or left: its locks went with it
            return
        shutdown = message.member == "PrepareForShutdown" and message.interface == MANAGER
        if shutdown and message.sender == self._owner and message.body:
            for callback in self._callbacks:
                callback(bool(message.body[0]))
