"""The worker's newest word on each object, token and namespace, and what the parent
has been sent of it.

A failure to read an object that was read before (or found missing) changes nothing
(``put_object``): the parent keeps the last reading, as the kubelet's caches keep
serving the last object while the API server is away. Only an object never read yet
is reported unreadable. Each change of an object's state is logged in one line that
names it, never its data.

``put`` keeps the newest message under its key and sends it if it differs from the
one sent before (so a re-read that found the same resourceVersion and content sends
nothing); ``flush`` sends whatever is still owed, for the messages the bus could
not take at once (the parent is slow: ``zmq.Again``); ``resend`` forgets what was
sent, after a snapshot, so everything goes again.
"""

from __future__ import annotations

import logging
from collections.abc import Hashable
from typing import Protocol

import zmq
from pkletd.ipc.apimodel.references import ObjectKey
from pkletd.ipc.messages import Message, ObjectFetched

log = logging.getLogger(__name__)


class Sender(Protocol):
    def send(self, message: Message) -> None: ...


class Outbox:
    def __init__(self, bus: Sender) -> None:
        self._bus = bus
        self._latest: dict[Hashable, Message] = {}
        self._sent: dict[Hashable, Message] = {}
        self._blocked = False

    def latest(self, key: Hashable) -> Message | None:
        return self._latest.get(key)

    def put(self, key: Hashable, message: Message) -> None:
        self._latest[key] = message
        self._send(key, message)

    def put_object(self, key: ObjectKey, message: ObjectFetched) -> None:
        before = self._latest.get(key)
        was = before if isinstance(before, ObjectFetched) else None
        if _unreadable(message) and was is not None and not _unreadable(was):
            return  # keep the last reading
        _log_change(key, was, message)
        self.put(key, message)

    def drop(self, key: Hashable) -> None:
        self._latest.pop(key, None)
        self._sent.pop(key, None)

    def flush(self) -> None:
        for key, message in list(self._latest.items()):
            if not self._send(key, message):
                return

    def resend(self) -> None:
        self._sent.clear()
        self.flush()

    def owed(self) -> bool:
        return any(self._sent.get(key) != message for key, message in self._latest.items())

    def _send(self, key: Hashable, message: Message) -> bool:
        """Whether the parent has it now."""
        if self._sent.get(key) == message:
            return True
        try:
            self._bus.send(message)
        except zmq.Again:
            if not self._blocked:
                log.warning("parent not taking messages; holding them kind=%s", message.kind)
            self._blocked = True
            return False
        if self._blocked:
            log.info("parent taking messages again")
        self._blocked = False
        self._sent[key] = message
        return True


def _unreadable(message: ObjectFetched) -> bool:
    return bool(message.error) and not message.missing


def _log_change(key: ObjectKey, was: ObjectFetched | None, now: ObjectFetched) -> None:
    where = f"kind={key.kind.value} namespace={key.namespace} name={key.name}"
    if _unreadable(now):
        if was is None or was.error != now.error:
            log.warning("object unreadable %s error=%s", where, now.error)
    elif now.missing:
        if was is None or not was.missing:
            log.info("object missing %s", where)
    elif was is None or was.error or was.resource_version != now.resource_version:
        log.info("object read %s resource_version=%s", where, now.resource_version)
