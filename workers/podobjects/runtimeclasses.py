"""The cluster's RuntimeClasses (``node.k8s.io/v1``), as the kubelet's RuntimeClass
manager (``pkg/kubelet/runtimeclass``) keeps them: one list+watch of all of them (an
informer; the ``system:node`` rules allow it), kept as the handler of each class by name.

The parent hears ``RuntimeClassesListed`` once the first list came back and whenever a
class is added, removed or gets another handler (a class's handler may not change in
the API, but it may be deleted and created again). Until the first list, nothing: a pod
with a ``runtimeClassName`` waits for it, where the kubelet's empty cache would answer
NotFound. A watch that fails keeps the classes last read, and is logged once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pkletd.ipc.apiclient.reflector import Broken, ListCall, Listed, Reflector, Seen
from pkletd.ipc.apimodel.runtimeclass import handler_of, name_of
from pkletd.ipc.bus.messages import RuntimeClassesListed
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.podobjects.parts import IDLE_S
from pkletd.workers.podobjects.reading import api_message

log = logging.getLogger(__name__)

RUNTIME_CLASSES = "runtimeclasses"

ReportClasses = Callable[[RuntimeClassesListed], None]


class RuntimeClasses:
    def __init__(self, lister: ListCall, report: ReportClasses) -> None:
        self._report = report
        self._inbox: Inbox[Seen] = Inbox()
        self._reflector = Reflector(RUNTIME_CLASSES, lister, self._inbox)
        self._handlers: dict[str, str] = {}
        self._listed = False
        self._problem = ""
        self._reflector.start()

    def fileno(self) -> int:
        return self._inbox.fileno()

    def on_readable(self) -> None:
        for seen in self._inbox.take():
            self._apply(seen)
        if self._listed:
            self._report(RuntimeClassesListed(dict(sorted(self._handlers.items()))))

    def tick(self, now: float) -> float:
        return now + IDLE_S

    def close(self) -> None:
        self._reflector.stop()
        self._inbox.close()

    def _apply(self, seen: Seen) -> None:
        if isinstance(seen, Broken):
            problem = api_message(seen.error)
            if problem != self._problem:
                log.warning("runtime class watch failed error=%s", problem)
            self._problem = problem
            return
        if self._problem:
            log.info("runtime class watch resumed after error=%s", self._problem)
            self._problem = ""
        if isinstance(seen, Listed):
            self._listed = True
            self._handlers = {name_of(c): handler_of(c) for c in seen.items if name_of(c)}
        elif seen.type == "DELETED":
            self._handlers.pop(name_of(seen.obj), None)
        elif name_of(seen.obj):
            self._handlers[name_of(seen.obj)] = handler_of(seen.obj)
