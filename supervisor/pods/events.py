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
from dataclasses import dataclass
from typing import Any

from pkletd.ipc.apimodel.podspec import Pod

log = logging.getLogger(__name__)

KEEP = 200
UNSENT = 1000  # events not yet published; older ones are dropped


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
    FAILED_MOUNT = "FailedMount"  # a volume could not be set up (or brought up to date)
    FAILED_CREATE_POD_SANDBOX = "FailedCreatePodSandBox"  # RuntimeClass, DNS, hostname, runtime
    INVALID_ENV_NAMES = "InvalidEnvironmentVariableNames"  # envFrom keys skipped
    # pod DNS: no clusterDNS for a ClusterFirst pod (node and pod), limits cut, the node's file
    MISSING_CLUSTER_DNS = "MissingClusterDNS"
    DNS_CONFIG_FORMING = "DNSConfigForming"
    CHECK_LIMITS_FOR_RESOLV_CONF = "CheckLimitsForResolvConf"
    # image pulls
    PULLING = "Pulling"
    PULLED = "Pulled"
    ERR_IMAGE_NEVER_PULL = "ErrImageNeverPull"
    FAILED_TO_RETRIEVE_IMAGE_PULL_SECRET = "FailedToRetrieveImagePullSecret"
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
    RUNTIME_CLASS_UNAVAILABLE = "RuntimeClassUnavailable"  # standalone: no RuntimeClass to read
    APPARMOR = "AppArmor"
    SUPPLEMENTAL_GROUPS_POLICY_NOT_SUPPORTED = "SupplementalGroupsPolicyNotSupported"
    POD_LEVEL_RESOURCES_NOT_SUPPORTED = "PodLevelResourcesNotSupported"
    POD_FEATURE_UNSUPPORTED = "PodFeatureUnsupported"
    INVALID_POD_SPEC = "InvalidPodSpec"  # pkletd's: a field it cannot read (the message says)
    NODE_SHUTDOWN = "NodeShutdown"  # also the node's event when a shutdown starts or is cancelled
    # eviction: a pod evicted or refused under pressure (also its status reason), and the
    # node's warning when a threshold is met
    EVICTED = "Evicted"
    EVICTION_THRESHOLD_MET = "EvictionThresholdMet"
    # the node's own
    STARTING = "Starting"
    NODE_READY = "NodeReady"
    NODE_NOT_READY = "NodeNotReady"
    NODE_HAS_SUFFICIENT_MEMORY = "NodeHasSufficientMemory"
    NODE_HAS_INSUFFICIENT_MEMORY = "NodeHasInsufficientMemory"
    NODE_HAS_NO_DISK_PRESSURE = "NodeHasNoDiskPressure"
    NODE_HAS_DISK_PRESSURE = "NodeHasDiskPressure"
    NODE_HAS_SUFFICIENT_PID = "NodeHasSufficientPID"
    NODE_HAS_INSUFFICIENT_PID = "NodeHasInsufficientPID"
    # garbage collection, on the node
    IMAGE_GC_FAILED = "ImageGCFailed"
    FREE_DISK_SPACE_FAILED = "FreeDiskSpaceFailed"
    INVALID_DISK_CAPACITY = "InvalidDiskCapacity"
    CONTAINER_GC_FAILED = "ContainerGCFailed"


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


def _container_list(pod: Pod, name: str) -> str:
    """The spec list that holds the container ``name``."""
    if any(c.name == name for c in pod.init_containers):
        return "initContainers"
    if any(c.name == name for c in pod.ephemeral_containers):
        return "ephemeralContainers"
    return "containers"


@dataclass(frozen=True, slots=True)
class ObjectRef:
    """What an event is about: a pod (a container of it, by ``fieldPath``) or the node."""

    kind: str
    namespace: str
    name: str
    uid: str
    field_path: str = ""

    @classmethod
    def of(cls, pod: Pod, container: str = "") -> ObjectRef:
        """The pod, or its container by name (``spec.containers{name}``, as the kubelet)."""
        path = ""
        if container:
            path = f"spec.{_container_list(pod, container)}{{{container}}}"
        return cls("Pod", pod.namespace, pod.name, pod.uid, path)

    @classmethod
    def node(cls, name: str) -> ObjectRef:
        return cls("Node", "", name, name)  # the kubelet's node reference: uid = name

    def shown(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def api(self) -> dict[str, str]:
        """As an Event's ``involvedObject``."""
        found = {"kind": self.kind, "name": self.name, "uid": self.uid, "apiVersion": "v1"}
        if self.namespace:
            found["namespace"] = self.namespace
        if self.field_path:
            found["fieldPath"] = self.field_path
        return found


@dataclass(frozen=True, slots=True)
class Event:
    time: float
    type: str
    reason: str
    object: ObjectRef
    message: str

    def shown(self) -> dict[str, Any]:
        """As ``pkletd status --json`` lists it."""
        return {
            "time": self.time,
            "type": self.type,
            "reason": self.reason,
            "object": self.object.shown(),
            "message": self.message,
        }

    def api(self) -> dict[str, Any]:
        """As ``EventRecorded`` carries it to the status manager."""
        return {
            "time": self.time,
            "type": self.type,
            "reason": self.reason,
            "message": self.message,
            "involvedObject": self.object.api(),
        }


class EventRecorder:
    """Recorded from the loop thread and the pod workers alike; read by ``status``, and
    taken (``take_new``) by the loop thread, which publishes them for the API."""

    def __init__(self, keep: int = KEEP) -> None:
        self._recent: collections.deque[dict[str, Any]] = collections.deque(maxlen=keep)
        self._new: collections.deque[Event] = collections.deque(maxlen=UNSENT)
        self._lock = threading.Lock()

    def warning(self, obj: ObjectRef, reason: Reason, message: str) -> None:
        self._record(Event(time.time(), "Warning", reason.value, obj, message))

    def normal(self, obj: ObjectRef, reason: Reason, message: str) -> None:
        self._record(Event(time.time(), "Normal", reason.value, obj, message))

    def _record(self, event: Event) -> None:
        with self._lock:
            self._recent.append(event.shown())  # as status shows it: made once
            self._new.append(event)
        log.info(
            "event type=%s reason=%s object=%s message=%r",
            event.type,
            event.reason,
            event.object.shown(),
            event.message,
        )

    def recent(self) -> list[dict[str, Any]]:
        with self._lock:
            return list(self._recent)

    def take_new(self) -> list[Event]:
        """The events recorded since the last call, oldest first."""
        with self._lock:
            taken = list(self._new)
            self._new.clear()
            return taken
