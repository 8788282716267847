"""pkletd: pleg -- the pod lifecycle event generator.

Relists the runtime every ``pleg_relist_period`` and reports, as
``PodLifecycleEvent`` messages, what changed since the last relist: containers
that started, died or were removed, and sandboxes that changed state. The parent
reports its own runtime calls at once, so PLEG exists to notice what happens
without the parent (exits, OOM kills, removals by someone else).

A restarted PLEG starts from the parent's view of the runtime (the snapshot), so a
container that died while PLEG was down is still reported.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus import WorkerBus
from pkletd.ipc.cri import CriError, CriRuntime
from pkletd.ipc.messages import (
    SANDBOX_PREFIX,
    LifecycleEventType,
    Message,
    PodLifecycleEvent,
    PodStatusUpdated,
    RelistCompleted,
    Snapshot,
)
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

STARTED = LifecycleEventType.CONTAINER_STARTED
DIED = LifecycleEventType.CONTAINER_DIED
REMOVED = LifecycleEventType.CONTAINER_REMOVED
SANDBOX_CHANGED = LifecycleEventType.SANDBOX_CHANGED


class Pleg:
    def __init__(self, runtime: CriRuntime, bus: WorkerBus, period: float) -> None:
        self._runtime = runtime
        self._bus = bus
        self._period = period
        self._known: dict[str, str] = {}  # object id -> state
        self._owner: dict[str, PodUID] = {}  # object id -> pod uid
        self._next = 0.0

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._known = dict(snapshot.containers)

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, PodStatusUpdated):
            self._known.update(message.containers)

    def fds(self) -> Sequence[int]:
        return ()

    def on_readable(self, fd: int) -> None:
        raise AssertionError("pleg polls no fds")

    def tick(self, now: float) -> float:
        if now >= self._next:
            self._relist()
            self._next = time.monotonic() + self._period
        return self._next

    def close(self) -> None:
        self._runtime.close()

    def _relist(self) -> None:
        started = time.monotonic()
        try:
            current, owners = self._list()
        except CriError as exc:
            log.error("relist failed error=%s", exc)
            return
        for event in diff(self._known, current, {**self._owner, **owners}):
            self._bus.send(event)
        self._known, self._owner = current, owners
        self._bus.send(RelistCompleted(time.monotonic() - started, len(current)))

    def _list(self) -> tuple[dict[str, str], dict[str, PodUID]]:
        states: dict[str, str] = {}
        owners: dict[str, PodUID] = {}
        for sandbox in self._runtime.list_sandboxes():
            if sandbox.uid:
                key = SANDBOX_PREFIX + sandbox.id
                states[key], owners[key] = sandbox.state.value, sandbox.uid
        for container in self._runtime.list_containers():
            if container.pod_uid:
                states[container.id], owners[container.id] = (
                    container.state.value,
                    container.pod_uid,
                )
        return states, owners


def diff(
    old: dict[str, str], new: dict[str, str], owners: dict[str, PodUID]
) -> list[PodLifecycleEvent]:
    """The lifecycle events that turn ``old`` into ``new`` (the kubelet's rules)."""
    events = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key), new.get(key)
        if before == after:
            continue
        uid, state = owners.get(key, PodUID("")), after or ""
        if key.startswith(SANDBOX_PREFIX):
            events.append(
                PodLifecycleEvent(uid, SANDBOX_CHANGED, key.removeprefix(SANDBOX_PREFIX), state)
            )
        elif after == "running":
            events.append(PodLifecycleEvent(uid, STARTED, key, state))
        elif after is None:
            if before == "running":  # it died and was removed between two relists
                events.append(PodLifecycleEvent(uid, DIED, key, "exited"))
            events.append(PodLifecycleEvent(uid, REMOVED, key, state))
        elif after == "exited" or (after == "unknown" and before != "exited"):
            events.append(PodLifecycleEvent(uid, DIED, key, state))
    return events


def main(settings: WorkerSettings, endpoint: str, timeout: float, period: float) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    runtime = CriRuntime(endpoint, timeout)
    return serve(settings, bus, Pleg(runtime, bus, period))
