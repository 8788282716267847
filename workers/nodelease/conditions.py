"""The Node's conditions, computed as the kubelet's condition setters compute them.

Inputs are plain values: ``RuntimeState`` (what the last CRI Status said, the
kubelet's ``runtimeState``), ``ParentHealth`` (what the parent's ``ParentAlive``
broadcasts said: its sync loop and PLEG) and the limits. ``ready_errors`` lists why the
node is not ready, in the kubelet's words and order (runtime errors, with the health
checks, then network errors, then "node is shutting down" while the parent says a
graceful node shutdown is under way); ``set_conditions`` updates a Node's conditions in place
of the old ones: MemoryPressure, DiskPressure and PIDPressure (True while the parent says
the eviction worker found the node under that pressure, with the kubelet's reasons) and
Ready last. A condition's
``lastHeartbeatTime`` is the time of this write; its ``lastTransitionTime`` changes only
when its status does.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from pkletd.ipc.runtime.cri import RuntimeCondition
from pkletd.workers.nodelease.timing import go_duration, rfc3339

SHUTTING_DOWN = "node is shutting down"  # the node shutdown manager's ShutdownStatus
NETWORK_UNKNOWN = "network state unknown"  # the kubelet's ErrNetworkUnknown, until checked
PLEG_THRESHOLD_S = 180.0  # the kubelet's relistThreshold; ParentAlive.pleg_ok says past it
REQUIRED_CAPACITY = ("cpu", "memory", "pods")
# required too with localStorageCapacityIsolation, as the kubelet's ReadyCondition has it
STORAGE_CAPACITY = "ephemeral-storage"
# type -> (reason, message) when the node is under that pressure, and when it is not
UNDER_PRESSURE = {
    "MemoryPressure": ("KubeletHasInsufficientMemory", "kubelet has insufficient memory available"),
    "DiskPressure": ("KubeletHasDiskPressure", "kubelet has disk pressure"),
    "PIDPressure": ("KubeletHasInsufficientPID", "kubelet has insufficient PID available"),
}
PRESSURE = {
    "MemoryPressure": ("KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
    "DiskPressure": ("KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
    "PIDPressure": ("KubeletHasSufficientPID", "kubelet has sufficient PID available"),
}
READY = ("KubeletReady", "kubelet is posting ready status")
NOT_READY = "KubeletNotReady"

Condition = dict[str, Any]


@dataclass(frozen=True, slots=True)
class RuntimeState:
    """The kubelet's runtimeState after its last ``updateRuntimeUp``."""

    synced_at: float | None = None  # monotonic: last CRI Status that said RuntimeReady
    runtime_error: str = ""
    network_error: str = NETWORK_UNKNOWN


@dataclass(frozen=True, slots=True)
class ParentHealth:
    """What the parent's broadcasts said; times are monotonic."""

    alive_at: float  # the last ParentAlive (or snapshot)
    sync_loop_ok: bool = True
    pleg_ok: bool = True
    pleg_bad_since: float | None = None  # the first ParentAlive of this unhealthy spell
    shutting_down: bool = False  # a graceful node shutdown is under way
    pressure: frozenset[str] = frozenset()  # the pressure conditions in force
    volumes_in_use: tuple[str, ...] = ()  # the CSI volumes mounted here (volumesInUse)

    def heard(
        self,
        now: float,
        sync_loop_ok: bool,
        pleg_ok: bool,
        shutting_down: bool = False,
        pressure: Iterable[str] = (),
        volumes_in_use: Iterable[str] = (),
    ) -> ParentHealth:
        """The health after a ParentAlive at ``now``."""
        bad_since = None if pleg_ok else (self.pleg_bad_since or now)
        in_use = tuple(sorted(volumes_in_use))
        return ParentHealth(
            now, sync_loop_ok, pleg_ok, bad_since, shutting_down, frozenset(pressure), in_use
        )


@dataclass(frozen=True, slots=True)
class Limits:
    runtime_down_after: float = 30.0  # the kubelet's maxWaitForContainerRuntime
    parent_silent_after: float = 30.0  # no ParentAlive this long: the sync loop is not healthy
    required_capacity: tuple[str, ...] = (*REQUIRED_CAPACITY, STORAGE_CAPACITY)


def after_status(
    previous: RuntimeState, conditions: Sequence[RuntimeCondition] | None, now: float
) -> RuntimeState:
    """The state after a CRI Status call (``None``: the call failed), as ``updateRuntimeUp``."""
    if conditions is None:
        return previous  # "Container runtime sanity check failed": nothing is updated
    found = {c.type: c for c in conditions}
    network = found.get("NetworkReady")
    network_error = "" if network and network.status else _not_ready("network", network)
    runtime = found.get("RuntimeReady")
    if runtime is None or not runtime.status:
        return replace(previous, runtime_error=_not_ready("", runtime), network_error=network_error)
    return RuntimeState(synced_at=now, runtime_error="", network_error=network_error)


def _not_ready(what: str, condition: RuntimeCondition | None) -> str:
    name = f"container runtime {what} not ready" if what else "container runtime not ready"
    if condition is None:
        return f"{name}: <nil>"
    status = "true" if condition.status else "false"
    detail = f"{condition.type}={status} reason:{condition.reason} message:{condition.message}"
    return f"{name}: {detail}"


def ready_errors(
    runtime: RuntimeState,
    parent: ParentHealth,
    limits: Limits,
    now: float,
    capacity: dict[str, Any],
) -> list[str]:
    """Why the node is not ready, in the kubelet's order; empty when it is."""
    errors = []
    if runtime.synced_at is None:
        errors.append("container runtime status check may not have completed yet")
    elif now >= runtime.synced_at + limits.runtime_down_after:
        errors.append("container runtime is down")
    errors += health_check_errors(parent, limits, now)
    if runtime.runtime_error:
        errors.append(runtime.runtime_error)
    if runtime.network_error:
        errors.append(runtime.network_error)
    if parent.shutting_down:
        errors.append(SHUTTING_DOWN)
    missing = [name for name in limits.required_capacity if name not in capacity]
    if missing:
        errors.append(f"Missing node capacity for resources: {', '.join(missing)}")
    return errors


def health_check_errors(parent: ParentHealth, limits: Limits, now: float) -> list[str]:
    """The kubelet's runtime health checks (``<name> is not healthy: <why>``)."""
    errors = []
    if not parent.pleg_ok:
        # The parent says PLEG is past the threshold; the time is this worker's estimate.
        bad_for = now - (parent.pleg_bad_since if parent.pleg_bad_since is not None else now)
        elapsed = go_duration(PLEG_THRESHOLD_S + bad_for)
        threshold = go_duration(PLEG_THRESHOLD_S)
        errors.append(
            f"PLEG is not healthy: pleg was last seen active {elapsed} ago; "
            f"threshold is {threshold}"
        )
    silent_for = now - parent.alive_at
    if silent_for > limits.parent_silent_after:
        errors.append(
            f"syncloop is not healthy: the sync loop was last seen active "
            f"{go_duration(silent_for)} ago; threshold is {go_duration(limits.parent_silent_after)}"
        )
    elif not parent.sync_loop_ok:
        errors.append("syncloop is not healthy: sync Loop took longer than expected")
    return errors


def aggregate(messages: Sequence[str]) -> str:
    """``utilerrors.NewAggregate(...).Error()``: one message as is, several in brackets."""
    unique = list(dict.fromkeys(messages))
    if len(unique) == 1:
        return unique[0]
    return "[" + ", ".join(unique) + "]"


def set_conditions(
    conditions: Sequence[Condition],
    errors: Sequence[str],
    now: float,
    pressure: Collection[str] = frozenset(),
) -> list[Condition]:
    """The conditions after this write: the pressure conditions (True for those in
    ``pressure``), then Ready."""
    result = [dict(c) for c in conditions]
    stamp = rfc3339(now)
    for kind in PRESSURE:
        under = kind in pressure
        reason, message = (UNDER_PRESSURE if under else PRESSURE)[kind]
        wanted = {"type": kind, "status": str(under), "reason": reason, "message": message}
        _set(result, wanted, stamp)
    if errors:
        ready = {
            "type": "Ready",
            "status": "False",
            "reason": NOT_READY,
            "message": aggregate(errors),
        }
    else:
        ready = {"type": "Ready", "status": "True", "reason": READY[0], "message": READY[1]}
    _set(result, ready, stamp, replace_all=True)
    return result


def _set(
    conditions: list[Condition], wanted: Condition, stamp: str, replace_all: bool = False
) -> None:
    """Update (or append) the condition of ``wanted``'s type as the kubelet's setters do:
    Ready is replaced whole; a pressure condition keeps its reason while its status holds."""
    for i, old in enumerate(conditions):
        if old.get("type") != wanted["type"]:
            continue
        same = old.get("status") == wanted["status"]
        new = {**old, "lastHeartbeatTime": stamp} if same and not replace_all else dict(wanted)
        new["lastHeartbeatTime"] = stamp
        new["lastTransitionTime"] = old.get("lastTransitionTime", stamp) if same else stamp
        conditions[i] = new
        return
    conditions.append({**wanted, "lastHeartbeatTime": stamp, "lastTransitionTime": stamp})


def condition(conditions: Sequence[Condition], kind: str) -> Condition | None:
    return next((c for c in conditions if c.get("type") == kind), None)
