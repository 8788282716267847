"""Types the pod logic shares: a pod's runtime objects, what a sync returns, why a
container waits. The executor (``podsync``), the book, the status and the loop all
import them from here."""

from __future__ import annotations

import enum
from collections.abc import Mapping
from dataclasses import dataclass, field

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import SANDBOX_PREFIX
from pkletd.ipc.runtime.cri import ContainerID, ContainerInfo, ContainerState, SandboxInfo
from pkletd.supervisor.pods.setup import runtimespec

DEFAULT_GRACE_S = 30


class WaitingReason(enum.StrEnum):
    """A container's ``state.waiting.reason``, as the kubelet words it."""

    CONTAINER_CREATING = "ContainerCreating"
    POD_INITIALIZING = "PodInitializing"
    CRASH_LOOP_BACK_OFF = "CrashLoopBackOff"
    ERR_IMAGE_PULL = "ErrImagePull"
    IMAGE_PULL_BACK_OFF = "ImagePullBackOff"
    ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
    CREATE_CONTAINER_CONFIG_ERROR = "CreateContainerConfigError"
    CREATE_CONTAINER_ERROR = "CreateContainerError"
    RUN_CONTAINER_ERROR = "RunContainerError"
    POST_START_HOOK_ERROR = "PostStartHookError"


@dataclass(frozen=True, slots=True)
class Waiting:
    """Why a container is not running: its waiting reason and message."""

    reason: WaitingReason
    message: str


@dataclass(frozen=True, slots=True)
class Failure:
    """Why a pod failed as a whole: the pod's status reason (``DeadlineExceeded``,
    an admission reason such as ``OutOfcpu``, ``Terminated`` for a node shutdown) and
    message. ``disruption``: the kubelet stopped it (a node shutdown), which the pod's
    ``DisruptionTarget`` condition says."""

    reason: str
    message: str
    disruption: bool = False


@dataclass(frozen=True, slots=True)
class PodRuntime:
    """What the runtime has for one pod, newest first."""

    uid: PodUID
    sandboxes: tuple[SandboxInfo, ...] = ()
    containers: tuple[ContainerInfo, ...] = ()

    def sandbox(self) -> SandboxInfo | None:
        return self.sandboxes[0] if self.sandboxes else None

    def instances(self, name: str) -> list[ContainerInfo]:
        return [c for c in self.containers if c.name == name]

    def latest(self, name: str) -> ContainerInfo | None:
        found = self.instances(name)
        return found[0] if found else None

    def running(self) -> list[ContainerInfo]:
        return [c for c in self.containers if c.state is ContainerState.RUNNING]

    def objects(self) -> dict[str, str]:
        """Object id -> state, as PLEG keys them."""
        found = {SANDBOX_PREFIX + s.id: s.state.value for s in self.sandboxes}
        found.update({c.id: c.state.value for c in self.containers})
        return found

    def grace_period(self) -> int:
        for c in self.containers:
            value = c.annotations.get(runtimespec.POD_GRACE, "")
            if value.isdigit():
                return int(value)
        return DEFAULT_GRACE_S


@dataclass(frozen=True, slots=True)
class SyncOptions:
    """What the loop thread knows that a sync needs: probe facts, and for a pod that
    failed as a whole (its deadline, a node shutdown) the grace period to stop it with."""

    started: frozenset[ContainerID] = frozenset()  # containers past their startup probe
    kill_grace_s: int | None = None


@dataclass(frozen=True, slots=True)
class SyncResult:
    uid: PodUID
    runtime: PodRuntime
    waiting: Mapping[str, Waiting] = field(default_factory=dict)
    retry_in: float | None = None  # seconds until a backoff or a failed step may go again
    terminated: bool = False
    killed: bool = False  # it stopped a failed pod's containers (``SyncOptions.kill_grace_s``)
