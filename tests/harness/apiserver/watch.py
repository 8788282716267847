"""Watch plumbing: the events the store queues, and the loop that turns them into wire events.

``Watcher`` is one watch's queue, filled by ``Store`` under its lock. ``WatchLoop`` drains it
the way kube-apiserver's cacher does: an object that starts matching the selectors arrives
as ``ADDED``, one that stops matching as ``DELETED`` (its previous state, stamped with the new
resourceVersion), bookmarks (``kind``/``apiVersion``/``metadata.resourceVersion`` only) every
``bookmark_interval`` seconds when asked for, and the stream ends at ``timeoutSeconds``::

    loop = WatchLoop(watcher, options, matches=pred, render=to_wire, send=write_chunk)
    loop.run()      # returns when the timeout passes, the watcher is closed or send fails
"""

from __future__ import annotations

import copy
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

Obj = dict[str, Any]
INITIAL_EVENTS_END = "k8s.io/initial-events-end"


@dataclass(frozen=True)
class StoredEvent:
    type: str  # ADDED | MODIFIED | DELETED
    bucket: str
    key: str
    obj: Obj
    prev: Obj | None
    revision: int


@dataclass(frozen=True)
class Bookmark:
    revision: int
    initial_events_end: bool = False


_CLOSED = object()


class Watcher:
    """The queue of one watch: store events, bookmarks, and a close marker."""

    def __init__(self, bucket: str, namespace: str) -> None:
        self.bucket = bucket
        self.namespace = namespace
        self.closed = threading.Event()
        self.connection: socket.socket | None = None  # the client's, for abrupt drops
        self._queue: queue.SimpleQueue[object] = queue.SimpleQueue()

    def push(self, event: StoredEvent) -> None:
        self._queue.put(event)

    def bookmark(self, revision: int) -> None:
        self._queue.put(Bookmark(revision))

    def initial_done(self, revision: int) -> None:
        """Mark the end of the synthetic ADDED events (sent only with sendInitialEvents)."""
        self._queue.put(Bookmark(revision, initial_events_end=True))

    def close(self) -> None:
        self.closed.set()
        self._queue.put(_CLOSED)

    def next(self, timeout: float) -> StoredEvent | Bookmark | None:
        """The next item, or None on timeout or once closed."""
        try:
            item = self._queue.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            return None
        if item is _CLOSED:
            return None
        assert isinstance(item, StoredEvent | Bookmark)
        return item


@dataclass
class WatchOptions:
    kind: str
    api_version: str
    deadline: float  # time.monotonic() at which the watch ends
    allow_bookmarks: bool = False
    bookmark_interval: float = 60.0
    send_initial_events: bool = False


class WatchLoop:
    def __init__(
        self,
        watcher: Watcher,
        options: WatchOptions,
        matches: Callable[[Obj], bool],
        render: Callable[[str, Obj], Obj],
        send: Callable[[Obj], None],
        request_bookmark: Callable[[Watcher], None],
        peer_gone: Callable[[], bool] = lambda: False,
    ) -> None:
        self.watcher = watcher
        self.options = options
        self.matches = matches
        self.render = render
        self.send = send
        self.request_bookmark = request_bookmark
        self.peer_gone = peer_gone

    def run(self) -> None:
        options = self.options
        next_bookmark = time.monotonic() + options.bookmark_interval
        while not self.watcher.closed.is_set():
            now = time.monotonic()
            if now >= options.deadline or self.peer_gone():
                return
            if options.allow_bookmarks and now >= next_bookmark:
                self.request_bookmark(self.watcher)
                next_bookmark = now + options.bookmark_interval
            wait = min(options.deadline, next_bookmark if options.allow_bookmarks else 1e18)
            item = self.watcher.next(min(wait - now, 0.5))
            if item is None:
                continue
            wire = self._translate(item)
            if wire is not None:
                self.send(wire)

    def _translate(self, item: StoredEvent | Bookmark) -> Obj | None:
        if isinstance(item, Bookmark):
            wanted = (
                self.options.send_initial_events
                if item.initial_events_end
                else self.options.allow_bookmarks
            )
            if not wanted:
                return None
            return {"type": "BOOKMARK", "object": self._bookmark_object(item)}
        namespace = self.watcher.namespace
        if namespace and item.key.split("/", 1)[0] != namespace:
            return None
        now_passes = item.type != "DELETED" and self.matches(item.obj)
        was_passing = item.prev is not None and self.matches(item.prev)
        if item.type == "DELETED":
            return self._event("DELETED", item.obj) if was_passing else None
        if now_passes and item.type == "ADDED":
            return self._event("ADDED", item.obj)
        if now_passes:
            return self._event("MODIFIED" if was_passing else "ADDED", item.obj)
        if was_passing:
            assert item.prev is not None
            gone = copy.deepcopy(item.prev)
            gone["metadata"]["resourceVersion"] = str(item.revision)
            return self._event("DELETED", gone)
        return None

    def _event(self, kind: str, obj: Obj) -> Obj:
        return {"type": kind, "object": self.render(kind, copy.deepcopy(obj))}

    def _bookmark_object(self, item: Bookmark) -> Obj:
        metadata: dict[str, Any] = {"resourceVersion": str(item.revision)}
        if item.initial_events_end:
            metadata["annotations"] = {INITIAL_EVENTS_END: "true"}
        return {
            "kind": self.options.kind,
            "apiVersion": self.options.api_version,
            "metadata": metadata,
        }
