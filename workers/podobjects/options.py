"""The pod-objects worker's settings, from the KubeletConfiguration."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class Strategy(enum.StrEnum):
    """``configMapAndSecretChangeDetectionStrategy``: how ConfigMaps and Secrets are
    followed."""

    WATCH = "Watch"  # a list+watch per object
    CACHE = "Cache"  # a GET when a pod needs it, again once the node's object TTL passed
    GET = "Get"  # a GET when a pod needs it, again every pod sync


@dataclass(frozen=True, slots=True)
class Options:
    node_name: str
    strategy: Strategy = Strategy.WATCH
    sync_frequency: float = 60.0  # syncFrequency: the kubelet's pod re-sync period
    kube_api_qps: int = 50
    kube_api_burst: int = 100
