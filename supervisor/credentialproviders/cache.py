"""A plugin's answers kept as the kubelet's plugin cache keeps them.

An answer is kept under the key its ``cacheKeyType`` names: ``Image`` the image asked
about (its repository, as the pull names it), ``Registry`` the text before its first
``/`` (``host[:port]``), ``Global`` one key for every image. A lookup tries the image,
then its registry, then the global key. An entry is used until its time is up (the
clock's monotonic reading); expired entries are dropped when looked at, and all of them
at most every 15 minutes.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from enum import StrEnum

from pkletd.ipc.clock import Clock
from pkletd.supervisor.pods.dockerconfig import Entry

GLOBAL_KEY = "global"
PURGE_INTERVAL_S = 15 * 60.0


class CacheKeyType(StrEnum):
    IMAGE = "Image"
    REGISTRY = "Registry"
    GLOBAL = "Global"


@dataclass(frozen=True, slots=True)
class _Kept:
    auth: tuple[Entry, ...]
    expires_at: float  # monotonic


def cache_key(key_type: CacheKeyType, image: str) -> str:
    if key_type is CacheKeyType.IMAGE:
        return image
    if key_type is CacheKeyType.REGISTRY:
        return registry(image)
    return GLOBAL_KEY


def registry(image: str) -> str:
    return image.split("/")[0]


class AnswerCache:
    """Thread-safe: pulls on several pod-worker threads share a provider's cache."""

    def __init__(self, clock: Clock) -> None:
        self._clock = clock
        self._kept: dict[str, _Kept] = {}
        self._lock = threading.Lock()
        self._purged_at = clock.monotonic()

    def get(self, image: str) -> tuple[Entry, ...] | None:
        now = self._clock.monotonic()
        with self._lock:
            if now > self._purged_at + PURGE_INTERVAL_S:
                self._kept = {k: v for k, v in self._kept.items() if now <= v.expires_at}
                self._purged_at = now
            for key in (image, registry(image), GLOBAL_KEY):
                kept = self._kept.get(key)
                if kept is not None and now > kept.expires_at:
                    del self._kept[key]
                elif kept is not None:
                    return kept.auth
        return None

    def put(self, key: str, auth: tuple[Entry, ...], duration_s: float) -> None:
        with self._lock:
            self._kept[key] = _Kept(auth, self._clock.monotonic() + duration_s)

    def __len__(self) -> int:
        with self._lock:
            return len(self._kept)
