"""The parent's side of garbage collection: the image-gc worker decides, the parent removes.

The parent is the one writer of pods' runtime state, so GC goes through it: a
``GarbageFound`` from the image-gc worker is checked against the book
(``garbagecheck``: what a pod's status still shows, what a pod worker is at, pods the
parent cannot place yet), what is left is removed on the remover's thread
(``garbageremover``), and the outcome comes back to the loop thread, which keeps it
for ``pkletd status``, records the kubelet's node events and broadcasts
``GarbageCollected``. Candidates of a collection still being carried out are not
handed over twice.

Events, as the kubelet records them on the Node: ``ContainerGCFailed`` when a container
collection could not read the runtime; ``InvalidDiskCapacity`` for an image filesystem
of capacity 0; ``FreeDiskSpaceFailed`` when image GC freed less than the thresholds
asked for; ``ImageGCFailed`` when image GC failed twice in a row (the first failure is
only logged: stats may not be ready yet).
"""

from __future__ import annotations

import dataclasses
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.bus.messages import (
    GarbageCollected,
    GarbageFound,
    GarbageKind,
    ImageFsUsage,
    Message,
    ReclaimRequested,
)
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.garbagecheck import GarbageCheck
from pkletd.supervisor.pods.garbageremover import GarbageRemover, Removal

log = logging.getLogger(__name__)

Publish = Callable[[Message], object]


@dataclass(frozen=True, slots=True)
class Thresholds:
    """imageGCHighThresholdPercent and imageGCLowThresholdPercent, for status."""

    high_percent: int
    low_percent: int


def candidate_keys(found: GarbageFound) -> set[str]:
    """Everything a collection names, by id (log dirs by name)."""
    keys = {c["id"] for c in found.containers} | {s["id"] for s in found.sandboxes}
    return keys | {d["name"] for d in found.log_dirs} | {i["id"] for i in found.images}


def aggregate(errors: list[str]) -> str:
    """Several errors as Go's aggregate error prints them."""
    return errors[0] if len(errors) == 1 else f"[{', '.join(errors)}]"


class GarbageCollector:
    def __init__(
        self,
        check: GarbageCheck,
        remover: GarbageRemover,
        events: EventRecorder,
        node_name: str,
        thresholds: Thresholds,
        publish: Publish,
    ) -> None:
        self._check = check
        self._remover = remover
        self._events = events
        self._node = ObjectRef.node(node_name)
        self._thresholds = thresholds
        self._publish = publish
        self._in_flight: set[str] = set()
        self._image_fs: ImageFsUsage | None = None
        self._last: dict[GarbageKind, dict[str, Any]] = {}
        self._image_gc_failed = False  # the last periodic image collection failed

    def fileno(self) -> int:
        return self._remover.fileno()

    def reclaim(self, reason: str) -> None:
        """Have the image-gc worker collect everything it may, now."""
        log.info("reclaim requested reason=%s", reason)
        self._publish(ReclaimRequested(reason))

    def on_found(self, found: GarbageFound) -> None:
        """The worker's candidates: keep what the book needs, remove the rest."""
        if found.image_fs is not None:
            self._image_fs = found.image_fs
        agreed = dataclasses.replace(
            found,
            containers=self._check.containers(self._new(found.containers, "id")),
            sandboxes=self._check.sandboxes(self._new(found.sandboxes, "id")),
            log_dirs=self._check.log_dirs(self._new(found.log_dirs, "name")),
            images=self._new(found.images, "id"),
        )
        kept = len(candidate_keys(found)) - len(candidate_keys(agreed))
        if kept:  # every collection offers them again: not news
            log.debug("garbage kept by the parent collection=%s kept=%d", found.collection, kept)
        self._in_flight |= candidate_keys(agreed)
        self._remover.submit(agreed, self._check.image_users() if agreed.images else frozenset())

    def _new(self, candidates: list[Any], key: str) -> list[Any]:
        """Those not already handed to the remover by an earlier collection."""
        return [c for c in candidates if c[key] not in self._in_flight]

    def on_removed(self) -> None:
        """Collections the remover finished: status, events, ``GarbageCollected``."""
        for removal in self._remover.completed():
            found = removal.found
            self._in_flight -= candidate_keys(found)
            if found.collection is GarbageKind.CONTAINERS:
                error = self._containers_outcome(removal)
            else:
                error = self._images_outcome(removal)
            self._last[found.collection] = self._summary(removal, error)
            self._publish(
                GarbageCollected(
                    found.collection,
                    found.reclaim,
                    removal.containers,
                    removal.sandboxes,
                    removal.log_dirs,
                    removal.images,
                    removal.freed_bytes,
                    error,
                )
            )

    def _containers_outcome(self, removal: Removal) -> str:
        """The container collection's error: the worker's (the kubelet's event), or what
        failed to be removed (logged only, as the kubelet does)."""
        error = removal.found.error
        if error:
            log.error("container garbage collection failed error=%s", error)
            self._events.warning(self._node, Reason.CONTAINER_GC_FAILED, error)
            return error
        return aggregate(removal.errors) if removal.errors else ""

    def _images_outcome(self, removal: Removal) -> str:
        found = removal.found
        errors = [found.error] if found.error else []
        if found.error and found.image_fs is not None and not found.image_fs["capacity_bytes"]:
            self._events.warning(self._node, Reason.INVALID_DISK_CAPACITY, found.error)
        if removal.errors:
            errors.append(
                f"wanted to free {found.wanted_bytes} bytes, but freed {removal.freed_bytes} "
                f"bytes space with errors in image deletion: {aggregate(removal.errors)}"
            )
        elif not found.reclaim and removal.freed_bytes < found.wanted_bytes:
            shortfall = (
                "Failed to garbage collect required amount of images. Attempted to free "
                f"{found.wanted_bytes} bytes, but only found {removal.freed_bytes} bytes "
                "eligible to free."
            )
            self._events.warning(self._node, Reason.FREE_DISK_SPACE_FAILED, shortfall)
            errors.append(shortfall)
        error = "; ".join(errors)
        if not found.reclaim:
            self._image_gc_done(error)
        return error

    def _image_gc_done(self, error: str) -> None:
        """The kubelet's rule: an event only for failures in a row."""
        if error and self._image_gc_failed:
            log.error("image garbage collection failed multiple times in a row error=%s", error)
            self._events.warning(self._node, Reason.IMAGE_GC_FAILED, error)
        elif error:
            log.error(
                "image garbage collection failed once; stats initialization may not have "
                "completed yet error=%s",
                error,
            )
        elif self._image_gc_failed:
            log.info("image garbage collection succeeded")
        self._image_gc_failed = bool(error)

    @staticmethod
    def _summary(removal: Removal, error: str) -> dict[str, Any]:
        summary: dict[str, Any] = {"at": time.time(), "reclaim": removal.found.reclaim}
        if removal.found.collection is GarbageKind.IMAGES:
            summary.update(images=removal.images, freed_bytes=removal.freed_bytes)
        else:
            summary.update(
                containers=removal.containers,
                sandboxes=removal.sandboxes,
                log_dirs=removal.log_dirs,
            )
        return {**summary, "error": error}

    def status(self) -> dict[str, Any]:
        """The image filesystem against the thresholds, and the last collection of each kind."""
        image_fs = None
        if self._image_fs is not None:
            image_fs = {
                **self._image_fs,
                "high_threshold_percent": self._thresholds.high_percent,
                "low_threshold_percent": self._thresholds.low_percent,
            }
        return {
            "image_fs": image_fs,
            "image_gc": self._last.get(GarbageKind.IMAGES),
            "container_gc": self._last.get(GarbageKind.CONTAINERS),
        }

    def close(self) -> None:
        self._remover.close()
