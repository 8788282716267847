"""The image-gc worker's loop: when to collect, and what to tell the parent.

Container GC every ``container_period_s`` (the kubelet's minute) and image GC every
``image_period_s`` (its five minutes), the first of each at once, as the kubelet starts
them; a ``ReclaimRequested`` runs both now. Each collection reads the runtime and sends
one ``GarbageFound``; the parent removes (the one-writer rule), so a SIGKILL here leaves
nothing half done: a collection was either sent whole or not at all.

The pods the parent has come from its snapshot and broadcasts: a pod it does not have
is *gone* for the container GC's rules.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence

from pkletd.ipc.bus.messages import (
    GarbageFound,
    GarbageKind,
    Message,
    PodForgotten,
    PodStatusUpdated,
    ReclaimRequested,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.workers.imagegc.containers import ContainerCollector
from pkletd.workers.imagegc.images import ImageCollector
from pkletd.workers.imagegc.options import Options

log = logging.getLogger(__name__)


class GarbageWorker:
    def __init__(
        self,
        bus: Sender,
        images: ImageCollector,
        containers: ContainerCollector,
        options: Options,
        closing: Callable[[], None] = lambda: None,  # closes the runtime the collectors read
    ) -> None:
        self._bus = bus
        self._closing = closing
        self._images = images
        self._containers = containers
        self._options = options
        self._known: set[str] = set()  # pod UIDs the parent has
        self._reclaim = ""  # why a reclaim was asked for; "" when none is
        self._next_containers = 0.0
        self._next_images = 0.0
        self._proposed: dict[GarbageKind, set[str]] = {}  # each kind's last proposal

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._known = {str(p["metadata"]["uid"]) for p in snapshot.pods}

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, PodStatusUpdated):
            self._known.add(str(message.pod["metadata"]["uid"]))
        elif isinstance(message, PodForgotten):
            self._known.discard(message.uid)
        elif isinstance(message, ReclaimRequested):
            log.info("reclaim requested reason=%s", message.reason)
            self._reclaim = message.reason or "unnamed"

    def fds(self) -> Sequence[int]:
        return ()

    def on_readable(self, fd: int) -> None:
        raise AssertionError("the image-gc worker polls no fds")

    def tick(self, now: float) -> float:
        reclaim, self._reclaim = bool(self._reclaim), ""
        if reclaim or now >= self._next_containers:
            self._send(self._containers.collect(self._known, reclaim))
            self._next_containers = now + self._options.container_period_s
        if reclaim or (now >= self._next_images and not self._options.images.disabled()):
            self._send(self._images.collect(reclaim))
            self._next_images = now + self._options.image_period_s
        if self._options.images.disabled():
            return self._next_containers
        return min(self._next_containers, self._next_images)

    def close(self) -> None:
        self._closing()

    def _send(self, found: GarbageFound) -> None:
        keys = _keys(found)
        new = keys - self._proposed.get(found.collection, set())
        self._proposed[found.collection] = keys
        if found.error:
            log.error("collection failed collection=%s error=%s", found.collection, found.error)
        elif keys:
            log.log(
                logging.INFO if new else logging.DEBUG,  # the parent keeps some: said once
                "garbage found collection=%s reclaim=%s containers=%d sandboxes=%d "
                "log_dirs=%d images=%d wanted_bytes=%d",
                found.collection,
                found.reclaim,
                len(found.containers),
                len(found.sandboxes),
                len(found.log_dirs),
                len(found.images),
                found.wanted_bytes,
            )
        self._bus.send(found)


def _keys(found: GarbageFound) -> set[str]:
    """What a collection names (log dirs by name)."""
    keys = {c["id"] for c in found.containers} | {s["id"] for s in found.sandboxes}
    return keys | {d["name"] for d in found.log_dirs} | {i["id"] for i in found.images}
