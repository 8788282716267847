"""Events: what the kubelet would post as core/v1 Events, recorded on the node.

Until pkletd talks to an API server, an event is one log line
(``event type=Warning reason=Unhealthy object=default/web message="..."``) and an
entry in a bounded list that ``pkletd status --json`` shows. Reasons are the
kubelet's stable strings.
"""

from __future__ import annotations

import collections
import enum
import logging
import threading
import time
from dataclasses import asdict, dataclass
from typing import Any

log = logging.getLogger(__name__)

KEEP = 200


class Reason(enum.Enum):
    UNHEALTHY = "Unhealthy"
    KILLING = "Killing"
    PROBE_WARNING = "ProbeWarning"
    FAILED_POST_START_HOOK = "FailedPostStartHook"
    FAILED_PRE_STOP_HOOK = "FailedPreStopHook"
    DEADLINE_EXCEEDED = "DeadlineExceeded"
    BACK_OFF = "BackOff"  # the kubelet's reason for crash-loop and image-pull back-off alike
    CREATED = "Created"
    STARTED = "Started"
    FAILED = "Failed"  # a failed pull, and "Error: ..." for a container that could not start
    # image pulls
    PULLING = "Pulling"
    PULLED = "Pulled"
    ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
    # admission rejections (also the rejected pod's status reason)
    OUT_OF_PODS = "OutOfpods"
    OUT_OF_CPU = "OutOfcpu"
    OUT_OF_MEMORY = "OutOfmemory"
    OUT_OF_EPHEMERAL_STORAGE = "OutOfephemeral-storage"
    NODE_AFFINITY = "NodeAffinity"
    NODE_NAME = "NodeName"
    NODE_PORTS = "NodePorts"
    POD_OS_SELECTOR_MISMATCH = "PodOSSelectorNodeLabelDoesNotMatch"
    POD_OS_NOT_SUPPORTED = "PodOSNotSupported"
    SYSCTL_FORBIDDEN = "SysctlForbidden"


def go_duration(seconds: float) -> str:
    """A duration as the kubelet's messages print one (Go's, in milliseconds): 313ms, 2m0.25s."""
    ms = int(seconds * 1000)
    if ms < 1000:
        return f"{ms}ms" if ms else "0s"
    hours, ms = divmod(ms, 3_600_000)
    minutes, ms = divmod(ms, 60_000)
    text = f"{ms / 1000:.3f}".rstrip("0").rstrip(".") + "s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    return f"{hours}h{text}" if hours else text


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    type: str
    reason: str
    object: str
    message: str


class EventRecorder:
    """Recorded from the loop thread and the pod workers alike; read by ``status``."""

    def __init__(self, keep: int = KEEP) -> None:
        self._recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self._lock = threading.Lock()

    def warning(self, obj: str, reason: Reason, message: str) -> None:
        self._record(Event(time.time(), "Warning", reason.value, obj, message))

    def normal(self, obj: str, reason: Reason, message: str) -> None:
        self._record(Event(time.time(), "Normal", reason.value, obj, message))

    def _record(self, event: Event) -> None:
        with self._lock:
            self._recent.append(asdict(event))  # as status shows it: made once
        log.info(
            "event type=%s reason=%s object=%s message=%r",
            event.type,
            event.reason,
            event.object,
            event.message,
        )

    def recent(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._recent)
