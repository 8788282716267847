"""The eviction manager's decisions, as the kubelet's ``synchronize`` makes them, over
observations and an injected time (pure: no I/O, no clock of its own).

Each round (``synchronize``):

1. the thresholds met now, ignoring grace periods, plus those met before that have not
   cleared their minimum reclaim yet (``thresholdsMet``, ``mergeThresholds``);
2. when each was first met (``thresholdsFirstObservedAt``); the node conditions they
   drive, and when each condition was last seen (``nodeConditionsLastObservedAt``);
3. the conditions in force: seen within ``evictionPressureTransitionPeriod``
   (``nodeConditionsObservedSince``), so a condition stays True that long after its
   last sighting;
4. the thresholds met past their grace period (``thresholdsMetGracePeriod``), memory
   first: the first one is what eviction reclaims.

``relieved`` answers, after node-level reclaim, whether every threshold (with its
minimum reclaim) is clear. The state is plain data (``State.wire``), sent to the parent
with every reading and handed back in a snapshot, so a restarted worker goes on where
this one stopped rather than shortening a transition period or a grace period.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pkletd.workers.eviction.thresholds import (
    CONDITIONS,
    Observations,
    Threshold,
    eviction_order,
)


@dataclass(frozen=True, slots=True)
class State:
    first_met: Mapping[str, float] = field(default_factory=dict)  # threshold key -> time
    condition_seen: Mapping[str, float] = field(default_factory=dict)  # condition -> time
    unresolved: tuple[str, ...] = ()  # keys met past their grace period, last round

    def wire(self) -> dict[str, Any]:
        return {
            "first_met": dict(self.first_met),
            "condition_seen": dict(self.condition_seen),
            "unresolved": list(self.unresolved),
        }

    @classmethod
    def of_wire(cls, raw: Mapping[str, Any]) -> State:
        """A state sent back by the parent; anything malformed is a fresh start."""
        try:
            return cls(
                {str(k): float(v) for k, v in raw.get("first_met", {}).items()},
                {str(k): float(v) for k, v in raw.get("condition_seen", {}).items()},
                tuple(str(k) for k in raw.get("unresolved", [])),
            )
        except (AttributeError, TypeError, ValueError):
            return cls()


@dataclass(frozen=True, slots=True)
class Verdict:
    conditions: tuple[str, ...]  # in force, in CONDITIONS order
    met: tuple[Threshold, ...]  # met now or not yet resolved, grace periods aside
    due: tuple[Threshold, ...]  # met past their grace periods, memory first

    @property
    def to_reclaim(self) -> Threshold | None:
        return self.due[0] if self.due else None


class Manager:
    def __init__(
        self, thresholds: Sequence[Threshold], transition_s: float, state: State | None = None
    ) -> None:
        self.thresholds = tuple(thresholds)
        self._by_key = {t.key: t for t in self.thresholds}
        self._transition_s = transition_s
        self.state = state or State()

    def synchronize(self, observations: Observations, now: float) -> Verdict:
        met = [t for t in self.thresholds if t.met(observations, enforce_min_reclaim=False)]
        for key in self.state.unresolved:
            earlier = self._by_key.get(key)
            if earlier is not None and earlier not in met:
                if earlier.met(observations, enforce_min_reclaim=True):
                    met.append(earlier)
        first_met = {t.key: self.state.first_met.get(t.key, now) for t in met}
        seen = {
            c: at for c, at in self.state.condition_seen.items() if now - at < self._transition_s
        }
        seen.update({t.condition: now for t in met})
        due = [t for t in met if now - first_met[t.key] >= t.grace_s]
        self.state = State(first_met, seen, tuple(t.key for t in due))
        conditions = tuple(c for c in CONDITIONS if c in seen)
        return Verdict(conditions, tuple(met), tuple(eviction_order(due)))

    def relieved(self, observations: Observations) -> bool:
        """No threshold is met, minimum reclaims included (after node-level reclaim)."""
        return not any(t.met(observations, enforce_min_reclaim=True) for t in self.thresholds)
