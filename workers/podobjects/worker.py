"""The pod-objects worker's loop: the pods come in from the parent, what they reference
is followed by the parts (objects, tokens, Services, the node's TTL), and each part's
news goes out through the ``Outbox``.

A (re)started worker reads everything again and sends it all; a new snapshot (the
worker saw a gap in the broadcasts) sends everything again too, in case the parent
lost something.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pkletd.ipc.apimodel import persistentvolumes
from pkletd.ipc.apimodel.references import ObjectKey
from pkletd.ipc.bus.messages import Message, PodForgotten, PodStatusUpdated, Snapshot
from pkletd.workers.podobjects.outbox import Outbox
from pkletd.workers.podobjects.parts import ObjectSource, Part
from pkletd.workers.podobjects.services import Services
from pkletd.workers.podobjects.tokens import Tokens
from pkletd.workers.podobjects.wanted import Wanted

RESEND_S = 1.0  # how soon to try again when the bus could not take everything


def services_key(namespace: str) -> tuple[str, str]:
    """The ``Outbox`` key of a namespace's ``ServicesListed``."""
    return ("services", namespace)


class PodObjects:
    def __init__(
        self,
        outbox: Outbox,
        objects: ObjectSource,
        storage: ObjectSource,
        tokens: Tokens,
        services: Services,
        node: str,
        others: Sequence[Part] = (),
    ) -> None:
        self._outbox = outbox
        self._wanted = Wanted()
        self._objects = objects
        self._storage = storage
        self._tokens = tokens
        self._services = services
        self._node = node
        parts: tuple[Part, ...] = (objects, storage, tokens, services, *others)
        self._parts = {part.fileno(): part for part in parts}
        self._followed: set[ObjectKey] = set()

    # --- the Worker protocol -----------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._follow(self._wanted.replace(snapshot.pods))
        self._outbox.resend()

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, PodStatusUpdated):
            self._follow(self._wanted.update(message.pod))
        elif isinstance(message, PodForgotten):
            self._wanted.forget(message.uid)
            self._follow(set())

    def fds(self) -> Sequence[int]:
        return tuple(self._parts)

    def on_readable(self, fd: int) -> None:
        part = self._parts.get(fd)
        if part is not None:
            part.on_readable()

    def tick(self, now: float) -> float:
        if self._all_wanted() != self._followed:  # a storage reading led somewhere new
            self._follow(set())
        wake = min(part.tick(now) for part in self._parts.values())
        if self._outbox.owed():
            self._outbox.flush()
            wake = min(wake, now + RESEND_S)
        return wake

    def close(self) -> None:
        for part in self._parts.values():
            part.close()

    # --- what the pods want ------------------------------------------------------

    def _all_wanted(self) -> set[ObjectKey]:
        """What the pods reference, and what the storage objects among it lead to."""
        return persistentvolumes.closure(self._wanted.objects(), self._body, self._node)

    def _body(self, key: ObjectKey) -> dict[str, Any] | None:
        fetched = self._outbox.latest_object(key)
        return None if fetched is None else fetched.known_body

    def _source(self, key: ObjectKey) -> ObjectSource:
        return self._storage if key.kind.storage else self._objects

    def _follow(self, renewed: set[ObjectKey]) -> None:
        """Follow what the pods reference now; read again what a pod references anew."""
        wanted = self._all_wanted()
        for key in sorted(wanted - self._followed):
            self._source(key).add(key)
        for key in sorted(renewed & self._followed):
            self._source(key).renew(key)
        for key in self._followed - wanted:
            self._source(key).drop(key)
            self._outbox.drop(key)
        self._followed = wanted
        for token in self._tokens.want(self._wanted.tokens()):
            self._outbox.drop(token)
        for namespace in self._services.want(self._wanted.namespaces()):
            self._outbox.drop(services_key(namespace))
