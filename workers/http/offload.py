"""Blocking calls (the API server's reviews) run off the event loop: on a few threads,
with a deadline, and with a bound on how many may wait, so a hung API server costs a
bounded number of threads and queued calls, never the loop."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import TypeVar

from pkletd.workers.http.reviews import ReviewUnavailable

T = TypeVar("T")
THREADS = 4
MAX_WAITING = 64
DEADLINE_S = 10.0


class Offloader:
    def __init__(
        self, threads: int = THREADS, max_waiting: int = MAX_WAITING, deadline: float = DEADLINE_S
    ) -> None:
        self._pool = ThreadPoolExecutor(max_workers=threads, thread_name_prefix="review")
        self._max_waiting = max_waiting
        self._waiting = 0
        self._deadline = deadline

    async def __call__(self, call: Callable[[], T]) -> T:
        """``call()`` on a thread; ReviewUnavailable if it cannot start or takes too long."""
        if self._waiting >= self._max_waiting:
            raise ReviewUnavailable(f"{self._waiting} reviews already waiting for the API server")
        self._waiting += 1
        try:
            loop = asyncio.get_running_loop()
            return await asyncio.wait_for(loop.run_in_executor(self._pool, call), self._deadline)
        except TimeoutError:
            raise ReviewUnavailable(f"no answer within {self._deadline:g}s") from None
        finally:
            self._waiting -= 1

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
