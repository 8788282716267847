"""Posting Events: correlated as they come (``events.py``), queued, written one at a time
on the events' own thread and client (``eventRecordQPS``/``eventBurst``).

A write that gets no answer (or 429, 5xx) goes back to the head of the queue and is
retried after the back-off, or at once when the server answers again; one the server
refuses is dropped, as client-go drops it.
"""

from __future__ import annotations

import logging
from typing import Any

from kubernetes.client.exceptions import ApiException
from pkletd.ipc.apiclient.retry import Retry, transient
from pkletd.workers.statusmanager.calls import KubeCalls
from pkletd.workers.statusmanager.context import Context
from pkletd.workers.statusmanager.events import (
    BadEvent,
    Correlated,
    Correlator,
    EventQueue,
    Namer,
    make_event,
)

log = logging.getLogger(__name__)

Obj = dict[str, Any]
EVENT = "event"
GONE = 404


def post_event(calls: KubeCalls, write: Correlated) -> Obj:
    """``recordEvent``: PATCH a repeated Event, and create it if it is gone (or new)."""
    namespace, name = write.event["metadata"]["namespace"], write.event["metadata"]["name"]
    if write.patch is not None:
        try:
            return calls.patch_event(namespace, name, write.patch)
        except ApiException as exc:
            if exc.status != GONE:
                raise
    meta = {k: v for k, v in write.event["metadata"].items() if k != "resourceVersion"}
    return calls.create_event(namespace, {**write.event, "metadata": meta})


class EventSink:
    def __init__(self, context: Context) -> None:
        self._context = context
        self._namer = Namer()
        self._correlator = Correlator(self._namer)
        self._queue = EventQueue(context.options.event_queue_limit)
        self._retry = Retry()
        self._dropping = False
        context.on_back.append(self._retry.now)

    def record(self, body: Obj) -> None:
        """An ``EventRecorded`` body: correlate it and queue what to write."""
        try:
            event = make_event(body, self._context.node, self._namer)
        except BadEvent as exc:
            log.error("dropped bad event error=%s", exc)
            return
        write = self._correlator.correlate(event, self._context.clock.time())
        if write is None:
            return  # the spam filter's: client-go drops it without a word
        dropped = self._queue.dropped
        self._queue.add(write)
        if self._queue.dropped > dropped and not self._dropping:
            self._dropping = True
            limit = self._context.options.event_queue_limit
            log.warning("event queue full; dropping the oldest limit=%d", limit)

    def queued(self) -> int:
        return len(self._queue)

    def sync(self, now: float) -> None:
        """Start the next write, if one waits and none is in flight."""
        jobs = self._context.api.event_jobs
        if not len(self._queue) or jobs.busy(EVENT) or not self._context.due(self._retry, now):
            return
        write = self._queue.pop()
        assert write is not None
        calls = self._context.api.event_calls
        jobs.submit(EVENT, lambda: post_event(calls, write), lambda out: self._posted(write, out))

    def _posted(self, write: Correlated, outcome: Obj | Exception) -> None:
        if isinstance(outcome, Exception):
            self._context.failed("post event", outcome)
            if transient(outcome):
                self._queue.put_back(write)
                self._context.retry_later(self._retry)
            return
        self._context.ok()
        self._retry.succeeded()
        self._correlator.update_state(outcome)
        if not len(self._queue):
            self._dropping = False
