"""What a ``ContainerDied`` tells of the exit: the same whichever way PLEG learnt of it.

A container that died and is still there carries its exit code, finish time and whether
the OOM killer took it, so the parent shows the terminated state at once. On containerd's
events the exit comes with the task's exit (or delete) event, and an OOM kill with
``/tasks/oom``; relisting (or an exit whose event PLEG missed) reads the container's CRI
ContainerStatus. containerd's CRI plugin records the event's exit status and time as
the container's exit code and ``finished_at``, and the reason ``OOMKilled`` after
``/tasks/oom``, so both ways give the same event.
"""

from __future__ import annotations

import dataclasses
import logging
from typing import Protocol

from pkletd.ipc.bus.messages import LifecycleEventType, PodLifecycleEvent
from pkletd.ipc.runtime.cri import ContainerInfo, ContainerState, CriError
from pkletd.ipc.runtime.events import TaskExited

log = logging.getLogger(__name__)

OOM_KILLED = "OOMKilled"  # the CRI's reason for a container the OOM killer took


class StatusReader(Protocol):
    def container_status(self, listed: ContainerInfo) -> ContainerInfo: ...


class Exits:
    """The OOM kills the event stream told of, and the exit each ``ContainerDied`` carries."""

    def __init__(self, runtime: StatusReader) -> None:
        self._runtime = runtime
        self._oom: set[str] = set()  # containers the OOM killer hit (they may still run)

    def oom_killed(self, container_id: str) -> None:
        self._oom.add(container_id)

    def keep_only(self, keys: set[str]) -> None:
        """Forget the OOM kills of containers no longer there."""
        self._oom &= keys

    def tell(
        self, event: PodLifecycleEvent, listed: ContainerInfo | None, told: TaskExited | None
    ) -> PodLifecycleEvent:
        """``event`` with its exit, if it is the death of a container the runtime shows
        exited (``listed``): the exit the stream ``told``, else the one ContainerStatus
        reads."""
        if event.event is not LifecycleEventType.CONTAINER_DIED:
            return event
        if listed is None or listed.state is not ContainerState.EXITED:
            return event
        oom = event.object_id in self._oom
        self._oom.discard(event.object_id)
        if told is None:
            status = self._read(listed)
            if status is None:
                return event
            told = TaskExited(status.exit_code, status.finished_at)
            oom = status.reason == OOM_KILLED
        return dataclasses.replace(
            event, exit_code=told.exit_code, finished_at=told.finished_at, oom_killed=oom
        )

    def _read(self, listed: ContainerInfo) -> ContainerInfo | None:
        try:
            return self._runtime.container_status(listed)
        except CriError as exc:  # gone since it was listed: its removal follows
            log.warning("exit unread container=%s error=%s", listed.id, exc)
            return None
