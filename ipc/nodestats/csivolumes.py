"""The pods' CSI volumes and their stats, as the kubelet gives them: what the volume's
driver says (``NodeGetVolumeStats``), never a walk of the mounted tree.

A CSI volume published for a pod is a directory ``<root-dir>/pods/<uid>/volumes/
kubernetes.io~csi/<volume>`` with the ``mount`` target and ``vol_data.json``
(``volumeHandle``, ``driverName``) in it. ``CsiVolumeStats.refresh`` measures each one
whose figures are older than the period (the kubelet's ``volumeStatsAggPeriod``): when its
driver is registered and has GET_VOLUME_STATS, a ``NodeGetVolumeStats(volumeHandle,
<dir>/mount)``; otherwise it has no stats, as on the kubelet. A volume measured through a
driver socket that is no longer the driver's (the driver went, came, or came back) is
measured again at once. Each entry is the Summary API's ``VolumeStats``: the ``FsStats``
figures (0 for those the driver leaves out), ``time`` (when it was measured), ``name``
(the pod's volume), ``pvcRef`` for a ``persistentVolumeClaim`` or a generic ``ephemeral``
volume (whose claim is ``<pod>-<volume>``) and, with gate CSIVolumeHealth and a driver
with VOLUME_CONDITION, ``volumeHealthStats.abnormal``.

``refresh`` runs on one thread (the http worker's ``volumestats``); readers on any thread
see the entries it last replaced whole.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any, Protocol

from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.csi.client import CsiClient, CsiError, NodeCapability, VolumeStats
from pkletd.ipc.nodestats.podrefs import PodDict

log = logging.getLogger(__name__)

PLUGIN_DIR = "kubernetes.io~csi"  # the CSI volumes' directory under a pod's volumes
VOL_DATA = "vol_data.json"

Json = dict[str, Any]


class StatsClient(Protocol):
    """What the stats ask of a driver (``ipc.csi.client.CsiClient`` is one)."""

    def node_capabilities(self) -> frozenset[str]: ...

    def volume_stats(self, volume_id: str, volume_path: str) -> VolumeStats: ...

    def close(self) -> None: ...


@dataclass(frozen=True, slots=True)
class CsiVolume:
    name: str  # the pod's volume, the directory's name
    handle: str  # volumeHandle
    driver: str
    target: Path  # <dir>/mount, where the volume is published


@dataclass(frozen=True, slots=True)
class Measured:
    due: float  # monotonic: when it is measured again
    endpoint: str  # the driver's socket it was measured through; "": no driver
    stats: Json | None  # the VolumeStats; None: the driver gives none
    claim: tuple[str, str] | None  # (namespace, name) of its claim


def pod_volumes(root_dir: Path, uid: str) -> list[CsiVolume]:
    """The pod's published CSI volumes, from their ``vol_data.json`` (unreadable ones are
    left out: a volume being published or torn down)."""
    top = root_dir / "pods" / uid / "volumes" / PLUGIN_DIR
    try:
        dirs = sorted(p for p in top.iterdir() if p.is_dir() and not p.is_symlink())
    except OSError:
        return []
    found = []
    for directory in dirs:
        try:
            data = json.loads((directory / VOL_DATA).read_text())
            found.append(
                CsiVolume(
                    directory.name,
                    str(data["volumeHandle"]),
                    str(data["driverName"]),
                    directory / "mount",
                )
            )
        except (OSError, ValueError, KeyError, TypeError):
            continue
    return found


def claim_of(pod: PodDict, volume: str) -> tuple[str, str] | None:
    """The claim behind the pod's volume: a ``persistentVolumeClaim``'s, or the one the
    control plane makes for a generic ``ephemeral`` volume (``<pod>-<volume>``)."""
    meta = pod.get("metadata") or {}
    namespace = str(meta.get("namespace", "default"))
    for spec in (pod.get("spec") or {}).get("volumes") or []:
        if spec.get("name") != volume:
            continue
        claim = spec.get("persistentVolumeClaim")
        if claim is not None:
            return namespace, str(claim.get("claimName", ""))
        if spec.get("ephemeral") is not None:
            return namespace, f"{meta.get('name', '')}-{volume}"
    return None


def volume_stats_json(
    time: float,
    volume: CsiVolume,
    stats: VolumeStats,
    claim: tuple[str, str] | None,
    health: bool,
) -> Json:
    """A Summary API ``VolumeStats`` (the kubelet's ``parsePodVolumeStats``)."""
    out: Json = {
        "time": time,
        "availableBytes": stats.available_bytes,
        "capacityBytes": stats.capacity_bytes,
        "usedBytes": stats.used_bytes,
        "inodesFree": stats.inodes_free,
        "inodes": stats.inodes,
        "inodesUsed": stats.inodes_used,
        "name": volume.name,
    }
    if claim is not None:
        out["pvcRef"] = {"name": claim[1], "namespace": claim[0]}
    if health:
        out["volumeHealthStats"] = {"abnormal": stats.abnormal}
    return out


Key = tuple[str, str]  # (pod uid, volume name)


class CsiVolumeStats:
    """The CSI volumes' stats, each measured once per ``period``."""

    def __init__(
        self,
        root_dir: Path,
        drivers: Callable[[], Mapping[str, str]],
        period: float,
        health: bool = False,
        connect: Callable[[str], StatsClient] = CsiClient,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._root_dir = root_dir
        self._drivers = drivers  # driver name -> its Node service's socket
        self._period = period
        self._health = health  # gate CSIVolumeHealth
        self._connect = connect
        self._clock = clock
        self._clients: dict[str, StatsClient] = {}  # by socket; the refreshing thread's
        self._measured: Mapping[Key, Measured] = MappingProxyType({})

    # --- readers (any thread) -----------------------------------------------------------

    def of_pod(self, uid: str) -> list[Json]:
        """The pod's CSI volumes that have stats, by name."""
        found = [(k[1], m.stats) for k, m in self._measured.items() if k[0] == uid]
        return [stats for _, stats in sorted(found, key=lambda f: f[0]) if stats is not None]

    def claims(self) -> list[tuple[tuple[str, str], Json]]:
        """Each claim's volume stats ((namespace, name), VolumeStats), once per claim."""
        found: dict[tuple[str, str], Json] = {}
        for _, measured in sorted(self._measured.items()):
            if measured.claim is not None and measured.stats is not None:
                found.setdefault(measured.claim, measured.stats)
        return sorted(found.items())

    # --- the refreshing thread ----------------------------------------------------------

    def refresh(self, pods: Iterable[PodDict]) -> float:
        """Measure the pods' CSI volumes that are due and forget those gone; when the next
        one is due (monotonic)."""
        now = self._clock.monotonic()
        drivers = dict(self._drivers())
        capabilities: dict[str, frozenset[str]] = {}
        measured: dict[Key, Measured] = {}
        for pod in pods:
            uid = str(pod["metadata"]["uid"])
            for volume in pod_volumes(self._root_dir, uid):
                key = (uid, volume.name)
                endpoint = drivers.get(volume.driver, "")
                last = self._measured.get(key)
                if last is None or last.due <= now or last.endpoint != endpoint:
                    last = self._measure(pod, volume, endpoint, capabilities)
                measured[key] = last
        self._measured = MappingProxyType(measured)
        self._close_clients(set(drivers.values()))
        return min((m.due for m in measured.values()), default=now + self._period)

    def _measure(
        self,
        pod: PodDict,
        volume: CsiVolume,
        endpoint: str,
        capabilities: dict[str, frozenset[str]],
    ) -> Measured:
        due = self._clock.monotonic() + self._period
        claim = claim_of(pod, volume.name)
        if not endpoint:
            return Measured(due, endpoint, None, claim)
        client = self._client(endpoint)
        try:
            if endpoint not in capabilities:
                capabilities[endpoint] = client.node_capabilities()
            if NodeCapability.GET_VOLUME_STATS not in capabilities[endpoint]:
                return Measured(due, endpoint, None, claim)
            stats = client.volume_stats(volume.handle, str(volume.target))
        except CsiError as exc:
            log.warning(
                "volume stats failed volume=%s driver=%s error=%s", volume.name, volume.driver, exc
            )
            return Measured(due, endpoint, None, claim)
        health = self._health and NodeCapability.VOLUME_CONDITION in capabilities[endpoint]
        out = volume_stats_json(self._clock.time(), volume, stats, claim, health)
        return Measured(due, endpoint, out, claim)

    def _client(self, endpoint: str) -> StatsClient:
        if endpoint not in self._clients:
            self._clients[endpoint] = self._connect(endpoint)
        return self._clients[endpoint]

    def _close_clients(self, keep: set[str]) -> None:
        for endpoint in [e for e in self._clients if e not in keep]:
            self._clients.pop(endpoint).close()

    def close(self) -> None:
        self._close_clients(set())


class VolumeStatsOff:
    """Volume stats turned off (``volumeStatsAggPeriod`` 0 or negative): no pod has any,
    CSI or other."""

    def of_pod(self, uid: str) -> None:
        return None
