"""Waiting for the CRI to show what a runtime event says.

containerd publishes an event before its CRI plugin has folded it in: the plugin
handles a task's exit (it deletes the task, then marks the container exited) and a
removal (it deletes the container's record, then forgets it) after the event went out.
So the object an event names is read at once (the task's delete, which comes when the
CRI is about to show the exit, reads it again) and, while the CRI still shows it as it
was, again after a short delay (``FIRST_DELAY_S`` doubling to ``MAX_DELAY_S``) until the
CRI shows the change or ``SETTLE_S`` has passed; the relist is the safety net after that.
After a task's delete the CRI shows the exit within tens of milliseconds, more under
load (the plugin handles exits one at a time): for ``QUICK_S`` the delay stops doubling
at ``QUICK_MAX_DELAY_S``, so the exit is read at most that long after the CRI has it.
An exit's status and time, which its events carry, wait with the object for the read
that shows it (``told``).
"""

from __future__ import annotations

from dataclasses import dataclass

from pkletd.ipc.runtime.events import RuntimeEvent, TaskExited, Topic

FIRST_DELAY_S = 0.005
MAX_DELAY_S = 0.5
QUICK_S = 1.0
QUICK_MAX_DELAY_S = 0.02
SETTLE_S = 10.0
ALIVE = frozenset({"running", "ready"})  # a running container, a ready sandbox


def settled(topic: Topic, state: str | None) -> bool:
    """The CRI shows what an event of ``topic`` says (``state`` None: the object is gone)."""
    if topic is Topic.CONTAINER_DELETE:
        return state is None
    return state not in ALIVE


@dataclass(slots=True)
class Awaited:
    topic: Topic
    deadline: float
    due: float
    delay: float
    exited: TaskExited | None
    quick_until: float  # the delay stays short until then (after a task's delete)


class Awaiting:
    """Objects whose event the CRI does not show yet, and when to read each again."""

    def __init__(self) -> None:
        self._awaited: dict[str, Awaited] = {}

    def add(self, event: RuntimeEvent, now: float) -> None:
        """Read ``event``'s object now (its newest event replaces an older one, but for
        the exit an older one told)."""
        older = self._awaited.get(event.object_id)
        exited = event.exited or (older.exited if older is not None else None)
        quick = now + QUICK_S if event.topic is Topic.TASK_DELETE else now
        self._awaited[event.object_id] = Awaited(
            event.topic, now + SETTLE_S, now, FIRST_DELAY_S, exited, quick
        )

    def told(self, object_id: str) -> TaskExited | None:
        """The exit the object's events told, while it is awaited."""
        awaited = self._awaited.get(object_id)
        return awaited.exited if awaited is not None else None

    def due(self, now: float) -> list[str]:
        return [object_id for object_id, a in self._awaited.items() if a.due <= now]

    def read(self, object_id: str, state: str | None, now: float) -> None:
        """What a read of ``object_id`` found: done with it, or read it again later."""
        awaited = self._awaited.get(object_id)
        if awaited is not None and settled(awaited.topic, state):
            del self._awaited[object_id]
        else:
            self.later(object_id, now)

    def later(self, object_id: str, now: float) -> None:
        """Read ``object_id`` again after its delay (unchanged, or the read failed); give
        it up past its deadline."""
        awaited = self._awaited.get(object_id)
        if awaited is None:
            return
        if now >= awaited.deadline:
            del self._awaited[object_id]
            return
        awaited.due = now + awaited.delay
        cap = QUICK_MAX_DELAY_S if now < awaited.quick_until else MAX_DELAY_S
        awaited.delay = min(awaited.delay * 2, cap)

    def next_due(self) -> float | None:
        return min((a.due for a in self._awaited.values()), default=None)
