"""Image GC's decision, as the kubelet's image GC manager makes it (``image_gc_manager.go``).

Each collection reads the images (ListImages) and every container (ListContainers, dead
ones too) and updates the records: an image seen for the first time is *detected* now,
an image a container uses is *used* now, and a record whose image is gone is dropped.
Candidates are the images no container uses, not pinned by the runtime and not its
sandbox image (containerd 1.6 pins nothing, so the sandbox image is asked for too, as
the kubelet kept ``--pod-infra-container-image``), least recently used first, then
first detected first (never used counts as longest ago).

- ``imageMaximumGCAge`` (once this worker has run that long): an image unused for longer
  is *expired*, removed whatever the disk usage.
- The image filesystem (statfs of the mount point CRI ImageFsInfo names): at or above
  ``imageGCHighThresholdPercent`` of its capacity used, free enough to bring it down to
  ``imageGCLowThresholdPercent``: the other candidates detected at least
  ``imageMinimumGCAge`` ago, in order, until that much is freed (the parent stops there).
- A reclaim (``ReclaimRequested``) asks for every candidate old enough.

Records live in this process: a restarted worker detects every image afresh, as a
restarted kubelet does, so ``imageMinimumGCAge`` holds again and no use is remembered.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from pkletd.ipc.bus.messages import GarbageFound, GarbageKind, ImageFsUsage, UnusedImage
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.nodestats import fsusage
from pkletd.ipc.runtime.cri import ContainerInfo, CriError, FilesystemUsage, ImageInfo, ListedImage
from pkletd.workers.imagegc.options import ImagePolicy

log = logging.getLogger(__name__)

RECLAIM_ALL = 2**63 - 1  # the kubelet's DeleteUnusedImages: math.MaxInt64 bytes
INVALID_CAPACITY = "invalid capacity 0 on image filesystem"
NO_IMAGE_FS = "no image filesystem: the runtime names none, or statfs cannot read it"

Statfs = Callable[[Path], fsusage.FsCapacity | None]


class ImageRuntime(Protocol):
    def list_images(self) -> list[ListedImage]: ...

    def list_containers(self, pod_uid: str = "") -> list[ContainerInfo]: ...

    def image_fs_info(self) -> list[FilesystemUsage]: ...

    def image_status(self, image: str) -> ImageInfo | None: ...

    def sandbox_image(self) -> str: ...


@dataclass(slots=True)
class ImageRecord:
    first_detected: float
    last_used: float = 0.0  # 0: never seen in use
    size: int = 0
    pinned: bool = False


class ImageRecords:
    """What this worker has seen of each image, by image id."""

    def __init__(self) -> None:
        self._records: dict[str, ImageRecord] = {}

    def detect(self, images: Sequence[ListedImage], in_use: set[str], now: float) -> None:
        for image in images:
            record = self._records.setdefault(image.id, ImageRecord(first_detected=now))
            if image.id in in_use:
                record.last_used = now
            record.size = image.size
            record.pinned = image.pinned
        present = {image.id for image in images}
        self._records = {k: v for k, v in self._records.items() if k in present}

    def eviction_order(self, keep: set[str]) -> list[tuple[str, ImageRecord]]:
        """Images that may go (not in ``keep``, not pinned), least recently used first."""
        candidates = [
            (image_id, record)
            for image_id, record in self._records.items()
            if image_id not in keep and not record.pinned
        ]
        return sorted(candidates, key=lambda kv: (kv[1].last_used, kv[1].first_detected))


def usage_percent(capacity: int, available: int) -> int:
    """Percent used as the kubelet counts it: what is not available to unprivileged users."""
    return 100 - available * 100 // capacity if capacity else 0


def bytes_to_free(policy: ImagePolicy, fs: ImageFsUsage) -> int:
    """At or above the high threshold: enough to reach the low one; else nothing."""
    if fs["usage_percent"] < policy.high_threshold_percent:
        return 0
    target = fs["capacity_bytes"] * (100 - policy.low_threshold_percent) // 100
    return target - fs["available_bytes"]


def image_fs(runtime: ImageRuntime, statfs: Statfs) -> ImageFsUsage | None:
    """The image filesystem's capacity and what is available on it; None if the runtime
    names no filesystem or it cannot be read."""
    filesystems = runtime.image_fs_info()
    if not filesystems or not filesystems[0].mountpoint:
        return None
    found = statfs(Path(filesystems[0].mountpoint))
    if found is None:
        return None
    available = min(found.available, found.capacity)
    return ImageFsUsage(
        capacity_bytes=found.capacity,
        available_bytes=available,
        usage_percent=usage_percent(found.capacity, available),
    )


class ImageCollector:
    def __init__(
        self,
        runtime: ImageRuntime,
        policy: ImagePolicy,
        statfs: Statfs = fsusage.capacity,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._runtime = runtime
        self._policy = policy
        self._statfs = statfs
        self._clock = clock
        self._began = clock.monotonic()
        self._records = ImageRecords()

    def collect(self, reclaim: bool = False) -> GarbageFound:
        """One collection's decision; an error in it if the runtime could not be read."""
        try:
            return self._decide(reclaim)
        except CriError as exc:
            return GarbageFound(GarbageKind.IMAGES, reclaim, error=exc.rpc_message)

    def _decide(self, reclaim: bool) -> GarbageFound:
        now = self._clock.monotonic()
        images = self._runtime.list_images()
        in_use = {c.image_ref for c in self._runtime.list_containers()}
        self._records.detect(images, in_use, now)
        order = self._records.eviction_order(in_use | self._sandbox_image())
        fs = image_fs(self._runtime, self._statfs)
        if fs is None or not fs["capacity_bytes"]:  # expired images go all the same
            error = NO_IMAGE_FS if fs is None else INVALID_CAPACITY
            expired = self._choose(order, now, 0)
            return GarbageFound(
                GarbageKind.IMAGES, reclaim, images=expired, image_fs=fs, error=error
            )
        wanted = RECLAIM_ALL if reclaim else bytes_to_free(self._policy, fs)
        if wanted and not reclaim:
            log.info(
                "disk usage on image filesystem is over the high threshold, trying to free "
                "bytes down to the low threshold usage=%d high_threshold=%d "
                "amount_to_free=%d low_threshold=%d",
                fs["usage_percent"],
                self._policy.high_threshold_percent,
                wanted,
                self._policy.low_threshold_percent,
            )
        chosen = self._choose(order, now, wanted)
        return GarbageFound(
            GarbageKind.IMAGES, reclaim, images=chosen, wanted_bytes=wanted, image_fs=fs
        )

    def _sandbox_image(self) -> set[str]:
        """The sandbox image's id, if the runtime names one it has."""
        name = self._runtime.sandbox_image()
        found = self._runtime.image_status(name) if name else None
        return {found.id} if found is not None else set()

    def _choose(
        self, order: list[tuple[str, ImageRecord]], now: float, wanted: int
    ) -> list[UnusedImage]:
        max_age = self._policy.max_age_s
        ages_out = bool(max_age) and now - self._began > max_age
        chosen = []
        for image_id, record in order:
            expired = ages_out and now - record.last_used > max_age
            old_enough = now - record.first_detected >= self._policy.min_age_s
            if expired or (wanted > 0 and old_enough):
                chosen.append(UnusedImage(id=image_id, size=record.size, expired=expired))
        return chosen
