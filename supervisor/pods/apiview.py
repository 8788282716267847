"""The API's own view of the node's pods (``ApiPodsObserved`` from the api-watcher), kept
only to be handed on: the parent broadcasts each message to the status manager and puts
the whole set in every snapshot, so a restarted status manager compares what it writes
with the API without a list of its own. The parent acts on none of it (its pods come
from ``PodsListed``)."""

from __future__ import annotations

from typing import Any

from pkletd.ipc.bus.messages import ApiPodsObserved

Obj = dict[str, Any]


class ApiView:
    def __init__(self) -> None:
        self._pods: dict[str, Obj] = {}  # uid -> the pod as observed
        self.listed = False  # the api-watcher's list arrived: the set is complete

    def observed(self, message: ApiPodsObserved) -> None:
        if message.whole:
            self._pods = {}
            self.listed = True
        for uid in message.gone:
            self._pods.pop(uid, None)
        for pod in message.pods:
            key = (pod.get("metadata") or {}).get("uid")
            if isinstance(key, str) and key:
                self._pods[key] = pod

    def pods(self) -> list[Obj]:
        return list(self._pods.values())
