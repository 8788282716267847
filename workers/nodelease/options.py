"""The node-lease worker's cadence and limits (from the KubeletConfiguration)."""

from __future__ import annotations

from dataclasses import dataclass

LEASE_RENEW_FRACTION = 0.25  # the kubelet's nodeLeaseRenewIntervalFraction


@dataclass(frozen=True, slots=True)
class NodeLeaseOptions:
    register_node: bool = True  # registerNode
    update_frequency: float = 10.0  # nodeStatusUpdateFrequency: compute status this often
    report_frequency: float = 300.0  # nodeStatusReportFrequency: write it at least this often
    lease_duration_s: int = 40  # nodeLeaseDurationSeconds
    max_images: int = 50  # nodeStatusMaxImages; -1: all
    api_qps: int = 50  # kubeAPIQPS
    api_burst: int = 100  # kubeAPIBurst
    renew_interval: float = 0.0  # 0: a quarter of the lease duration (10 s)
    request_timeout: float = 0.0  # 0: the kubelet's heartbeat timeout (see below)
    runtime_check_period: float = 5.0  # the kubelet's updateRuntimeUp period
    runtime_down_after: float = 30.0  # no good CRI Status this long: "container runtime is down"
    parent_silent_after: float = 30.0  # no ParentAlive this long: the sync loop is not healthy
    lease_jitter: float = 0.04  # the lease controller's JitterUntil factor
    local_storage: bool = True  # localStorageCapacityIsolation: ephemeral-storage capacity

    def lease_renew_interval(self) -> float:
        return self.renew_interval or self.lease_duration_s * LEASE_RENEW_FRACTION

    def api_timeout(self) -> float:
        """The kubelet's heartbeat client timeout: the status update period, at most the
        lease duration."""
        if self.request_timeout:
            return self.request_timeout
        return max(1.0, min(self.update_frequency, float(self.lease_duration_s)))
