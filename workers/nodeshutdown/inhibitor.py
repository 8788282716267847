"""The delay lock's life, on the worker's asyncio loop: the kubelet's shutdown manager's
side of logind (``nodeshutdown_manager_linux.go``'s ``start``), kept connected.

A session: connect, follow ``PrepareForShutdown``, make sure logind's
``InhibitDelayMaxSec`` allows the grace period (else write the drop-in, reload logind
and read it again), take the delay lock, and say whether logind already prepares a
shutdown; then wait until the connection is gone. The kubelet gives up on graceful
shutdown when the delay cannot be raised; pkletd logs it and takes the lock anyway,
since the delay logind does allow is still time the pods get. A session that fails, or
ends, is started again after ``RECONNECT_S`` (the kubelet's 1 s), with a fresh lock.

On ``PrepareForShutdown(true)`` it tells the worker (the parent stops the pods, then
says ``release``: the lock is closed and logind goes on). On ``false`` (the shutdown
was cancelled) it tells the worker and takes the lock again. Everything it reports is a
``Signalled`` or a ``LockState``, through ``report``.
"""

from __future__ import annotations

import asyncio
import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from pkletd.workers.nodeshutdown import dropin
from pkletd.workers.nodeshutdown.logind import Logind, LogindError

log = logging.getLogger(__name__)

RECONNECT_S = 1.0
# What the kubelet's lock says in `systemd-inhibit --list`, kept as is: operators' checks
# look for it.
WHAT, WHO, WHY, MODE = "shutdown", "kubelet", "Kubelet needs time to handle node shutdown", "delay"


@dataclass(frozen=True, slots=True)
class InhibitorOptions:
    grace_period_s: int  # the shutdown's whole grace period: what the delay must allow
    logind_conf_dir: Path
    bus_address: str
    reconnect_s: float = RECONNECT_S


@dataclass(frozen=True, slots=True)
class Signalled:
    """logind announced a shutdown (``True``) or cancelled it (``False``)."""

    shutting_down: bool


@dataclass(frozen=True, slots=True)
class LockState:
    held: bool
    delay_max_s: float
    error: str = ""


Report = Callable[[Signalled | LockState], None]
Connect = Callable[[str], Awaitable[Logind]]


class Inhibitor:
    def __init__(self, options: InhibitorOptions, connect: Connect, report: Report) -> None:
        self._options = options
        self._connect = connect
        self._report = report
        self._logind: Logind | None = None
        self._fd: int | None = None
        self._wanted = True  # hold a lock, until the parent says release
        self._delay = 0.0
        self._error = ""
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Future[None]] = set()

    async def run(self) -> None:
        """Sessions, until ``stop``; the lock is closed on the way out."""
        while not self._stop.is_set():
            try:
                await self._session()
            except LogindError as exc:
                self._failed(str(exc))
            try:
                await asyncio.wait_for(self._stop.wait(), self._options.reconnect_s)
            except TimeoutError:
                pass
        self._close_lock()
        self._state()

    def release(self) -> None:
        """The parent is done with the shutdown: close the lock, take none until a cancel."""
        self._wanted = False
        if self._close_lock():
            log.info("inhibitor lock released: logind may go on with the shutdown")
        self._state()

    def stop(self) -> None:
        self._stop.set()
        if self._logind is not None:
            self._logind.close()

    # --- a session --------------------------------------------------------------------------

    async def _session(self) -> None:
        logind = await self._connect(self._options.bus_address)
        self._logind = logind
        try:
            logind.on_prepare_for_shutdown(self._on_signal)
            self._error = ""
            self._delay = await self._ensure_delay(logind)
            log.info(
                "logind connected address=%s inhibit_delay_max=%.0fs grace_period=%ds",
                self._options.bus_address,
                self._delay,
                self._options.grace_period_s,
            )
            if self._wanted:
                await self._take(logind)
            else:
                self._state()
            if await logind.preparing_for_shutdown():
                self._report(Signalled(True))
            await logind.closed()
            if not self._stop.is_set():
                self._failed("the connection to logind ended")
        finally:
            self._logind = None
            logind.close()

    async def _ensure_delay(self, logind: Logind) -> float:
        """logind's delay, raised through the drop-in when it is shorter than the grace
        period; an error (logged) when it stays shorter."""
        delay = await logind.inhibit_delay_max_s()
        wanted = self._options.grace_period_s
        if delay >= wanted:
            return delay
        try:
            path = dropin.write(self._options.logind_conf_dir, wanted)
        except OSError as exc:
            self._short(delay, f"the logind drop-in was not written: {exc}")
            return delay
        log.info("logind drop-in written path=%s inhibit_delay_max=%ds", path, wanted)
        await logind.reload()
        delay = await logind.inhibit_delay_max_s()
        if delay < wanted:
            self._short(delay, "logind kept its value after the reload")
        return delay

    def _short(self, delay: float, why: str) -> None:
        self._error = (
            f"node shutdown manager was unable to update logind InhibitDelayMaxSec to "
            f"{self._options.grace_period_s}s (ShutdownGracePeriod), current value of "
            f"InhibitDelayMaxSec ({delay:g}s) is less than requested ShutdownGracePeriod: {why}"
        )
        log.error("%s; pods get at most %gs at a shutdown", self._error, delay)

    async def _take(self, logind: Logind) -> None:
        """A new lock; the old one (if any) closed once the new one is held."""
        fd = await logind.inhibit(WHAT, WHO, WHY, MODE)
        if not self._wanted:  # released meanwhile
            os.close(fd)
            return
        self._close_lock()
        self._fd = fd
        log.info("inhibitor lock taken what=%s mode=%s", WHAT, MODE)
        self._state()

    def _on_signal(self, shutting_down: bool) -> None:
        log.info("PrepareForShutdown shutting_down=%s", shutting_down)
        self._report(Signalled(shutting_down))
        if not shutting_down:
            self._wanted = True
            if self._logind is not None:
                task = asyncio.ensure_future(self._retake(self._logind))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)

    async def _retake(self, logind: Logind) -> None:
        try:
            await self._take(logind)
        except LogindError as exc:
            self._failed(str(exc))
            logind.close()  # a new session takes it

    # --- state ------------------------------------------------------------------------------

    def _close_lock(self) -> bool:
        if self._fd is None:
            return False
        os.close(self._fd)
        self._fd = None
        return True

    def _failed(self, error: str) -> None:
        if error != self._error:
            log.error(
                "logind not usable address=%s error=%s; retrying every %.0fs, "
                "pods are not stopped gracefully at a shutdown meanwhile",
                self._options.bus_address,
                error,
                self._options.reconnect_s,
            )
        self._error = error
        self._state()

    def _state(self) -> None:
        self._report(LockState(self._fd is not None, self._delay, self._error))
