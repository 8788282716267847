"""The node's object TTL for the ``Cache`` strategy: the annotation
``node.alpha.kubernetes.io/ttl`` (whole seconds) the API server's TTL controller sets
on each Node by cluster size, read from a watch of this node's Node (by name, as the
node authorizer allows). Until the Node says otherwise, the kubelet's default: 1 min.
"""

from __future__ import annotations

import logging

from pkletd.ipc.apiclient.reflector import Changed, ListCall, Listed, Obj, Reflector, Seen
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.podobjects.calls import name_selector
from pkletd.workers.podobjects.parts import IDLE_S

log = logging.getLogger(__name__)

TTL_ANNOTATION = "node.alpha.kubernetes.io/ttl"
DEFAULT_TTL_S = 60.0
NODE = "node"


def object_ttl(node: Obj) -> float | None:
    """The TTL a Node's annotation gives, None if it has none (or not a whole number)."""
    text = ((node.get("metadata") or {}).get("annotations") or {}).get(TTL_ANNOTATION)
    try:
        return float(int(text)) if text is not None else None
    except ValueError:
        return None


class NodeTtl:
    def __init__(self, node_lister: ListCall, node_name: str) -> None:
        self._inbox: Inbox[Seen] = Inbox()
        self._reflector = Reflector(NODE, node_lister, self._inbox, name_selector(node_name))
        self._ttl: float | None = None
        self._reflector.start()

    def seconds(self) -> float:
        return DEFAULT_TTL_S if self._ttl is None else self._ttl

    def fileno(self) -> int:
        return self._inbox.fileno()

    def on_readable(self) -> None:
        for seen in self._inbox.take():
            if isinstance(seen, Listed):
                self._set(object_ttl(seen.items[0]) if seen.items else None)
            elif isinstance(seen, Changed):
                self._set(None if seen.type == "DELETED" else object_ttl(seen.obj))

    def tick(self, now: float) -> float:
        return now + IDLE_S

    def close(self) -> None:
        self._reflector.stop()
        self._inbox.close()

    def _set(self, ttl: float | None) -> None:
        if ttl != self._ttl:
            log.info("object ttl ttl_s=%s", "default" if ttl is None else f"{ttl:g}")
        self._ttl = ttl
