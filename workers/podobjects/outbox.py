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

import zmq
from pkletd.ipc.apimodel.references import ObjectKey
from pkletd.ipc.bus.messages import Message, ObjectFetched
from pkletd.ipc.bus.sender import Sender

log = logging.getLogger(__name__)


class Outbox:
    def __init__(self, bus: Sender) -> None:
        self._bus = bus
        self._latest: dict[Hashable, Message] = {}
        self._sent: dict[Hashable, Message] = {}
        self._unsent: set[Hashable] = set()  # whose latest the bus has not taken yet
        self._blocked = False

    def put(self, key: Hashable, message: Message) -> None:
        self._latest[key] = message
        if self._sent.get(key) == message:
            self._unsent.discard(key)
        else:
            self._unsent.add(key)
            self.flush()

    def put_object(self, key: ObjectKey, message: ObjectFetched) -> None:
        before = self._latest.get(key)
        was = before if isinstance(before, ObjectFetched) else None
        if _unreadable(message) and was is not None and not _unreadable(was):
            return  # keep the last reading
        _log_change(key, was, message)
        self.put(key, message)

    def latest_object(self, key: ObjectKey) -> ObjectFetched | None:
        """The newest reading of an object (None: not read yet)."""
        found = self._latest.get(key)
        return found if isinstance(found, ObjectFetched) else None

    def drop(self, key: Hashable) -> None:
        self._latest.pop(key, None)
        self._sent.pop(key, None)
        self._unsent.discard(key)

    def owed(self) -> bool:
        return bool(self._unsent)

    def flush(self) -> None:
        """Send what the parent has not had yet, until the bus stops taking it."""
        for key in list(self._unsent):
            if not self._send(key, self._latest[key]):
                return

    def resend(self) -> None:
        self._sent.clear()
        self._unsent = set(self._latest)
        self.flush()

    def _send(self, key: Hashable, message: Message) -> bool:
        """Whether the bus took it."""
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
        self._unsent.discard(key)
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
