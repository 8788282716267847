"""What the parent keeps of the image-gc worker's candidates: the one-writer rule's check.

The worker decides from what it listed; the parent owns the pods and checks each
candidate against its book before anything is removed:

- a pod under way (a sync or its termination running, or its termination queued)
  keeps everything: the pod worker is the one touching it;
- a pod the book holds (*live*) keeps what its status shows: each container's newest
  instance, and the one before it while the newest runs (``lastState``, the log
  ``kubectl logs --previous`` reads); a container or sandbox the book has not seen
  yet; a running container; its newest sandbox and any sandbox holding a container;
- a pod the book does not hold is *gone* only once every source has reported (after a
  restart the parent does not know its pods yet): then all of its dead containers,
  sandboxes and its log dir may go;
- images: ``image_users`` names what every pod the book holds runs or will run (spec
  images and the runtime's image ids), which the remover resolves just before it
  removes anything.
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Callable, Iterable

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import DeadContainer, DeadSandbox, PodLogDir
from pkletd.ipc.runtime.cri import ContainerState
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.types import PodRuntime

log = logging.getLogger(__name__)


class Owner(enum.Enum):
    LIVE = "live"  # the book holds the pod
    BUSY = "busy"  # its pod worker is at it, or the book cannot tell yet
    GONE = "gone"


def shown(runtime: PodRuntime) -> set[str]:
    """Container ids the pod's status shows: each name's newest instance, and while that
    one runs, the previous one (its lastState)."""
    found: set[str] = set()
    for name in {c.name for c in runtime.containers}:
        newest = runtime.instances(name)[:2]
        found.add(newest[0].id)
        if newest[0].state is ContainerState.RUNNING and len(newest) > 1:
            found.add(newest[1].id)
    return found


class GarbageCheck:
    def __init__(self, pods: Pods, busy: Callable[[PodUID], bool]) -> None:
        self._pods = pods
        self._busy = busy  # a pod worker holds the pod (syncing, terminating, queued)

    def owner(self, uid: str) -> Owner:
        pod_uid = PodUID(uid)
        if self._busy(pod_uid) or self._pods.terminating(pod_uid):
            return Owner.BUSY
        if pod_uid in self._pods.entries:
            return Owner.LIVE
        return Owner.GONE if self._pods.sources_ready else Owner.BUSY

    def containers(self, candidates: Iterable[DeadContainer]) -> list[DeadContainer]:
        return [c for c in candidates if self._container_may_go(c)]

    def sandboxes(self, candidates: Iterable[DeadSandbox]) -> list[DeadSandbox]:
        return [s for s in candidates if self._sandbox_may_go(s)]

    def log_dirs(self, candidates: Iterable[PodLogDir]) -> list[PodLogDir]:
        return [d for d in candidates if self.owner(d["pod_uid"]) is Owner.GONE]

    def image_users(self) -> frozenset[str]:
        """The images of every pod the book holds: spec names and running image ids."""
        found: set[str] = set()
        for entry in self._pods.entries.values():
            pod = entry.pod
            found.update(
                c.image for c in (*pod.init_containers, *pod.containers, *pod.ephemeral_containers)
            )
            if entry.runtime is not None:
                found.update(c.image_ref for c in entry.runtime.containers if c.image_ref)
        return frozenset(found)

    def _runtime(self, uid: str) -> PodRuntime | None:
        entry = self._pods.entries.get(PodUID(uid))
        return entry.runtime if entry is not None else None

    def _container_may_go(self, candidate: DeadContainer) -> bool:
        owner = self.owner(candidate["pod_uid"])
        if owner is not Owner.LIVE:
            return owner is Owner.GONE
        runtime = self._runtime(candidate["pod_uid"])
        if runtime is None:
            return False
        seen = next((c for c in runtime.containers if c.id == candidate["id"]), None)
        if seen is None or seen.state is ContainerState.RUNNING:
            return False  # not seen yet by the book (newer than its last sync), or running
        return seen.id not in shown(runtime)

    def _sandbox_may_go(self, candidate: DeadSandbox) -> bool:
        owner = self.owner(candidate["pod_uid"])
        if owner is not Owner.LIVE:
            return owner is Owner.GONE
        runtime = self._runtime(candidate["pod_uid"])
        if runtime is None or not runtime.sandboxes:
            return False
        ids = [s.id for s in runtime.sandboxes]  # newest first
        occupied = {c.sandbox_id for c in runtime.containers}
        return candidate["id"] in ids[1:] and candidate["id"] not in occupied
