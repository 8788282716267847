"""A cache of review answers with a time to live per answer, and one call in flight per
key: concurrent requests with the same token (or the same access question) wait for the
one review under way instead of each asking the API server.

Errors are not cached (the next request asks again). At most ``max_entries`` answers are
kept; the oldest go first. Runs on the server's event loop only: no locks.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Hashable
from typing import Generic, TypeVar

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class TtlCache(Generic[K, V]):
    def __init__(
        self,
        ttl_of: Callable[[V], float],
        max_entries: int = 4096,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._ttl_of = ttl_of
        self._max = max_entries
        self._clock = clock
        self._answers: dict[K, tuple[float, V]] = {}  # key -> (expires at, answer)
        self._pending: dict[K, asyncio.Future[V]] = {}

    def __len__(self) -> int:
        return len(self._answers)

    async def get(self, key: K, compute: Callable[[], Awaitable[V]]) -> V:
        found = self._answers.get(key)
        if found is not None and found[0] > self._clock.monotonic():
            return found[1]
        pending = self._pending.get(key)
        if pending is not None:
            return await asyncio.shield(pending)
        future: asyncio.Future[V] = asyncio.get_running_loop().create_future()
        self._pending[key] = future
        try:
            answer = await compute()
        except BaseException as exc:
            future.set_exception(exc)
            future.exception()  # retrieved: no "never retrieved" warning without waiters
            raise
        else:
            future.set_result(answer)
            self._store(key, answer)
            return answer
        finally:
            del self._pending[key]

    def _store(self, key: K, answer: V) -> None:
        ttl = self._ttl_of(answer)
        if ttl <= 0:
            return
        self._answers.pop(key, None)
        while len(self._answers) >= self._max:
            del self._answers[next(iter(self._answers))]
        self._answers[key] = (self._clock.monotonic() + ttl, answer)
