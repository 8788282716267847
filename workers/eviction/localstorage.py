"""Local storage limits (``localStorageCapacityIsolation``), decided as the kubelet's
eviction manager does in ``localStorageEviction``, over a pod's spec and its Summary stats
(``nodestats.summary``); pure.

A pod is over its limits at the first of (one message each, the kubelet's):

1. an emptyDir (any medium) with a ``sizeLimit`` above zero whose directory uses more
   (``emptyDirLimitEviction``): ``Usage of EmptyDir volume "cache" exceeds the limit
   "1Mi". ``;
2. the pod's ephemeral-storage limit, when any of its containers has one (the sum of its
   containers' and sidecars', or an init container's with the sidecars before it if
   larger, plus the pod's overhead), against the pod's ``ephemeral-storage``: writable
   layers, logs, local ephemeral volumes, its own log files, etc-hosts
   (``podEphemeralStorageLimitEviction``): ``Pod ephemeral local storage usage exceeds the
   total limit of containers 4Mi. ``;
3. a regular container's non-zero ephemeral-storage limit against its logs, plus its
   writable layer unless the image filesystem is a device of its own
   (``containerEphemeralStorageLimitEviction``): ``Container app exceeded its local
   ephemeral storage limit "2Mi". ``.

Quantities are printed as Go's ``Quantity.String()`` prints them, in the format they were
written in (a sum in its first term's).
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from pkletd.ipc.apimodel import quantity
from pkletd.ipc.bus.messages import LimitExceeded

Json = Mapping[str, Any]
STORAGE = "ephemeral-storage"
# the kubelet's emptyDirMessageFmt, podEphemeralStorageMessageFmt and
# containerEphemeralStorageMessageFmt
EMPTY_DIR_MESSAGE = 'Usage of EmptyDir volume "{}" exceeds the limit "{}". '
POD_MESSAGE = "Pod ephemeral local storage usage exceeds the total limit of containers {}. "
CONTAINER_MESSAGE = 'Container {} exceeded its local ephemeral storage limit "{}". '


class LimitSignal(enum.StrEnum):
    """The kubelet's eviction signals (and metric labels) for these evictions."""

    EMPTY_DIR = "emptydirfs.limit"
    POD = "ephemeralpodfs.limit"
    CONTAINER = "ephemeralcontainerfs.limit"


@dataclass(frozen=True, slots=True)
class Limit:
    amount: Fraction
    form: quantity.Format  # the format it was written in, as the API keeps it

    def __add__(self, other: Limit) -> Limit:
        return Limit(self.amount + other.amount, self.form)

    @property
    def shown(self) -> str:
        return quantity.canonical(self.amount, self.form)


def limit_of(raw: Any) -> Limit | None:
    """A quantity as written in a pod spec; None if it is not one."""
    try:
        return Limit(quantity.parse(raw), quantity.format_of(str(raw)))
    except quantity.BadQuantity:
        return None


def enforced(spec: Json) -> bool:
    """Whether the pod has any limit to check (only such pods are measured)."""
    return bool(_size_limits(spec)) or pod_limit(spec) is not None


def over_limits(
    summary_pods: Iterable[Json], specs: Mapping[str, Json], dedicated_imagefs: bool
) -> list[LimitExceeded]:
    """Each measured pod over one of its limits, with the first one it is over."""
    found = []
    for stats in summary_pods:
        uid = str(stats["podRef"]["uid"])
        spec = specs.get(uid)
        if spec is None:
            continue
        exceeded = (
            _empty_dir(spec, stats)
            or _pod_total(spec, stats)
            or _container(spec, stats, dedicated_imagefs)
        )
        if exceeded is not None:
            signal, message = exceeded
            found.append(LimitExceeded(uid=uid, signal=str(signal), message=message))
    return found


def _size_limits(spec: Json) -> list[tuple[str, Limit]]:
    """(volume, sizeLimit) of each emptyDir with a positive sizeLimit, in spec order."""
    found = []
    for volume in spec.get("volumes") or []:
        empty_dir = volume.get("emptyDir")
        size = limit_of(empty_dir.get("sizeLimit")) if isinstance(empty_dir, dict) else None
        if size is not None and size.amount > 0:
            found.append((str(volume.get("name", "")), size))
    return found


def _container_limit(container: Json) -> Limit | None:
    limits = (container.get("resources") or {}).get("limits") or {}
    return limit_of(limits[STORAGE]) if STORAGE in limits else None


def _add(total: Limit | None, more: Limit | None) -> Limit | None:
    if total is None:
        return more
    return total if more is None else total + more


def pod_limit(spec: Json) -> Limit | None:
    """The pod's ephemeral-storage limit (``PodLimits``); None if no container has one."""
    total: Limit | None = None
    for container in spec.get("containers") or []:
        total = _add(total, _container_limit(container))
    sidecars: Limit | None = None
    peak: Limit | None = None
    for container in spec.get("initContainers") or []:
        own = _container_limit(container)
        if container.get("restartPolicy") == "Always":
            total, sidecars = _add(total, own), _add(sidecars, own)
            own = sidecars
        else:
            own = _add(own, sidecars)
        if own is not None and (peak is None or own.amount > peak.amount):
            peak = own
    if peak is not None and (total is None or peak.amount > total.amount):
        total = peak
    overhead = limit_of((spec.get("overhead") or {}).get(STORAGE, 0))
    if total is not None and total.amount != 0 and overhead is not None:
        total = Limit(total.amount + overhead.amount, total.form)
    return total


def _used(stats: Json | None) -> int:
    return int((stats or {}).get("usedBytes", 0))


def _empty_dir(spec: Json, stats: Json) -> tuple[LimitSignal, str] | None:
    used = {str(v.get("name")): _used(v) for v in stats.get("volume") or [] if "usedBytes" in v}
    for name, size in _size_limits(spec):
        if name in used and used[name] > size.amount:
            return LimitSignal.EMPTY_DIR, EMPTY_DIR_MESSAGE.format(name, size.shown)
    return None


def _pod_total(spec: Json, stats: Json) -> tuple[LimitSignal, str] | None:
    limit = pod_limit(spec)
    if limit is None or _used(stats.get("ephemeral-storage")) <= limit.amount:
        return None
    return LimitSignal.POD, POD_MESSAGE.format(limit.shown)


def _container(spec: Json, stats: Json, dedicated_imagefs: bool) -> tuple[LimitSignal, str] | None:
    limits = {}
    for container in spec.get("containers") or []:
        limit = _container_limit(container)
        if limit is not None and quantity.ceil_int(limit.amount) != 0:
            limits[str(container.get("name"))] = limit
    for container in stats.get("containers") or []:
        name = str(container.get("name"))
        used = _used(container.get("logs"))
        if not dedicated_imagefs:
            used += _used(container.get("rootfs"))
        limit = limits.get(name)
        if limit is not None and used > limit.amount:
            return LimitSignal.CONTAINER, CONTAINER_MESSAGE.format(name, limit.shown)
    return None
