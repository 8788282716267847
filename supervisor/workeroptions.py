"""What each worker is started with: its entry, the worker's ``main`` with the options it
takes from the configuration bound to it. Which workers run is the table in ``workerset``.

The API workers' modules are imported inside their builders, so only when pkletd joins a
cluster: the official client costs ~0.4 s of start-up (and the fork server's memory) that a
standalone node should not pay. node-shutdown's likewise, only when a shutdown grace period
is configured: a node without one does not carry the D-Bus client.
"""

from __future__ import annotations

import functools
import socket
from pathlib import Path
from typing import TYPE_CHECKING

from pkletd.ipc.nodestats.summary import NodePaths
from pkletd.supervisor import featuregates
from pkletd.supervisor.config import KubeletConfig, v1beta1
from pkletd.supervisor.forkserver import WorkerEntry
from pkletd.supervisor.node import shutdownplan
from pkletd.workers import (
    eviction,
    filesource,
    http,
    httpsource,
    imagegc,
    logrotator,
    pleg,
    podresources,
    prober,
)
from pkletd.workers.http import listening
from pkletd.workers.lifecycle import WorkerSettings

if TYPE_CHECKING:
    from pkletd.workers.nodelease import NodeLeaseOptions


def pleg_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(
        pleg.main,
        settings,
        config.container_runtime_endpoint,
        config.runtime_request_timeout,
        config.pleg_relist_period,
        config.pleg_runtime_events,
    )


def http_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(http.main, settings, http_options(config))


def pod_resources_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(podresources.main, settings, Path(config.root_dir))


def prober_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(
        prober.main, settings, config.container_runtime_endpoint, config.runtime_request_timeout
    )


def file_source_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(
        filesource.main,
        settings,
        Path(config.static_pod_path),
        config.node_name,
        config.file_check_frequency,
    )


def http_source_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(
        httpsource.main,
        settings,
        config.static_pod_url,
        config.static_pod_url_header,
        config.node_name,
        config.http_check_frequency,
    )


def status_manager_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    from pkletd.workers import statusmanager

    options = statusmanager.Options(
        kube_api_qps=config.kube_api_qps,
        kube_api_burst=config.kube_api_burst,
        event_qps=config.event_record_qps,
        event_burst=config.event_burst,
    )
    return functools.partial(
        statusmanager.main, settings, config.kubeconfig, config.node_name, options
    )


def cert_dir(config: KubeletConfig) -> Path:
    """``--cert-dir`` (the config resolves its default, ``<root-dir>/pki``)."""
    return Path(config.cert_dir)


def cert_manager_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    from pkletd.workers import certmanager

    options = certmanager.CertSettings(
        node_name=config.node_name,
        kubeconfig=Path(config.kubeconfig),
        bootstrap_kubeconfig=Path(config.bootstrap_kubeconfig)
        if config.bootstrap_kubeconfig
        else None,
        cert_dir=cert_dir(config),
        rotate=config.rotate_certificates,
        serving_sans=serving_sans(config) if config.server_tls_bootstrap else (),
    )
    return functools.partial(
        certmanager.main, settings, options, config.kube_api_qps, config.kube_api_burst
    )


def serving_sans(config: KubeletConfig) -> tuple[str, ...]:
    """The serving certificate's names: the node name and its addresses (``--node-ip``,
    else the address the node registers with)."""
    from pkletd.supervisor.node import addresses

    ips = addresses.given_ips(config.node_ip)
    return (config.node_name, *(ips or [addresses.host_ip("", config.node_name)]))


def node_lease_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    from pkletd.workers import nodelease

    return functools.partial(
        nodelease.main,
        settings,
        config.kubeconfig,
        config.container_runtime_endpoint,
        config.runtime_request_timeout,
        node_lease_options(config),
    )


def node_lease_options(config: KubeletConfig) -> NodeLeaseOptions:
    """registerNode, nodeStatusUpdateFrequency, nodeStatusReportFrequency,
    nodeLeaseDurationSeconds (renewed every quarter of it), nodeStatusMaxImages,
    kubeAPIQPS, kubeAPIBurst and localStorageCapacityIsolation (the Ready condition
    requires ephemeral-storage capacity only with it)."""
    from pkletd.workers.nodelease import NodeLeaseOptions

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


def api_watcher_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    from pkletd.workers import apiwatcher

    return functools.partial(
        apiwatcher.main,
        settings,
        config.kubeconfig,
        config.node_name,
        config.kube_api_qps,
        config.kube_api_burst,
    )


def pod_objects_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    from pkletd.workers import podobjects

    options = podobjects.Options(
        node_name=config.node_name,
        strategy=podobjects.Strategy(config.config_map_and_secret_change_detection_strategy),
        sync_frequency=config.sync_frequency,
        kube_api_qps=config.kube_api_qps,
        kube_api_burst=config.kube_api_burst,
    )
    return functools.partial(podobjects.main, settings, config.kubeconfig, options)


def plugin_watcher_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    from pkletd.workers import pluginwatcher

    options = pluginwatcher.WatcherOptions(
        root_dir=Path(config.root_dir),
        node_name=config.node_name,
        kubeconfig=config.kubeconfig,
        api_qps=config.kube_api_qps,
        api_burst=config.kube_api_burst,
    )
    return functools.partial(pluginwatcher.main, settings, options)


def shutdown_grace_s(config: KubeletConfig) -> int:
    """How long a node shutdown may take in all (0: graceful node shutdown is off)."""
    return shutdownplan.requested_s(
        shutdownplan.groups(
            config.shutdown_grace_period,
            config.shutdown_grace_period_critical_pods,
            config.shutdown_grace_period_by_pod_priority,
        )
    )


def node_shutdown_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    """The worker that holds logind's delay lock, for the whole grace period."""
    from pkletd.workers import nodeshutdown

    options = nodeshutdown.InhibitorOptions(
        shutdown_grace_s(config),
        Path(config.logind_conf_dir),
        nodeshutdown.system_bus_address(),
    )
    return functools.partial(nodeshutdown.main, settings, options)


def log_rotator_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(
        logrotator.main,
        settings,
        config.container_runtime_endpoint,
        config.runtime_request_timeout,
        logrotator.RotatePolicy(config.container_log_max_size, config.container_log_max_files),
        config.container_log_monitor_interval,
        config.container_log_max_workers,
    )


def image_gc_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(imagegc.main, settings, image_gc_options(config))


def image_gc_options(config: KubeletConfig) -> imagegc.Options:
    return imagegc.Options(
        config.container_runtime_endpoint,
        config.runtime_request_timeout,
        Path(config.pod_logs_dir),
        imagegc.ImagePolicy(
            config.image_gc_high_threshold_percent,
            config.image_gc_low_threshold_percent,
            config.image_minimum_gc_age,
            config.image_maximum_gc_age,
        ),
        imagegc.ContainerPolicy(
            config.minimum_container_ttl_duration,
            config.maximum_dead_containers_per_container,
            config.maximum_dead_containers,
        ),
        config.image_gc_period,
        config.container_gc_period,
    )


def eviction_entry(config: KubeletConfig, settings: WorkerSettings) -> WorkerEntry:
    return functools.partial(
        eviction.main,
        settings,
        config.container_runtime_endpoint,
        config.runtime_request_timeout,
        NodePaths(config.node_name, Path(config.root_dir), Path(config.pod_logs_dir)),
        eviction_options(config),
    )


def eviction_options(config: KubeletConfig) -> eviction.Options:
    thresholds = eviction.from_config(
        config.eviction_hard,
        config.eviction_soft,
        config.eviction_soft_grace_period,
        config.eviction_minimum_reclaim,
    )
    return eviction.Options(
        thresholds,
        config.eviction_pressure_transition_period,
        config.eviction_monitoring_period,
        config.local_storage_capacity_isolation,
    )


def http_listens(config: KubeletConfig) -> list[http.Listen]:
    listens = []
    if config.healthz_port:
        listens.append(
            http.Listen(config.healthz_bind_address, config.healthz_port, http.Api.HEALTHZ)
        )
    if config.read_only_port:
        listens.append(http.Listen(config.address, config.read_only_port, http.Api.READ_ONLY))
    listens.append(http.Listen(config.address, config.port, http.Api.KUBELET))
    return listens


def http_sockets(config: KubeletConfig) -> tuple[socket.socket, ...]:
    """The http worker's listening sockets, bound now, in the parent; a listener whose port
    is taken is logged and left to the worker (``workers/http/listening.py``)."""
    return listening.bind_each(http_listens(config))


def http_options(config: KubeletConfig) -> http.HttpOptions:
    return http.HttpOptions(
        node_name=config.node_name,
        listens=tuple(http_listens(config)),
        tls=http.TlsOptions(
            cert_file=config.tls_cert_file,
            key_file=config.tls_private_key_file,
            cert_dir=str(cert_dir(config)),
            min_version=config.tls_min_version,
            cipher_suites=config.tls_cipher_suites,
            bootstrap=config.server_tls_bootstrap,
        ),
        auth=http.AuthOptions(
            anonymous=config.authentication_anonymous,
            client_ca_file=config.authentication_client_ca_file,
            webhook_authn=config.authentication_webhook,
            authn_cache_ttl=config.authentication_webhook_cache_ttl,
            mode=http.AuthorizationMode(config.authorization_mode),
            authorized_ttl=config.authorization_webhook_cache_authorized_ttl,
            unauthorized_ttl=config.authorization_webhook_cache_unauthorized_ttl,
        ),
        api=http.ApiClientOptions(
            config.kubeconfig,
            config.kube_api_qps,
            config.kube_api_burst,
            follow_certificates=bool(config.bootstrap_kubeconfig) or config.rotate_certificates,
        ),
        pod_logs_dir=config.pod_logs_dir,
        root_dir=config.root_dir,
        runtime_endpoint=config.container_runtime_endpoint,
        runtime_timeout=config.runtime_request_timeout,
        streaming_idle_timeout=config.streaming_connection_idle_timeout,
        configz=v1beta1(config),
        volume_stats_period=config.volume_stats_agg_period,
        volume_health=featuregates.enabled(config.feature_gates, "CSIVolumeHealth") is True,
    )
