"""A container's exit as PLEG reports it, in the book's runtime record at once.

The kubelet computes a pod's status and hands it over before its sync acts on it; here
PLEG's ``ContainerDied`` carries the exit (code, finish time, OOM kill), which
``exited`` folds into the pod's runtime record, so the terminated state is published
before the sync that reacts to it (a restart, the sandbox's stop) writes to the
runtime. That sync's CRI read confirms it, and wins where it differs.

A container, once exited, never runs again, so a read that still shows it running was
made before its exit (a sync already under way when the exit came): ``keep_exits``
keeps the exit over it.
"""

from __future__ import annotations

import dataclasses

from pkletd.ipc.bus.messages import PodLifecycleEvent
from pkletd.ipc.runtime.cri import ContainerInfo, ContainerState
from pkletd.supervisor.pods.setup import terminationlog
from pkletd.supervisor.pods.types import PodRuntime

OOM_KILLED = "OOMKilled"


def exited(runtime: PodRuntime, event: PodLifecycleEvent) -> PodRuntime | None:
    """``runtime`` with the container ``event`` reports dead terminated as it says; None
    if the event carries no exit, or the record has no such container still running."""
    if event.exit_code is None:
        return None
    containers = list(runtime.containers)
    for i, container in enumerate(containers):
        if container.id == event.object_id and container.state is not ContainerState.EXITED:
            containers[i] = _terminated(container, event.exit_code, event)
            return dataclasses.replace(runtime, containers=tuple(containers))
    return None


def _terminated(container: ContainerInfo, code: int, event: PodLifecycleEvent) -> ContainerInfo:
    """The container as the CRI shows it once it recorded the exit (with what the
    container left in its termination message file)."""
    reason = OOM_KILLED if event.oom_killed else ("Completed" if code == 0 else "Error")
    ended = dataclasses.replace(
        container,
        state=ContainerState.EXITED,
        exit_code=code,
        finished_at=event.finished_at,
        reason=reason,
    )
    return dataclasses.replace(ended, message=terminationlog.message(ended))


def keep_exits(known: PodRuntime | None, read: PodRuntime) -> PodRuntime:
    """``read``, but for containers ``known`` has exited that it shows alive (read before
    their exit): those stay as ``known`` has them."""
    if known is None:
        return read
    dead = {c.id: c for c in known.containers if c.state is ContainerState.EXITED}
    kept = tuple(
        dead[c.id] if c.id in dead and c.state is not ContainerState.EXITED else c
        for c in read.containers
    )
    return read if kept == read.containers else dataclasses.replace(read, containers=kept)
