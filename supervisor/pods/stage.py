"""The pod state machine: where each pod the parent knows stands, changed in one place.

::

    NEW ──admit──> ACTIVE ──activeDeadlineSeconds──> FAILED
     └──reject──> REJECTED
    NEW, ACTIVE, REJECTED, FAILED ──no source wants it──> TERMINATING ──> TERMINATED

An orphan (a pod the runtime runs that no source wants) starts at TERMINATING. A
stage changes only in ``PodLifecycle.become``, which checks the table, stamps the
time and logs one line; others ask through its methods. A pod that a source
wants again while it terminates is a new pod (a new lifecycle, NEW), as the
kubelet starts a pod anew once its termination has finished.
"""

from __future__ import annotations

import enum
import logging

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock

log = logging.getLogger(__name__)


class PodStage(enum.Enum):
    NEW = "new"  # a source wants it; admission has not run
    ACTIVE = "active"  # admitted: synced towards its spec
    REJECTED = "rejected"  # admission refused it: Failed, it never runs
    FAILED = "failed"  # failed as a whole (activeDeadlineSeconds): its containers stop
    TERMINATING = "terminating"  # no source wants it (or an orphan): being stopped
    TERMINATED = "terminated"  # stopped and removed: the book forgets it


_ALLOWED = {
    PodStage.NEW: {PodStage.ACTIVE, PodStage.REJECTED, PodStage.TERMINATING},
    PodStage.ACTIVE: {PodStage.FAILED, PodStage.TERMINATING},
    PodStage.REJECTED: {PodStage.TERMINATING},
    PodStage.FAILED: {PodStage.TERMINATING},
    PodStage.TERMINATING: {PodStage.TERMINATED},
    PodStage.TERMINATED: set(),
}


class PodLifecycle:
    def __init__(
        self,
        uid: PodUID,
        name: str,
        stage: PodStage = PodStage.NEW,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self.uid = uid
        self.name = name
        self._clock = clock
        self.stage = stage
        self.since = clock.time()

    def become(self, stage: PodStage, why: str) -> None:
        if stage not in _ALLOWED[self.stage]:
            raise AssertionError(f"pod {self.name}: {self.stage.value} -> {stage.value}")
        log.info(
            "pod stage pod=%s uid=%s stage=%s from=%s why=%s",
            self.name,
            self.uid,
            stage.value,
            self.stage.value,
            why,
        )
        self.stage = stage
        self.since = self._clock.time()

    def admitted(self) -> bool:
        """Admission let it in (it may have failed since)."""
        return self.stage in (PodStage.ACTIVE, PodStage.FAILED)

    def wanted(self) -> bool:
        """A source wants it: not being stopped or gone."""
        return self.stage not in (PodStage.TERMINATING, PodStage.TERMINATED)

    def failed(self) -> bool:
        """It failed as a whole: rejected, or past its deadline."""
        return self.stage in (PodStage.REJECTED, PodStage.FAILED)

    def terminating(self) -> bool:
        return self.stage is PodStage.TERMINATING
