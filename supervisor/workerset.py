"""Which worker processes pkletd runs, and what each one is started with."""

from __future__ import annotations

import functools
from collections.abc import Callable
from pathlib import Path

from pkletd.ipc.nodestats.summary import NodePaths
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
from pkletd.workers.lifecycle import WorkerSettings

HEARTBEATS_PER_TIMEOUT = 5


def entries(config: KubeletConfig) -> dict[str, WorkerEntry]:
    """Worker name -> the function the forked child runs."""
    run_dir = Path(config.run_dir)
    beat = min(1.0, config.worker_heartbeat_timeout / HEARTBEATS_PER_TIMEOUT)

    def settings(name: str) -> WorkerSettings:
        return WorkerSettings(name, run_dir, beat)

    found: dict[str, WorkerEntry] = {
        "pleg": functools.partial(
            pleg.main,
            settings("pleg"),
            config.container_runtime_endpoint,
            config.runtime_request_timeout,
            config.pleg_relist_period,
            config.pleg_runtime_events,
        ),
        "http": functools.partial(http.main, settings("http"), http_options(config)),
        "pod-resources": functools.partial(
            podresources.main, settings("pod-resources"), Path(config.root_dir)
        ),
        "prober": functools.partial(
            prober.main,
            settings("prober"),
            config.container_runtime_endpoint,
            config.runtime_request_timeout,
        ),
    }
    if config.static_pod_path:
        found["file-source"] = functools.partial(
            filesource.main,
            settings("file-source"),
            Path(config.static_pod_path),
            config.node_name,
            config.file_check_frequency,
        )
    if config.static_pod_url:
        found["http-source"] = functools.partial(
            httpsource.main,
            settings("http-source"),
            config.static_pod_url,
            config.static_pod_url_header,
            config.node_name,
            config.http_check_frequency,
        )
    if config.kubeconfig:
        found.update(cluster_entries(config, settings))
    shutdown_s = shutdownplan.requested_s(
        shutdownplan.groups(
            config.shutdown_grace_period,
            config.shutdown_grace_period_critical_pods,
            config.shutdown_grace_period_by_pod_priority,
        )
    )
    if shutdown_s:
        found["node-shutdown"] = node_shutdown_entry(config, settings("node-shutdown"), shutdown_s)
    found["log-rotator"] = functools.partial(
        logrotator.main,
        settings("log-rotator"),
        config.container_runtime_endpoint,
        config.runtime_request_timeout,
        logrotator.RotatePolicy(config.container_log_max_size, config.container_log_max_files),
        config.container_log_monitor_interval,
        config.container_log_max_workers,
    )
    found["image-gc"] = functools.partial(
        imagegc.main, settings("image-gc"), image_gc_options(config)
    )
    found["eviction"] = functools.partial(
        eviction.main,
        settings("eviction"),
        config.container_runtime_endpoint,
        config.runtime_request_timeout,
        NodePaths(config.node_name, Path(config.root_dir), Path(config.pod_logs_dir)),
        eviction_options(config),
    )
    return found


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


def cluster_entries(
    config: KubeletConfig, settings: Callable[[str], WorkerSettings]
) -> dict[str, WorkerEntry]:
    """The workers that talk to the API server. Imported here, only when pkletd joins a
    cluster: the official client costs ~0.4 s of start-up (and the fork server's memory)
    that a standalone node should not pay."""
    from pkletd.supervisor.node.leaseoptions import node_lease_options
    from pkletd.workers import apiwatcher, nodelease, podobjects, statusmanager

    return {
        "status-manager": functools.partial(
            statusmanager.main,
            settings("status-manager"),
            config.kubeconfig,
            config.node_name,
            statusmanager.Options(
                kube_api_qps=config.kube_api_qps,
                kube_api_burst=config.kube_api_burst,
                event_qps=config.event_record_qps,
                event_burst=config.event_burst,
                # The repair list: every syncFrequency, the period at which the kubelet
                # re-syncs each pod (and recreates a missing mirror pod). Its own 10 s
                # status sync reads a watch cache, which costs the API server nothing.
                status_sync_period=config.sync_frequency,
            ),
        ),
        "node-lease": functools.partial(
            nodelease.main,
            settings("node-lease"),
            config.kubeconfig,
            config.container_runtime_endpoint,
            config.runtime_request_timeout,
            node_lease_options(config),
        ),
        "api-watcher": functools.partial(
            apiwatcher.main,
            settings("api-watcher"),
            config.kubeconfig,
            config.node_name,
            config.kube_api_qps,
            config.kube_api_burst,
        ),
        "pod-objects": functools.partial(
            podobjects.main,
            settings("pod-objects"),
            config.kubeconfig,
            podobjects.Options(
                node_name=config.node_name,
                strategy=podobjects.Strategy(
                    config.config_map_and_secret_change_detection_strategy
                ),
                sync_frequency=config.sync_frequency,
                kube_api_qps=config.kube_api_qps,
                kube_api_burst=config.kube_api_burst,
            ),
        ),
    }


def node_shutdown_entry(
    config: KubeletConfig, settings: WorkerSettings, grace_period_s: int
) -> WorkerEntry:
    """The worker that holds logind's delay lock. Imported here, only when a grace period
    is configured: a node without one does not carry the D-Bus client."""
    from pkletd.workers import nodeshutdown

    options = nodeshutdown.InhibitorOptions(
        grace_period_s, Path(config.logind_conf_dir), nodeshutdown.system_bus_address()
    )
    return functools.partial(nodeshutdown.main, settings, options)


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


def http_options(config: KubeletConfig) -> http.HttpOptions:
    return http.HttpOptions(
        node_name=config.node_name,
        listens=tuple(http_listens(config)),
        tls=http.TlsOptions(
            cert_file=config.tls_cert_file,
            key_file=config.tls_private_key_file,
            cert_dir=str(Path(config.root_dir) / "pki"),
            min_version=config.tls_min_version,
            cipher_suites=config.tls_cipher_suites,
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
        api=http.ApiClientOptions(config.kubeconfig, config.kube_api_qps, config.kube_api_burst),
        pod_logs_dir=config.pod_logs_dir,
        root_dir=config.root_dir,
        runtime_endpoint=config.container_runtime_endpoint,
        runtime_timeout=config.runtime_request_timeout,
        streaming_idle_timeout=config.streaming_connection_idle_timeout,
        configz=v1beta1(config),
    )
