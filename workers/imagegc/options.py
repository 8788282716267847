"""The image-gc worker's policies and periods (KubeletConfiguration fields and flags)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

IMAGE_GC_PERIOD_S = 300.0  # the kubelet's ImageGCPeriod (a constant, not a setting)
CONTAINER_GC_PERIOD_S = 60.0  # the kubelet's ContainerGCPeriod (a constant too)


@dataclass(frozen=True, slots=True)
class ImagePolicy:
    """The kubelet's ImageGCPolicy."""

    high_threshold_percent: int = 85  # imageGCHighThresholdPercent
    low_threshold_percent: int = 80  # imageGCLowThresholdPercent
    min_age_s: float = 120.0  # imageMinimumGCAge
    max_age_s: float = 0.0  # imageMaximumGCAge; 0: off

    def disabled(self) -> bool:
        """The kubelet runs no image GC at all with a high threshold of 100 and no max age."""
        return self.high_threshold_percent == 100 and not self.max_age_s


@dataclass(frozen=True, slots=True)
class ContainerPolicy:
    """The kubelet's container GCPolicy (its deprecated flags)."""

    min_age_s: float = 0.0  # --minimum-container-ttl-duration
    max_per_pod_container: int = 1  # --maximum-dead-containers-per-container; < 0: no limit
    max_containers: int = -1  # --maximum-dead-containers; < 0: no limit


@dataclass(frozen=True, slots=True)
class Options:
    runtime_endpoint: str
    runtime_timeout: float
    pod_logs_dir: Path
    images: ImagePolicy = ImagePolicy()
    containers: ContainerPolicy = ContainerPolicy()
    image_period_s: float = IMAGE_GC_PERIOD_S
    container_period_s: float = CONTAINER_GC_PERIOD_S
