"""Every message that crosses the bus, as frozen dataclasses.

Naming: facts are past tense (``ContainerStarted`` is a PLEG fact), commands are
imperative, request/reply pairs end in ``Request``/``Reply``. Bodies hold plain
data only (str, bytes, int, float, bool, lists and dicts of those, and string enums
and ids, which travel as their strings), so msgpack carries them without any
custom types. Pods travel as Kubernetes API JSON dicts.

Adding a message: define it here and add it to ``MESSAGES`` and to ``FROM_WORKERS`` or
``FROM_PARENT`` (who sends it); the round-trip test covers it automatically, and one the
workers send needs its row in the parent's routing table. Changing a field of an existing
message: bump ``SCHEMA_VERSION``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.apimodel.probespec import ProbeType
from pkletd.ipc.apimodel.references import ObjectKind

SCHEMA_VERSION = 8

# Runtime objects in ``Snapshot.containers``: container ids as they are, sandbox
# ids behind this prefix.
SANDBOX_PREFIX = "sandbox:"


class LifecycleEventType(enum.StrEnum):
    """The kubelet's PodLifecycleEventType names."""

    CONTAINER_STARTED = "ContainerStarted"
    CONTAINER_DIED = "ContainerDied"
    CONTAINER_REMOVED = "ContainerRemoved"
    SANDBOX_CHANGED = "SandboxChanged"


class PlegMode(enum.StrEnum):
    """How PLEG learns of changes: from the runtime's event stream (a relist every 5
    minutes as the safety net), or by relisting every ``--pleg-relist-period``."""

    EVENTED = "evented"
    RELISTING = "relisting"


class ProbeVerdict(enum.StrEnum):
    """A probe's result with its thresholds applied (the kubelet's results.Result)."""

    SUCCESS = "success"
    FAILURE = "failure"
    UNKNOWN = "unknown"


# --- worker -> parent: lifecycle -------------------------------------------------


@dataclass(frozen=True, slots=True)
class Hello:
    """A worker process connected and asks for a snapshot of the node state."""

    kind = "Hello"
    worker: str
    pid: int


@dataclass(frozen=True, slots=True)
class SnapshotRequest:
    """A worker saw a gap in broadcast sequence numbers and wants state again."""

    kind = "SnapshotRequest"
    worker: str


@dataclass(frozen=True, slots=True)
class WorkerReady:
    """A worker applied its snapshot and is serving."""

    kind = "WorkerReady"
    worker: str


@dataclass(frozen=True, slots=True)
class Heartbeat:
    """A worker's main loop is alive."""

    kind = "Heartbeat"
    worker: str


# --- worker -> parent: facts -------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PodsListed:
    """A pod source read all of its pods: the full desired set for that source."""

    kind = "PodsListed"
    source: PodSource
    pods: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class ApiPodsObserved:
    """The API's own view of the pods bound to the node, as the api-watcher's watch sees
    them, mirror pods included: each pod's ``metadata`` (``uid``, ``namespace``, ``name``,
    ``resourceVersion``, ``deletionTimestamp`` when set, ``annotations`` holding only the
    mirror annotation) and ``status``. ``whole``: ``pods`` is every pod (a list); else
    ``pods`` are the ones whose status or mirror metadata changed and ``gone`` the UIDs
    deleted. The parent keeps the set for snapshots and broadcasts each message on to
    the status manager, which compares it with what it wrote."""

    kind = "ApiPodsObserved"
    pods: list[dict[str, Any]]
    gone: list[str] = field(default_factory=list)
    whole: bool = False


@dataclass(frozen=True, slots=True)
class ManifestRejected:
    """A pod source could not use one manifest; the other pods go on."""

    kind = "ManifestRejected"
    source: PodSource
    path: str
    reason: str


@dataclass(frozen=True, slots=True)
class ManifestAccepted:
    """A manifest the source had rejected is read well again, or is gone."""

    kind = "ManifestAccepted"
    source: PodSource
    path: str


@dataclass(frozen=True, slots=True)
class PodLifecycleEvent:
    """PLEG saw a container or sandbox change state without the parent's action.

    ``state`` is the
    object's state as PLEG saw it ("" once removed), so the parent can skip what
    its own calls already showed it.

    A ``ContainerDied`` whose container the runtime shows exited carries the exit, as the
    CRI's ContainerStatus gives it: ``exit_code``, ``finished_at`` (nanoseconds since the
    epoch) and ``oom_killed`` (its reason is ``OOMKilled``), so the parent shows it in the
    pod's status at once; ``exit_code`` is None when PLEG has no exit to tell (another
    event, or a container gone before it was read).
    """

    kind = "PodLifecycleEvent"
    pod_uid: PodUID
    event: LifecycleEventType
    object_id: str
    state: str = ""
    exit_code: int | None = None
    finished_at: int = 0
    oom_killed: bool = False


@dataclass(frozen=True, slots=True)
class RelistCompleted:
    """PLEG finished one relist of the runtime."""

    kind = "RelistCompleted"
    duration_s: float
    containers: int


@dataclass(frozen=True, slots=True)
class PlegModeChanged:
    """PLEG's mode, sent when it changes and with each snapshot it applies; ``reason``
    says why it relists ("" while evented)."""

    kind = "PlegModeChanged"
    mode: PlegMode
    reason: str = ""


@dataclass(frozen=True, slots=True)
class ProbeResult:
    """The prober ran a probe.

    ``result`` is the probe's state after this run,
    with its thresholds applied; ``successes``/``failures`` are the consecutive
    counts, so a restarted prober resumes where this one stopped.
    """

    kind = "ProbeResult"
    pod_uid: PodUID
    container: str
    container_id: str
    probe: ProbeType
    result: ProbeVerdict
    successes: int
    failures: int
    output: str


@dataclass(frozen=True, slots=True)
class ProbeMetrics:
    """The prober's metric samples: ``{"name", "labels", "value"}`` each.

    Sent by the prober when they change; the parent keeps the last set and
    broadcasts it for the http worker to serve at ``/metrics/probes``.
    """

    kind = "ProbeMetrics"
    samples: list[dict[str, Any]]


# --- worker -> parent: the cluster ------------------------------------------------


@dataclass(frozen=True, slots=True)
class NodeReported:
    """The node-lease worker's state, sent when it changes: whether the Node is
    registered, when (wall-clock seconds) the lease was last renewed and the node status
    last written, the last API error ("" while calls succeed) and the node's conditions
    as last written (Ready, MemoryPressure, ...: "True" or "False")."""

    kind = "NodeReported"
    registered: bool
    lease_renewed_at: float
    status_reported_at: float
    api_error: str
    conditions: dict[str, str] = field(default_factory=dict)  # type -> "True"/"False"


@dataclass(frozen=True, slots=True)
class PodDeleted:
    """The status manager deleted a terminated pod from the API (or found it gone)."""

    kind = "PodDeleted"
    uid: PodUID


# --- worker -> parent: the API objects pods reference ------------------------------
# Their contents are secrets: never logged, never shown by `pkletd status`.


@dataclass(frozen=True, slots=True)
class ObjectFetched:
    """The pod-objects worker's reading of an object a pod of the node references (a
    ConfigMap or Secret; a claim, volume, CSIDriver or VolumeAttachment, whose ``body``
    is ``persistentvolumes.body_of``): sent when first read, when it changes, and again
    after a restart.
    ``error`` is "" when read; else why not, as the kubelet says it (``configmap "x"
    not found``, or the API's error), with ``missing`` when the API answered 404 (an
    ``optional`` reference is then satisfied). ``strings`` is a ConfigMap's ``data``;
    ``data`` a ConfigMap's ``binaryData`` or a Secret's decoded ``data``."""

    kind = "ObjectFetched"
    object_kind: ObjectKind
    namespace: str
    name: str
    error: str = ""
    missing: bool = False
    strings: dict[str, str] = field(default_factory=dict)
    data: dict[str, bytes] = field(default_factory=dict)
    secret_type: str = ""
    immutable: bool = False
    resource_version: str = ""
    body: dict[str, Any] = field(default_factory=dict)  # a storage object's (``storage``)

    @property
    def known_body(self) -> dict[str, Any] | None:
        """The body as ``persistentvolumes.closure`` reads it: ``{}`` if the object is
        missing, None if it could not be read."""
        return None if self.error and not self.missing else self.body


@dataclass(frozen=True, slots=True)
class TokenIssued:
    """A service account token for a pod's projected ``serviceAccountToken`` source,
    from the TokenRequest API: sent when issued and when refreshed. Keyed as
    ``references.TokenKey`` (pod, service account, audience, requested lifetime);
    ``token`` is "" and ``error`` says why when the request failed."""

    kind = "TokenIssued"
    pod_uid: PodUID
    service_account: str
    audience: str  # "" is the API server's own audiences
    expiration_seconds: int
    token: str = ""
    expires_at: float = 0.0  # wall-clock seconds
    error: str = ""


@dataclass(frozen=True, slots=True)
class ClientCertificateReported:
    """The cert-manager worker's client certificate, sent when it changes: the pair file
    the current link points at ("" while the node has none), its expiry (wall-clock
    seconds), and why the last request failed ("" once it succeeded)."""

    kind = "ClientCertificateReported"
    path: str
    not_after: float
    error: str = ""


@dataclass(frozen=True, slots=True)
class ServicesListed:
    """The Services of one namespace as the service environment variables need them,
    sent for the namespaces of the node's pods and ``default`` once read and when they
    change: each ``{"name", "clusterIP", "ports": [{"name", "port", "protocol"}]}``."""

    kind = "ServicesListed"
    namespace: str
    services: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class RuntimeClassesListed:
    """The cluster's RuntimeClasses as the kubelet's RuntimeClass manager keeps them: the
    runtime handler of each, by class name; sent once listed and whenever one changes."""

    kind = "RuntimeClassesListed"
    handlers: dict[str, str]


# --- worker -> parent: CSI drivers (plugin-watcher) -------------------------------


class CsiDriverInfo(TypedDict):
    """A registered CSI driver as ``CsiDriversListed`` carries it (the fields of
    ``CsiDriverRegistered``)."""

    name: str
    endpoint: str
    node_id: str
    max_volumes: int
    topology: dict[str, str]
    versions: list[str]


@dataclass(frozen=True, slots=True)
class CsiDriverRegistered:
    """A CSI driver registered through ``<root-dir>/plugins_registry``: its Node service's
    unix socket, the node id and volume limit (0: none) its NodeGetInfo gave, its topology
    segments and the versions its registrar offered. A driver registered again (a newer
    one of the same name, or its socket made anew) is sent again: it replaces the old."""

    kind = "CsiDriverRegistered"
    name: str
    endpoint: str
    node_id: str
    max_volumes: int
    topology: dict[str, str]
    versions: list[str]


@dataclass(frozen=True, slots=True)
class CsiDriverGone:
    """A registered CSI driver was deregistered: its socket removed, or its health check
    (GetInfo) failed."""

    kind = "CsiDriverGone"
    name: str


@dataclass(frozen=True, slots=True)
class CsiDriversListed:
    """Every CSI driver registered now, sent once the plugin watcher has registered what
    it found at its start: the parent's registry becomes this set, so a driver that went
    while no watcher ran does not stay."""

    kind = "CsiDriversListed"
    drivers: list[CsiDriverInfo]


# --- worker -> parent: the node's shutdown (systemd-logind) ----------------------


@dataclass(frozen=True, slots=True)
class NodeShutdownStarted:
    """logind announced a shutdown (``PrepareForShutdown(true)``, or its
    ``PreparingForShutdown`` property found true on connecting)."""

    kind = "NodeShutdownStarted"


@dataclass(frozen=True, slots=True)
class NodeShutdownCancelled:
    """logind said the shutdown it announced was cancelled (``PrepareForShutdown(false)``);
    the worker has taken its delay lock again."""

    kind = "NodeShutdownCancelled"


@dataclass(frozen=True, slots=True)
class InhibitorReported:
    """The node-shutdown worker's state, sent when it changes: whether it holds its delay
    inhibitor lock, logind's ``InhibitDelayMaxUSec`` in seconds (0 until read), and why it
    cannot do its job ("" while it can: logind unreachable, a delay shorter than the grace
    period)."""

    kind = "InhibitorReported"
    held: bool
    delay_max_s: float
    error: str = ""


# --- garbage collection: image-gc -> parent -> image-gc -----------------------------


class GarbageKind(enum.StrEnum):
    """What one collection looked at: the kubelet's container GC (dead containers, dead
    sandboxes, pod log dirs; every minute) or its image GC (every five minutes)."""

    CONTAINERS = "containers"
    IMAGES = "images"


class DeadContainer(TypedDict):
    """A container that is not running, of the pod ``pod_uid``, by its container name."""

    id: str
    pod_uid: str
    name: str


class DeadSandbox(TypedDict):
    """A sandbox that is not ready and holds no container."""

    id: str
    pod_uid: str


class PodLogDir(TypedDict):
    """``<podLogsDir>/<name>``, the log dir of the pod ``pod_uid`` (``<ns>_<pod>_<uid>``)."""

    name: str
    pod_uid: str


class UnusedImage(TypedDict):
    """An image no container uses: its id, its size in bytes, and whether it has been
    unused for longer than ``imageMaximumGCAge`` (then removed whatever the disk usage)."""

    id: str
    size: int
    expired: bool


class ImageFsUsage(TypedDict):
    """The image filesystem as statfs sees it, in bytes (the kubelet's ImageFsStats), and
    the percent of it used as image GC counts it (what is not available)."""

    capacity_bytes: int
    available_bytes: int
    usage_percent: int


@dataclass(frozen=True, slots=True)
class GarbageFound:
    """The image-gc worker's decision for one collection: what it would remove, in the
    order to remove it (oldest first; images least recently used first). The parent
    checks each candidate against its own book and removes what it agrees to.

    ``wanted_bytes``: for images, how much to free (from the thresholds; 0 when usage is
    under the high threshold): the parent removes the ``expired`` images, then the others
    in order until that much is freed. ``reclaim``: the collection a ``ReclaimRequested``
    asked for (every unused image; no shortfall is an error). ``error``: why the worker
    could not decide ("" when it could); ``image_fs`` is the filesystem it read."""

    kind = "GarbageFound"
    collection: GarbageKind
    reclaim: bool = False
    containers: list[DeadContainer] = field(default_factory=list)
    sandboxes: list[DeadSandbox] = field(default_factory=list)
    log_dirs: list[PodLogDir] = field(default_factory=list)
    images: list[UnusedImage] = field(default_factory=list)
    wanted_bytes: int = 0
    image_fs: ImageFsUsage | None = None
    error: str = ""


@dataclass(frozen=True, slots=True)
class ReclaimRequested:
    """Free node-level disk now: every dead container beyond the policy and every unused
    image old enough (the kubelet eviction manager's ``reclaimNodeLevelResources``). A
    worker sends it to the parent, which broadcasts it; the image-gc worker collects at
    once and ``GarbageCollected`` with ``reclaim`` says what it freed."""

    kind = "ReclaimRequested"
    reason: str


@dataclass(frozen=True, slots=True)
class GarbageCollected:
    """Broadcast: the parent carried out one ``GarbageFound``: how many of each it removed,
    the bytes the removed images took, and what failed ("" when nothing did)."""

    kind = "GarbageCollected"
    collection: GarbageKind
    reclaim: bool
    containers: int
    sandboxes: int
    log_dirs: int
    images: int
    freed_bytes: int
    error: str


# --- worker -> parent: eviction ---------------------------------------------------


class SignalReading(TypedDict):
    """One eviction signal as measured: ``available`` of ``capacity`` (bytes, inodes or
    process ids)."""

    signal: str
    available: int
    capacity: int


class ThresholdReading(TypedDict):
    """One threshold against its signal's reading: ``value`` as configured (``100Mi``,
    ``10%``), ``grace_s`` 0 for a hard threshold, ``quantity`` what ``value`` comes to at
    the signal's capacity (0 when the signal could not be read), ``met`` whether the
    signal is below it now (grace periods aside)."""

    signal: str
    value: str
    grace_s: float
    quantity: int
    met: bool


class PodUsage(TypedDict):
    """What one pod uses of the resource being reclaimed (bytes, inodes or processes, as
    its ranking counts them), and each container's usage for the eviction message."""

    uid: str
    usage: int
    containers: dict[str, int]


class LimitExceeded(TypedDict):
    """A pod over one of its local storage limits (``localStorageCapacityIsolation``):
    the kubelet's eviction signal for it (``emptydirfs.limit``, ``ephemeralpodfs.limit``,
    ``ephemeralcontainerfs.limit``) and its eviction message."""

    uid: str
    signal: str
    message: str


@dataclass(frozen=True, slots=True)
class SignalsObserved:
    """The eviction worker measured the eviction signals (every monitoring period): each
    signal, each threshold against it, the pressure conditions in force (the transition
    period applied: ``MemoryPressure``, ``DiskPressure``, ``PIDPressure``) and the
    worker's own state, which the parent hands back in ``Snapshot.eviction``."""

    kind = "SignalsObserved"
    signals: list[SignalReading]
    thresholds: list[ThresholdReading]
    conditions: list[str]
    state: dict[str, Any]


@dataclass(frozen=True, slots=True)
class EvictionThresholdMet:
    """A threshold is met past its grace period: the worker sets out to reclaim
    ``resource`` (memory, ephemeral-storage, inodes, pids). With ``reclaim`` it asks for
    node-level reclaim first (``ReclaimRequested``) and measures again once it is done."""

    kind = "EvictionThresholdMet"
    signal: str
    resource: str
    reclaim: bool


@dataclass(frozen=True, slots=True)
class EvictionNeeded:
    """Only evicting a pod can relieve the threshold: the parent evicts one, ranked by
    ``pods`` (the pods the worker measured; one it did not is ranked first). ``hard``: a
    hard threshold's (the pod gets a 1 s grace period, a soft one's at most
    ``evictionMaxPodGracePeriod``); ``threshold`` and ``available`` as the kubelet's
    message prints them.

    With ``limits`` (``over_limits``), pods over their local storage limits: the parent
    evicts each of them (1 s grace period) and none for a threshold this round."""

    kind = "EvictionNeeded"
    signal: str
    resource: str
    hard: bool
    threshold: str
    available: str
    pods: list[PodUsage]
    limits: list[LimitExceeded] = field(default_factory=list)

    @classmethod
    def over_limits(cls, limits: list[LimitExceeded]) -> EvictionNeeded:
        return cls("", "ephemeral-storage", True, "", "", [], limits)


# --- parent -> worker ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The node state a (re)started worker begins from.

    ``seq`` is the sequence number of the last broadcast folded into this
    snapshot; broadcasts with a higher number follow. ``containers`` maps container
    and sandbox ids to the state the parent last saw ("running", "exited", ...).
    ``probes`` holds the last ``ProbeResult`` of every probe (as field maps) and
    ``probe_metrics`` the last ``ProbeMetrics`` samples. ``node`` is the Node object
    the parent registers (metadata, spec and the static part of its status);
    ``terminated`` lists the pods deleted in the API whose termination finished and
    which wait for their final delete (``{"uid", "namespace", "name"}`` each);
    ``eviction`` is the eviction worker's last state (``SignalsObserved.state``);
    ``csi_drivers`` the CSI drivers registered now (``CsiDriversChanged.drivers``).
    ``api_pods`` is the API's view of the node's pods (``ApiPodsObserved``), complete
    once ``api_listed``.
    """

    kind = "Snapshot"
    seq: int
    pods: list[dict[str, Any]]
    containers: dict[str, str]
    probes: list[dict[str, Any]] = field(default_factory=list)
    probe_metrics: list[dict[str, Any]] = field(default_factory=list)
    node: dict[str, Any] = field(default_factory=dict)
    terminated: list[dict[str, Any]] = field(default_factory=list)
    eviction: dict[str, Any] = field(default_factory=dict)
    csi_drivers: dict[str, str] = field(default_factory=dict)
    api_pods: list[dict[str, Any]] = field(default_factory=list)
    api_listed: bool = False


@dataclass(frozen=True, slots=True)
class CsiDriversChanged:
    """Broadcast: the parent's registry of CSI drivers changed; ``drivers`` is every driver
    registered now, its Node service's unix socket by driver name (for the http worker's
    volume stats: it only reads, through NodeGetVolumeStats)."""

    kind = "CsiDriversChanged"
    drivers: dict[str, str]


@dataclass(frozen=True, slots=True)
class PodStatusUpdated:
    """Broadcast: a pod (with its status) as the parent now reports it."""

    kind = "PodStatusUpdated"
    pod: dict[str, Any]
    containers: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class PodForgotten:
    """Broadcast: the parent no longer has this pod (removed and cleaned up)."""

    kind = "PodForgotten"
    uid: PodUID


@dataclass(frozen=True, slots=True)
class PodTerminated:
    """Broadcast: a pod deleted in the API has stopped; delete it with grace 0."""

    kind = "PodTerminated"
    uid: PodUID
    namespace: str
    name: str


@dataclass(frozen=True, slots=True)
class EventRecorded:
    """Broadcast: an event as the kubelet would post it (a core/v1 Event's fields:
    ``type``, ``reason``, ``message``, ``involvedObject``, ``time`` in wall-clock seconds)."""

    kind = "EventRecorded"
    event: dict[str, Any]


@dataclass(frozen=True, slots=True)
class ParentAlive:
    """Broadcast: the parent's sync loop ran; feeds the syncloop health check.
    ``pleg_ok``: PLEG relisted within the last 3 minutes (the kubelet's threshold);
    ``shutting_down``: the node is shutting down (Ready turns False); ``pressure``: the
    pressure conditions in force (``MemoryPressure``...), as the eviction worker said;
    ``volumes_in_use``: the CSI volumes staged or published here (``volumesInUse``)."""

    kind = "ParentAlive"
    sync_loop_ok: bool
    pleg_ok: bool = True
    shutting_down: bool = False
    pressure: list[str] = field(default_factory=list)
    volumes_in_use: list[str] = field(default_factory=list)  # unique names, sorted


@dataclass(frozen=True, slots=True)
class ReleaseShutdownInhibitor:
    """Broadcast: the node's pods are stopped (or its shutdown grace period is over): the
    node-shutdown worker closes its delay lock, and logind goes on with the shutdown. Sent
    again when the worker (re)starts after that."""

    kind = "ReleaseShutdownInhibitor"


# --- parent -> http worker: the parent's metrics -----------------------------------

MetricType = Literal["counter", "gauge", "histogram"]


class MetricSeries(TypedDict):
    """One series of a ``MetricFamily``: its label values, in the family's label order;
    a counter's or a gauge's value, or a histogram's sum; and a histogram's cumulative
    bucket counts, one per bound and a last one for ``+Inf`` (its count), else empty."""

    labels: list[str]
    value: float
    buckets: list[int]


class MetricFamily(TypedDict):
    """A metric family as Prometheus names it: ``bounds`` are a histogram's bucket upper
    bounds without ``+Inf`` (empty for counters and gauges)."""

    name: str
    type: MetricType
    help: str
    labels: list[str]
    bounds: list[float]
    series: list[MetricSeries]


@dataclass(frozen=True, slots=True)
class MetricsReport:
    """Broadcast every few seconds: the metrics the parent keeps (pods, PLEG, runtime
    operations, workers, the bus) for the http worker to serve at ``/metrics``. Its size
    is bounded: every label takes its values from a closed set (operation types, worker
    names, message kinds, container states)."""

    kind = "MetricsReport"
    families: list[MetricFamily]


Message = (
    Hello
    | SnapshotRequest
    | WorkerReady
    | Heartbeat
    | PodsListed
    | ApiPodsObserved
    | ManifestRejected
    | ManifestAccepted
    | PodLifecycleEvent
    | RelistCompleted
    | PlegModeChanged
    | ProbeResult
    | ProbeMetrics
    | NodeShutdownStarted
    | NodeShutdownCancelled
    | InhibitorReported
    | ReleaseShutdownInhibitor
    | Snapshot
    | PodStatusUpdated
    | PodForgotten
    | ParentAlive
    | MetricsReport
    | NodeReported
    | PodDeleted
    | PodTerminated
    | EventRecorded
    | ObjectFetched
    | TokenIssued
    | ClientCertificateReported
    | ServicesListed
    | RuntimeClassesListed
    | GarbageFound
    | ReclaimRequested
    | GarbageCollected
    | SignalsObserved
    | EvictionThresholdMet
    | EvictionNeeded
    | CsiDriverRegistered
    | CsiDriverGone
    | CsiDriversListed
    | CsiDriversChanged
)

MESSAGES: dict[str, type[Message]] = {
    cls.kind: cls
    for cls in (
        Hello,
        SnapshotRequest,
        WorkerReady,
        Heartbeat,
        PodsListed,
        ApiPodsObserved,
        ManifestRejected,
        ManifestAccepted,
        PodLifecycleEvent,
        RelistCompleted,
        PlegModeChanged,
        ProbeResult,
        ProbeMetrics,
        NodeShutdownStarted,
        NodeShutdownCancelled,
        InhibitorReported,
        ReleaseShutdownInhibitor,
        Snapshot,
        PodStatusUpdated,
        PodForgotten,
        ParentAlive,
        MetricsReport,
        NodeReported,
        PodDeleted,
        PodTerminated,
        EventRecorded,
        ObjectFetched,
        TokenIssued,
        ClientCertificateReported,
        ServicesListed,
        RuntimeClassesListed,
        GarbageFound,
        ReclaimRequested,
        GarbageCollected,
        SignalsObserved,
        EvictionThresholdMet,
        EvictionNeeded,
        CsiDriverRegistered,
        CsiDriverGone,
        CsiDriversListed,
        CsiDriversChanged,
    )
}

# Who sends what: the workers (to the parent, which routes each: supervisor/routing.py),
# the parent (replies and broadcasts), or both (a worker's ReclaimRequested, which the
# parent broadcasts to image-gc). Every message is in one or both.
FROM_WORKERS: frozenset[type[Message]] = frozenset(
    {
        Hello,
        SnapshotRequest,
        WorkerReady,
        Heartbeat,
        PodsListed,
        ApiPodsObserved,
        ManifestRejected,
        ManifestAccepted,
        PodLifecycleEvent,
        RelistCompleted,
        PlegModeChanged,
        ProbeResult,
        ProbeMetrics,
        NodeShutdownStarted,
        NodeShutdownCancelled,
        InhibitorReported,
        NodeReported,
        PodDeleted,
        ObjectFetched,
        TokenIssued,
        ClientCertificateReported,
        ServicesListed,
        RuntimeClassesListed,
        GarbageFound,
        ReclaimRequested,
        SignalsObserved,
        EvictionThresholdMet,
        EvictionNeeded,
        CsiDriverRegistered,
        CsiDriverGone,
        CsiDriversListed,
    }
)
FROM_PARENT: frozenset[type[Message]] = frozenset(
    {
        Snapshot,
        PodStatusUpdated,
        PodForgotten,
        PodTerminated,
        EventRecorded,
        ParentAlive,
        ReleaseShutdownInhibitor,
        MetricsReport,
        GarbageCollected,
        ReclaimRequested,
        CsiDriversChanged,
        ApiPodsObserved,
    }
)
