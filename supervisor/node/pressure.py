"""The parent's record of what the eviction worker last said about the node.

``NodePressure`` keeps the last ``SignalsObserved``: the pressure conditions in force
(for admission, and for the node-lease worker through ``ParentAlive.pressure``), the
worker's state (handed back in ``Snapshot.eviction``) and what ``pkletd status`` shows:
each signal's value against its thresholds. It logs each change of the conditions and
records the kubelet's ``EvictionThresholdMet`` warning on the node (``Attempting to
reclaim memory``) for each ``EvictionThresholdMet``.
"""

from __future__ import annotations

import logging
from typing import Any

from pkletd.ipc.bus.messages import EvictionThresholdMet, SignalsObserved
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.supervisor.pods.events import EventRecorder, ObjectRef, Reason

log = logging.getLogger(__name__)


class NodePressure:
    def __init__(self, node_name: str, events: EventRecorder, clock: Clock = SYSTEM_CLOCK) -> None:
        self._node = node_name
        self._events = events
        self._clock = clock
        self._last: SignalsObserved | None = None
        self._observed_at = 0.0  # wall clock, for status

    @property
    def conditions(self) -> tuple[str, ...]:
        return tuple(self._last.conditions) if self._last is not None else ()

    @property
    def state(self) -> dict[str, Any]:
        return dict(self._last.state) if self._last is not None else {}

    def observed(self, message: SignalsObserved) -> bool:
        """Keep the reading; True when the conditions in force changed."""
        before = self.conditions
        self._last, self._observed_at = message, self._clock.time()
        if self.conditions == before:
            return False
        log.info(
            "pressure conditions changed conditions=%s was=%s",
            ",".join(self.conditions) or "none",
            ",".join(before) or "none",
        )
        return True

    def threshold_met(self, message: EvictionThresholdMet) -> None:
        self._events.warning(
            ObjectRef.node(self._node),
            Reason.EVICTION_THRESHOLD_MET,
            f"Attempting to reclaim {message.resource}",
        )

    def status(self) -> dict[str, Any]:
        """``pkletd status``'s ``pressure``: every signal read with its thresholds."""
        last = self._last
        if last is None:
            return {"observed_at": 0.0, "conditions": [], "signals": []}
        signals = []
        for reading in last.signals:
            thresholds = [
                {
                    "value": t["value"],
                    "quantity": t["quantity"],
                    "grace_s": t["grace_s"],
                    "met": t["met"],
                }
                for t in last.thresholds
                if t["signal"] == reading["signal"]
            ]
            signals.append({**reading, "thresholds": thresholds})
        return {
            "observed_at": self._observed_at,
            "conditions": list(last.conditions),
            "signals": signals,
        }
