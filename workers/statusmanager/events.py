"""core/v1 Events as client-go's recorder posts them: built, correlated, queued.

``make_event`` builds the Event the recorder's ``makeEvent`` would: named
``<object>.<unix nanos in hex>`` in the object's namespace (``default`` for a Node),
source and reporting component ``kubelet`` on this host, count 1.

``Correlator`` is client-go's ``EventCorrelator`` (``tools/record/events_cache.go``), in
its order:

1. the aggregator: events alike but for the message (same source, object, type and
   reason), once 10 different messages were seen, each within 10 minutes of the one
   before, become one Event "(combined from similar events): <message>";
2. the logger: an event seen before (same source, object, field path, type, reason,
   message; the last 4096 kept) is a strategic-merge PATCH of the first one's
   ``count``, ``lastTimestamp`` and ``message`` (a PATCH that finds it gone creates it);
3. the spam filter: a token bucket per source and object, 25 events, refilled one per 5
   minutes; an event over it is dropped (the logger has already counted it, as in
   client-go).

client-go correlates an event when its turn to be written comes; pkletd when it comes
in, so that the writes can be merged while the server is away (below).

``EventQueue`` holds what is still to post, at most ``limit`` (client-go queues 1000;
the oldest is dropped beyond). A write about an Event already queued is merged into the
queued one (a create stays a create, with the latest count), so a server that was down
for a while gets one call per Event, not one per occurrence.
"""

from __future__ import annotations

import collections
from collections.abc import Hashable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Generic, TypeVar

Obj = dict[str, Any]
V = TypeVar("V")

COMPONENT = "kubelet"
LRU_ENTRIES = 4096
AGGREGATE_MAX_EVENTS = 10
AGGREGATE_INTERVAL_S = 600.0
SPAM_BURST = 25
SPAM_QPS = 1.0 / 300.0
COMBINED = "(combined from similar events): "
TYPES = ("Normal", "Warning")


class BadEvent(ValueError):
    """An ``EventRecorded`` body that is not an event; the message names the field."""


def rfc3339(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Lru(Generic[V]):
    def __init__(self, size: int = LRU_ENTRIES) -> None:
        self._size = size
        self._items: collections.OrderedDict[Hashable, V] = collections.OrderedDict()

    def get(self, key: Hashable) -> V | None:
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
        return found

    def put(self, key: Hashable, value: V) -> None:
        self._items[key] = value
        self._items.move_to_end(key)
        if len(self._items) > self._size:
            self._items.popitem(last=False)


class Namer:
    """Unix nanoseconds for Event names, strictly increasing (two events in one tick)."""

    def __init__(self) -> None:
        self._last = 0

    def nanos(self, seconds: float) -> int:
        self._last = max(int(seconds * 1e9), self._last + 1)
        return self._last


def _text(record: Obj, key: str) -> str:
    value = record.get(key)
    if not isinstance(value, str):
        raise BadEvent(f"{key}: want a string, got {value!r}")
    return value


def make_event(record: Obj, node_name: str, namer: Namer) -> Obj:
    """The Event for an ``EventRecorded`` body, named by ``namer``."""
    involved = record.get("involvedObject")
    if not isinstance(involved, dict):
        raise BadEvent(f"involvedObject: want a mapping, got {involved!r}")
    name = _text(involved, "name")
    _text(involved, "kind")
    kind = _text(record, "type")
    if kind not in TYPES:
        raise BadEvent(f"type: want Normal or Warning, got {kind!r}")
    when: Any = record.get("time")
    try:
        stamp = rfc3339(when)
    except (TypeError, ValueError, OverflowError, OSError):
        raise BadEvent(f"time: want wall-clock seconds, got {when!r}") from None
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {
            "name": f"{name}.{namer.nanos(when):x}",
            "namespace": involved.get("namespace") or "default",
        },
        "involvedObject": dict(involved),
        "reason": _text(record, "reason"),
        "message": _text(record, "message"),
        "type": kind,
        "firstTimestamp": stamp,
        "lastTimestamp": stamp,
        "count": 1,
        "source": {"component": COMPONENT, "host": node_name},
        "reportingComponent": COMPONENT,
        "reportingInstance": node_name,
    }


def _object(event: Obj) -> tuple[str, ...]:
    source, io = event.get("source") or {}, event.get("involvedObject") or {}
    return (
        source.get("component", ""),
        source.get("host", ""),
        io.get("kind", ""),
        io.get("namespace", ""),
        io.get("name", ""),
        io.get("uid", ""),
        io.get("apiVersion", ""),
    )


def event_key(event: Obj) -> tuple[str, ...]:
    """``getEventKey``: the object (with the field path), type, reason and message."""
    io = event.get("involvedObject") or {}
    return (
        *_object(event),
        io.get("fieldPath", ""),
        event["type"],
        event["reason"],
        event["message"],
    )


def aggregate_key(event: Obj) -> tuple[str, ...]:
    """``EventAggregatorByReasonFunc``'s aggregate key (the local key is the message)."""
    return (
        *_object(event),
        event["type"],
        event["reason"],
        event.get("reportingComponent", ""),
        event.get("reportingInstance", ""),
    )


@dataclass(slots=True)
class _Aggregate:
    messages: set[str] = field(default_factory=set)
    last: float = 0.0


@dataclass(frozen=True, slots=True)
class _Logged:
    count: int
    first: str
    name: str
    resource_version: str


@dataclass(slots=True)
class _Bucket:
    tokens: float
    last: float


@dataclass(frozen=True, slots=True)
class Correlated:
    """An Event to write: ``patch`` for one seen before (else create ``event``)."""

    event: Obj
    patch: Obj | None = None


class Correlator:
    def __init__(self, namer: Namer, spam_burst: int = SPAM_BURST, spam_qps: float = SPAM_QPS):
        self._namer = namer
        self._burst = spam_burst
        self._qps = spam_qps
        self._aggregates: Lru[_Aggregate] = Lru()
        self._logged: Lru[_Logged] = Lru()
        self._buckets: Lru[_Bucket] = Lru()

    def correlate(self, event: Obj, now: float) -> Correlated | None:
        """``EventCorrelate``: what to write for ``event`` at wall-clock ``now``; None if
        the spam filter drops it."""
        aggregated, key = self._aggregate(event, now)
        observed = self._observe(aggregated, key)
        if not self._accept(observed.event, now):
            return None
        return observed

    def update_state(self, written: Obj) -> None:
        """Remember the Event as the server returned it (name, count, resourceVersion).

        Events are correlated when they come, not when written (as client-go does): a
        count already given to a write still queued is kept."""
        meta = written.get("metadata") or {}
        key = event_key(written)
        known = self._logged.get(key)
        count = int(written.get("count") or 1)
        self._logged.put(
            key,
            _Logged(
                max(count, known.count if known is not None else 0),
                written.get("firstTimestamp") or "",
                meta.get("name", ""),
                meta.get("resourceVersion", ""),
            ),
        )

    def _aggregate(self, event: Obj, now: float) -> tuple[Obj, Hashable]:
        key = aggregate_key(event)
        record = self._aggregates.get(key)
        if record is None or now - record.last > AGGREGATE_INTERVAL_S:
            record = _Aggregate()
        record.messages.add(event["message"])
        record.last = now
        self._aggregates.put(key, record)
        if len(record.messages) < AGGREGATE_MAX_EVENTS:
            return event, event_key(event)
        record.messages.pop()  # keep the set at its cap, as PopAny does
        stamp = rfc3339(now)
        combined = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{event['involvedObject']['name']}.{self._namer.nanos(now):x}",
                "namespace": event["metadata"]["namespace"],
            },
            "involvedObject": event["involvedObject"],
            "reason": event["reason"],
            "message": COMBINED + event["message"],
            "type": event["type"],
            "firstTimestamp": stamp,
            "lastTimestamp": stamp,
            "count": 1,
            "source": event["source"],
        }
        return combined, key

    def _observe(self, event: Obj, key: Hashable) -> Correlated:
        last = self._logged.get(key)
        patch = None
        if last is not None and last.count > 0:
            event = {
                **event,
                "metadata": {**event["metadata"], "name": last.name},
                "firstTimestamp": last.first,
                "count": last.count + 1,
            }
            if last.resource_version:
                event["metadata"]["resourceVersion"] = last.resource_version
            patch = {
                "count": event["count"],
                "lastTimestamp": event["lastTimestamp"],
                "message": event["message"],
            }
        self._logged.put(
            key,
            _Logged(
                event["count"],
                event["firstTimestamp"],
                event["metadata"]["name"],
                event["metadata"].get("resourceVersion", ""),
            ),
        )
        return Correlated(event, patch)

    def _accept(self, event: Obj, now: float) -> bool:
        """``EventSourceObjectSpamFilter``: take a token from the object's bucket."""
        key = _object(event)
        bucket = self._buckets.get(key) or _Bucket(float(self._burst), now)
        bucket.tokens = min(float(self._burst), bucket.tokens + (now - bucket.last) * self._qps)
        bucket.last = now
        accepted = bucket.tokens >= 1.0
        if accepted:
            bucket.tokens -= 1.0
        self._buckets.put(key, bucket)
        return accepted


def _where(event: Obj) -> tuple[str, str]:
    return event["metadata"]["namespace"], event["metadata"]["name"]


class EventQueue:
    """Writes still to make, oldest first, one per Event (see the module doc)."""

    def __init__(self, limit: int) -> None:
        self._limit = limit
        self._items: collections.OrderedDict[tuple[str, str], Correlated] = (
            collections.OrderedDict()
        )
        self.dropped = 0

    def __len__(self) -> int:
        return len(self._items)

    def add(self, write: Correlated) -> None:
        where = _where(write.event)
        queued = self._items.get(where)
        if queued is not None and queued.patch is None:
            write = replace(write, patch=None)  # not created yet: create it as it is now
        self._items[where] = write
        while len(self._items) > self._limit:
            self._items.popitem(last=False)
            self.dropped += 1

    def pop(self) -> Correlated | None:
        if not self._items:
            return None
        return self._items.popitem(last=False)[1]

    def put_back(self, write: Correlated) -> None:
        """A write that failed goes first again, unless a newer one for its Event came."""
        where = _where(write.event)
        newer = self._items.get(where)
        if newer is not None:
            if write.patch is None:
                self._items[where] = replace(newer, patch=None)
            return
        self._items[where] = write
        self._items.move_to_end(where, last=False)
        while len(self._items) > self._limit:
            self._items.popitem(last=False)
            self.dropped += 1
