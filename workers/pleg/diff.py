"""PLEG's rules: which lifecycle events turn one view of the runtime into the next.

A view maps each object PLEG follows (a container by its id, a sandbox by
``SANDBOX_PREFIX`` and its id) to its state; ``diff`` is the kubelet's generic PLEG
comparison, applied alike to a whole relist and to one object read after a runtime event.
"""

from __future__ import annotations

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import SANDBOX_PREFIX, LifecycleEventType, PodLifecycleEvent

STARTED = LifecycleEventType.CONTAINER_STARTED
DIED = LifecycleEventType.CONTAINER_DIED
REMOVED = LifecycleEventType.CONTAINER_REMOVED
SANDBOX_CHANGED = LifecycleEventType.SANDBOX_CHANGED


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
