"""Objects, the global revision counter (etcd's) and the watch history window.

Every write bumps ``revision``; ``metadata.resourceVersion`` is its string. Each write is
one ``StoredEvent`` kept in a bounded history (``history_limit`` events, or cleared by
``compact()``) and pushed to the registered ``Watcher`` queues under the same lock, so a
watch started from resourceVersion R sees every later event exactly once. Objects are kept
per storage bucket (``"pods"``, ``"events"``...) under the key ``ns/name`` or ``name``.

A test may write directly, as the server's storage layer would (a new resourceVersion and a
watch event per write, no defaulting, validation or admission)::

    store.create("configmaps", {"metadata": {"name": "c", "namespace": "default"}, ...})
    store.update("configmaps", obj)         # obj carries its namespace/name
    store.delete("configmaps", "default", "c")
    with store.lock: ...                    # read-modify-write as one step
"""

from __future__ import annotations

import collections
import copy
import datetime as dt
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.watch import StoredEvent, Watcher

Obj = dict[str, Any]


def object_key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def meta(obj: Obj) -> dict[str, Any]:
    metadata: dict[str, Any] = obj.setdefault("metadata", {})
    return metadata


def now_rfc3339() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class TooOld(Exception):
    """A resourceVersion older than the history window; ``oldest`` is its lower bound."""

    def __init__(self, requested: int, oldest: int) -> None:
        super().__init__(f"too old resource version: {requested} ({oldest})")
        self.requested = requested
        self.oldest = oldest


@dataclass
class Snapshot:
    """The objects of one bucket as of ``revision``, sorted by key (etcd's order)."""

    revision: int
    items: list[tuple[str, Obj]]


class Store:
    def __init__(self, history_limit: int = 5000) -> None:
        self.lock = threading.RLock()
        self.revision = 1
        self.history_limit = history_limit
        self._buckets: dict[str, dict[str, Obj]] = collections.defaultdict(dict)
        self._history: collections.deque[StoredEvent] = collections.deque()
        self._window_start = self.revision  # watches from any rv >= this can resume
        self._watchers: dict[str, list[Watcher]] = collections.defaultdict(list)

    # ----------------------------------------------------------------------- reads

    def get(self, bucket: str, namespace: str, name: str) -> Obj | None:
        with self.lock:
            found = self._buckets[bucket].get(object_key(namespace, name))
            return copy.deepcopy(found) if found is not None else None

    def items(self, bucket: str, namespace: str = "") -> list[Obj]:
        with self.lock:
            return [
                copy.deepcopy(o)
                for k, o in sorted(self._buckets[bucket].items())
                if not namespace or o["metadata"].get("namespace") == namespace
            ]

    def select(self, bucket: str, matches: Callable[[Obj], bool], namespace: str = "") -> list[Obj]:
        """Copies of the objects ``matches`` accepts; it sees the stored objects (no copy), so
        it must only read them."""
        with self.lock:
            return [
                copy.deepcopy(o)
                for _, o in sorted(self._buckets[bucket].items())
                if _in_namespace(o, namespace) and matches(o)
            ]

    def namespaces_in_use(self, bucket: str) -> set[str]:
        with self.lock:
            return {o["metadata"].get("namespace", "") for o in self._buckets[bucket].values()}

    def buckets(self) -> list[str]:
        with self.lock:
            return list(self._buckets)

    def snapshot(self, bucket: str, revision: int | None = None) -> Snapshot:
        """The bucket now, or as it was at ``revision`` (undoing later events)."""
        with self.lock:
            current = dict(self._buckets[bucket])
            if revision is None or revision >= self.revision:
                return Snapshot(self.revision, sorted(current.items()))
            if revision < self._window_start:
                raise TooOld(revision, self._window_start)
            for event in reversed(self._history):
                if event.revision <= revision:
                    break
                if event.bucket != bucket:
                    continue
                if event.prev is None:
                    current.pop(event.key, None)
                else:
                    current[event.key] = event.prev
            return Snapshot(revision, sorted(current.items()))

    # ----------------------------------------------------------------------- writes

    def create(self, bucket: str, obj: Obj) -> Obj:
        """Store a new object: ``uid``/``creationTimestamp`` filled if absent; ADDED."""
        with self.lock:
            m = meta(obj)
            key = object_key(m.get("namespace", ""), m["name"])
            if key in self._buckets[bucket]:
                raise errors.already_exists("", bucket, m["name"])
            m.setdefault("uid", str(uuid.uuid4()))
            m.setdefault("creationTimestamp", now_rfc3339())
            return self._commit(bucket, key, "ADDED", obj, None)

    def update(self, bucket: str, obj: Obj) -> Obj:
        """Replace an existing object with a new revision; MODIFIED."""
        with self.lock:
            m = meta(obj)
            key = object_key(m.get("namespace", ""), m["name"])
            prev = self._buckets[bucket].get(key)
            if prev is None:
                raise errors.not_found("", bucket, m["name"])
            return self._commit(bucket, key, "MODIFIED", obj, prev)

    def delete(self, bucket: str, namespace: str, name: str) -> Obj:
        """Remove an object; its last state with the deletion revision; DELETED."""
        with self.lock:
            key = object_key(namespace, name)
            prev = self._buckets[bucket].get(key)
            if prev is None:
                raise errors.not_found("", bucket, name)
            return self._commit(bucket, key, "DELETED", copy.deepcopy(prev), prev)

    def _commit(self, bucket: str, key: str, kind: str, obj: Obj, prev: Obj | None) -> Obj:
        self.revision += 1
        stored = copy.deepcopy(obj)
        stored["metadata"]["resourceVersion"] = str(self.revision)
        if kind == "DELETED":
            del self._buckets[bucket][key]
        else:
            self._buckets[bucket][key] = stored
        event = StoredEvent(kind, bucket, key, stored, prev, self.revision)
        self._remember(event)
        for watcher in list(self._watchers[bucket]):
            watcher.push(event)
        return copy.deepcopy(stored)

    def _remember(self, event: StoredEvent) -> None:
        self._history.append(event)
        while len(self._history) > self.history_limit:
            dropped = self._history.popleft()
            self._window_start = dropped.revision

    def compact(self) -> None:
        """Forget the history: a watch or exact list from an older revision gets 410."""
        with self.lock:
            self._history.clear()
            self._window_start = self.revision

    @property
    def oldest_revision(self) -> int:
        """The oldest resourceVersion a watch may resume from."""
        with self.lock:
            return self._window_start

    # ----------------------------------------------------------------------- watch

    def watch(self, bucket: str, since: int | None, namespace: str = "") -> Watcher:
        """A registered watcher: current objects as ADDED when ``since`` is None, else the
        history after ``since`` (``TooOld`` if it has been compacted away)."""
        with self.lock:
            watcher = Watcher(bucket, namespace)
            if since is None:
                for key, obj in sorted(self._buckets[bucket].items()):
                    if _in_namespace(obj, namespace):
                        watcher.push(
                            StoredEvent(
                                "ADDED",
                                bucket,
                                key,
                                obj,
                                None,
                                int(obj["metadata"]["resourceVersion"]),
                            )
                        )
                watcher.initial_done(self.revision)
            else:
                if since < self._window_start:
                    raise TooOld(since, self._window_start)
                for event in self._history:
                    if event.bucket == bucket and event.revision > since:
                        watcher.push(event)
            self._watchers[bucket].append(watcher)
            return watcher

    def unwatch(self, watcher: Watcher) -> None:
        with self.lock:
            if watcher in self._watchers[watcher.bucket]:
                self._watchers[watcher.bucket].remove(watcher)

    def request_bookmark(self, watcher: Watcher) -> None:
        """Queue a bookmark at the current revision behind every event already queued."""
        with self.lock:
            watcher.bookmark(self.revision)

    def watchers(self) -> Iterator[Watcher]:
        with self.lock:
            every = [w for group in self._watchers.values() for w in group]
        yield from every

    def close_watchers(self) -> None:
        for watcher in self.watchers():
            watcher.close()


def _in_namespace(obj: Obj, namespace: str) -> bool:
    return not namespace or obj["metadata"].get("namespace") == namespace
