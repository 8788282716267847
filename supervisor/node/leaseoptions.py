"""The node-lease worker's options from the configuration (the kubelet's field names)."""

from __future__ import annotations

from pkletd.supervisor.config import KubeletConfig
from pkletd.workers.nodelease import NodeLeaseOptions


def node_lease_options(config: KubeletConfig) -> NodeLeaseOptions:
    """registerNode, nodeStatusUpdateFrequency, nodeStatusReportFrequency,
    nodeLeaseDurationSeconds (renewed every quarter of it), nodeStatusMaxImages,
    kubeAPIQPS, kubeAPIBurst and localStorageCapacityIsolation (the Ready condition
    requires ephemeral-storage capacity only with it)."""
    return NodeLeaseOptions(
        register_node=config.register_node,
        update_frequency=config.node_status_update_frequency,
        report_frequency=config.node_status_report_frequency,
        lease_duration_s=config.node_lease_duration_seconds,
        max_images=config.node_status_max_images,
        api_qps=config.kube_api_qps,
        api_burst=config.kube_api_burst,
        local_storage=config.local_storage_capacity_isolation,
    )
