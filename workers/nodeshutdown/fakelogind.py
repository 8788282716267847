"""``FakeLogind``: logind in memory, for unit tests of the inhibitor.

Each ``inhibit`` returns the write end of a new pipe and keeps the read end, so a test
sees which locks are still open (``open_locks``), as logind watches its end of the
FIFO. ``fail`` makes the next call of a method raise; ``signal`` emits
``PrepareForShutdown``; ``drop`` ends the connection as a dropped bus does.
"""

from __future__ import annotations

import asyncio
import os
import select

from pkletd.workers.nodeshutdown.logind import Logind, LogindError, ShutdownCallback


class FakeLogind(Logind):
    def __init__(self, delay_max_s: float = 30.0, preparing: bool = False) -> None:
        self.delay_max_s = delay_max_s
        self.delay_after_reload: float | None = None  # what a reload sets, if anything
        self.preparing = preparing
        self.calls: list[str] = []
        self.reads: list[int] = []  # logind's ends of every lock handed out
        self._failing: dict[str, str] = {}
        self._callbacks: list[ShutdownCallback] = []
        self._closed = asyncio.Event()

    def fail(self, method: str, error: str) -> None:
        self._failing[method] = error

    def signal(self, shutting_down: bool) -> None:
        for callback in self._callbacks:
            callback(shutting_down)

    def drop(self) -> None:
        self._closed.set()

    def open_locks(self) -> int:
        """Locks whose holder has not closed its end."""
        return sum(1 for fd in self.reads if not _hung_up(fd))

    def release_fds(self) -> None:
        for fd in self.reads:
            os.close(fd)
        self.reads = []

    # --- Logind --------------------------------------------------------------------------

    async def inhibit_delay_max_s(self) -> float:
        self._called("inhibit_delay_max_s")
        return self.delay_max_s

    async def preparing_for_shutdown(self) -> bool:
        self._called("preparing_for_shutdown")
        return self.preparing

    async def inhibit(self, what: str, who: str, why: str, mode: str) -> int:
        self._called(f"inhibit {what} {who} {mode}")
        read, write = os.pipe()
        self.reads.append(read)
        return write

    async def reload(self) -> None:
        self._called("reload")
        if self.delay_after_reload is not None:
            self.delay_max_s = self.delay_after_reload

    def on_prepare_for_shutdown(self, callback: ShutdownCallback) -> None:
        self._callbacks.append(callback)

    async def closed(self) -> None:
        await self._closed.wait()

    def close(self) -> None:
        self._closed.set()

    def _called(self, call: str) -> None:
        self.calls.append(call)
        error = self._failing.pop(call.split()[0], None)
        if error is not None:
            raise LogindError(f"{call.split()[0]}: {error}")


def _hung_up(fd: int) -> bool:
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    return any(event & select.POLLHUP for _, event in poller.poll(0))
