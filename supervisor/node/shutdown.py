"""Graceful node shutdown, the parent's side: the kubelet's node shutdown manager.

The node-shutdown worker holds logind's delay lock and says when a shutdown starts
(``NodeShutdownStarted``) or is cancelled (``NodeShutdownCancelled``). ``NodeShutdown``
then, on the loop thread:

- refuses every new pod (``NodeShutdown``, the kubelet's message) and says
  ``shutting_down`` (the agent's ``ParentAlive``, so the node's Ready turns False with
  "node is shutting down");
- stops the active pods group by group, lowest priority first (``shutdownplan``): each
  pod fails as a whole (phase Failed, reason ``Terminated``, the kubelet's message, the
  ``DisruptionTarget`` condition) and its containers stop within its grace; the next
  group starts once every pod of this one has stopped, or its period has passed;
- when the last group is done, asks once for the lock's release (``take_release``) and
  records the shutdown's start and end (``shutdownstate``).

A cancellation admits pods again and stops no further group; pods already stopped stay
Failed, as under the kubelet. Stages, changed in ``_become`` only::

    IDLE ──started──> STOPPING ──last group done──> DONE
      ^                   │                          │
      └────cancelled──────┴──────────cancelled───────┘
"""

from __future__ import annotations

import enum
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

from pkletd.ipc.apimodel.podspec import Pod, PodUID
from pkletd.ipc.bus.messages import InhibitorReported, MetricFamily
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.supervisor.config import KubeletConfig
from pkletd.supervisor.node import shutdownplan, shutdownstate
from pkletd.supervisor.node.shutdownplan import Group, assign, pod_grace, requested_s
from pkletd.supervisor.node.shutdownstate import ShutdownTimes, StateFile
from pkletd.supervisor.pods.admission import Rejection
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason
from pkletd.supervisor.pods.types import Failure

log = logging.getLogger(__name__)

TERMINATED = Failure(
    "Terminated", "Pod was terminated in response to imminent node shutdown.", disruption=True
)
REFUSED = Rejection(Reason.NODE_SHUTDOWN, "Pod was rejected as the node is shutting down.")
DETECTED = "Shutdown manager detected shutdown event"
CANCELLED = "Shutdown manager detected shutdown cancellation"


class ShutdownStage(enum.Enum):
    IDLE = "idle"  # no shutdown announced
    STOPPING = "stopping"  # stopping the pods, group by group
    DONE = "done"  # every group done, the lock released; the node stays NotReady


_ALLOWED = {
    ShutdownStage.IDLE: {ShutdownStage.STOPPING},
    ShutdownStage.STOPPING: {ShutdownStage.DONE, ShutdownStage.IDLE},
    ShutdownStage.DONE: {ShutdownStage.IDLE},
}


class PodStopper(Protocol):
    """What the shutdown asks of the pods: the sync loop."""

    def active_pods(self) -> list[Pod]: ...

    def fail_pod(self, pod: Pod, failure: Failure, grace_s: int) -> None: ...

    def pod_stopped(self, uid: PodUID) -> bool: ...

    def refuse_pods(self, refusal: Rejection | None) -> None: ...


class NodeShutdown:
    def __init__(
        self,
        plan: Sequence[Group],
        pods: PodStopper,
        state: StateFile,
        events: EventRecorder,
        node_name: str,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._plan = tuple(plan)
        self._pods = pods
        self._state = state
        self._events = events
        self._node = node_name
        self._clock = clock
        self.stage = ShutdownStage.IDLE
        self._times = state.load() if plan else ShutdownTimes()
        self._members: list[list[Pod]] = []
        self._group = 0
        self._deadline = 0.0
        self._group_began = 0.0
        self._release_due = False
        self._inhibitor = InhibitorReported(held=False, delay_max_s=0.0)

    @classmethod
    def of(cls, config: KubeletConfig, pods: PodStopper, events: EventRecorder) -> NodeShutdown:
        """The node's shutdown as configured (no group: off, and no worker tells it)."""
        plan = shutdownplan.groups(
            config.shutdown_grace_period,
            config.shutdown_grace_period_critical_pods,
            config.shutdown_grace_period_by_pod_priority,
        )
        return cls(plan, pods, StateFile(Path(config.root_dir)), events, config.node_name)

    @property
    def shutting_down(self) -> bool:
        return self.stage is not ShutdownStage.IDLE

    @property
    def done(self) -> bool:
        return self.stage is ShutdownStage.DONE

    # --- what the worker says --------------------------------------------------------

    def started(self) -> None:
        if self.shutting_down:
            return  # already under way (a restarted worker found logind preparing)
        self._event(DETECTED)
        self._pods.refuse_pods(REFUSED)
        self._times = ShutdownTimes(start=self._clock.time())
        self._state.store(self._times)
        self._members = assign(self._plan, self._pods.active_pods())
        self._group = 0
        self._become(ShutdownStage.STOPPING, "logind announced a shutdown")
        self._begin_group(self._clock.monotonic())

    def cancelled(self) -> None:
        if not self.shutting_down:
            return
        self._event(CANCELLED)
        self._pods.refuse_pods(None)
        if self.stage is ShutdownStage.STOPPING:
            self._ended()
        self._release_due = False
        self._become(ShutdownStage.IDLE, "logind cancelled the shutdown")

    def inhibitor(self, report: InhibitorReported) -> None:
        self._inhibitor = report

    # --- the loop ----------------------------------------------------------------------

    def tick(self, now: float) -> float:
        """Go on to the next group when this one is done; when to look again."""
        if self.stage is not ShutdownStage.STOPPING:
            return float("inf")
        members = self._members[self._group]
        stopped = all(self._pods.pod_stopped(p.uid) for p in members)
        if not stopped and now < self._deadline:
            return self._deadline
        group = self._plan[self._group]
        log.info(
            "node shutdown: group %s priority=%d pods=%d took=%.1fs",
            "done" if stopped else "timed out",
            group.priority,
            len(members),
            now - self._group_began,
        )
        self._group += 1
        self._begin_group(now)
        return self._deadline if self.stage is ShutdownStage.STOPPING else float("inf")

    def take_release(self) -> bool:
        """True once after the last group: the worker may release the lock now."""
        due, self._release_due = self._release_due, False
        return due

    # --- questions ----------------------------------------------------------------------

    def status(self) -> dict[str, Any]:
        """The node's shutdown as ``pkletd status`` shows it."""
        return {
            "stage": self.stage.value,
            "grace_period_s": requested_s(self._plan),
            "inhibitor_held": self._inhibitor.held,
            "inhibit_delay_max_s": self._inhibitor.delay_max_s,
            "error": self._inhibitor.error,
            "started_at": self._times.start,
            "ended_at": self._times.end,
        }

    def families(self) -> list[MetricFamily]:
        return shutdownstate.families(self._times)

    # --- inside -------------------------------------------------------------------------

    def _begin_group(self, now: float) -> None:
        """Stop the pods of the next group that has any; DONE after the last."""
        while self._group < len(self._plan):
            members = self._members[self._group]
            if members:
                group = self._plan[self._group]
                log.info(
                    "node shutdown: stopping group priority=%d grace=%ds pods=%s",
                    group.priority,
                    group.grace_s,
                    ",".join(p.full_name for p in members),
                )
                for pod in members:
                    self._pods.fail_pod(pod, TERMINATED, pod_grace(pod, group))
                self._group_began = now
                self._deadline = now + group.grace_s
                return
            self._group += 1
        self._ended()
        self._release_due = True
        self._become(ShutdownStage.DONE, "every group stopped")

    def _ended(self) -> None:
        self._times = ShutdownTimes(self._times.start, self._clock.time())
        self._state.store(self._times)

    def _become(self, stage: ShutdownStage, why: str) -> None:
        if stage not in _ALLOWED[self.stage]:
            raise AssertionError(f"node shutdown: {self.stage.value} -> {stage.value}")
        log.info("node shutdown stage=%s from=%s why=%s", stage.value, self.stage.value, why)
        self.stage = stage

    def _event(self, message: str) -> None:
        self._events.normal(ObjectRef.node(self._node), Reason.NODE_SHUTDOWN, message)
