"""The ``Watch`` strategy, as the kubelet's watch-based manager: one reflector per
referenced ConfigMap or Secret, listing and watching it by name
(``fieldSelector=metadata.name=<name>``) from when a pod first references it until no
pod does. An ``immutable`` object is read and not watched any further. A list with no
item, or a ``DELETED`` event, is the object missing.
"""

from __future__ import annotations

import logging

from pkletd.ipc.apiclient.reflector import Broken, Changed, Listed, Obj, Reflector, Seen
from pkletd.ipc.apimodel.references import ObjectKey
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.podobjects.calls import ApiCalls, name_selector
from pkletd.workers.podobjects.parts import IDLE_S, Report
from pkletd.workers.podobjects.reading import failed, missing, reading

log = logging.getLogger(__name__)


def is_immutable(obj: Obj) -> bool:
    return bool(obj.get("immutable"))


class Watched:
    def __init__(self, calls: ApiCalls, report: Report) -> None:
        self._calls = calls
        self._report = report
        self._inbox: Inbox[Seen] = Inbox()
        self._reflectors: dict[ObjectKey, Reflector] = {}

    def add(self, key: ObjectKey) -> None:
        reflector = Reflector(
            key,
            self._calls.object_lister(key),
            self._inbox,
            name_selector(key.name),
            final=is_immutable,
        )
        self._reflectors[key] = reflector
        reflector.start()

    def renew(self, key: ObjectKey) -> None:
        pass  # the watch keeps it current

    def drop(self, key: ObjectKey) -> None:
        reflector = self._reflectors.pop(key, None)
        if reflector is not None:
            reflector.stop()

    def fileno(self) -> int:
        return self._inbox.fileno()

    def on_readable(self) -> None:
        for seen in self._inbox.take():
            key = seen.source.tag
            if isinstance(key, ObjectKey) and self._reflectors.get(key) is seen.source:
                self._report(key, _message(key, seen))

    def tick(self, now: float) -> float:
        return now + IDLE_S

    def close(self) -> None:
        for reflector in self._reflectors.values():
            reflector.stop()
        self._reflectors.clear()
        self._inbox.close()


def _message(key: ObjectKey, seen: Seen) -> ObjectFetched:
    if isinstance(seen, Broken):
        return failed(key, seen.error)
    if isinstance(seen, Listed):
        named = [item for item in seen.items if _name(item) == key.name]
        return reading(key, named[0] if named else None)
    assert isinstance(seen, Changed)
    return missing(key) if seen.type == "DELETED" else reading(key, seen.obj)


def _name(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("name") or "")
