"""The kubelet's ``kubelet_volume_stats_*`` families in ``/metrics``: each claim's volume
(a ``persistentVolumeClaim`` or a generic ephemeral volume's) as its driver last measured
it (``CsiVolumeStats``, refreshed every ``volumeStatsAggPeriod``), once per claim, with the
kubelet's names, help and labels (``pkg/kubelet/metrics/collectors/volume_stats.go``).
``kubelet_volume_stats_health_status_abnormal`` is there for the volumes whose stats carry
a condition (gate CSIVolumeHealth, a driver with VOLUME_CONDITION)."""

from __future__ import annotations

from collections.abc import Iterator

from pkletd.ipc.nodestats.csivolumes import CsiVolumeStats
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

LABELS = ["namespace", "persistentvolumeclaim"]
# (name, help, the VolumeStats field)
GAUGES = (
    ("kubelet_volume_stats_capacity_bytes", "Capacity in bytes of the volume", "capacityBytes"),
    (
        "kubelet_volume_stats_available_bytes",
        "Number of available bytes in the volume",
        "availableBytes",
    ),
    ("kubelet_volume_stats_used_bytes", "Number of used bytes in the volume", "usedBytes"),
    ("kubelet_volume_stats_inodes", "Maximum number of inodes in the volume", "inodes"),
    ("kubelet_volume_stats_inodes_free", "Number of free inodes in the volume", "inodesFree"),
    ("kubelet_volume_stats_inodes_used", "Number of used inodes in the volume", "inodesUsed"),
)
ABNORMAL = (
    "kubelet_volume_stats_health_status_abnormal",
    "Abnormal volume health status. The count is either 1 or 0. 1 indicates the volume is "
    "unhealthy, 0 indicates volume is healthy",
)


class VolumeStatsCollector(Collector):
    def __init__(self, stats: CsiVolumeStats) -> None:
        self._stats = stats

    def collect(self) -> Iterator[Metric]:
        """The families that have samples (none without a claim's volume measured)."""
        claims = self._stats.claims()
        for name, help_text, field in GAUGES:
            family = GaugeMetricFamily(name, help_text, labels=LABELS)
            for (namespace, claim), stats in claims:
                family.add_metric([namespace, claim], float(stats[field]))
            if family.samples:
                yield family
        abnormal = GaugeMetricFamily(*ABNORMAL, labels=LABELS)
        for (namespace, claim), stats in claims:
            health = stats.get("volumeHealthStats")
            if health is not None:
                abnormal.add_metric([namespace, claim], 1.0 if health["abnormal"] else 0.0)
        if abnormal.samples:
            yield abnormal
