"""The parent's table of workers: every worker pkletd has, when it runs, and what it is
started with.

``WORKERS`` maps each ``WorkerName`` to its spec: ``runs``, a predicate of the
configuration (always, or only with a static pod path, a static pod URL, a kubeconfig, a
bootstrap kubeconfig or certificate rotation, a shutdown grace period); ``entry``, the
function that builds the forked child's entry from the configuration (``workeroptions``:
the worker's ``main`` and its options); and ``source``, the pod source a source worker
reads (the only worker whose pods of that source the parent takes). In ``WorkerName``'s
order: the start order, and ``pkletd status``'s.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.apiclient import clientcert
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor import workeroptions as opt
from pkletd.supervisor.config import KubeletConfig
from pkletd.supervisor.forkserver import HandedSockets, WorkerEntry
from pkletd.workers.lifecycle import WorkerSettings

HEARTBEATS_PER_TIMEOUT = 5


@dataclass(frozen=True, slots=True)
class WorkerSpec:
    runs: Callable[[KubeletConfig], bool]
    entry: Callable[[KubeletConfig, WorkerSettings], WorkerEntry]
    source: PodSource | None = None


def always(_config: KubeletConfig) -> bool:
    return True


def static_pod_path_set(config: KubeletConfig) -> bool:
    return bool(config.static_pod_path)


def static_pod_url_set(config: KubeletConfig) -> bool:
    return bool(config.static_pod_url)


def joins_cluster(config: KubeletConfig) -> bool:
    """A kubeconfig is set: the node joins a cluster through the API server."""
    return bool(config.kubeconfig)


def manages_certificates(config: KubeletConfig) -> bool:
    """A bootstrap kubeconfig, certificate rotation or serverTLSBootstrap: the
    cert-manager runs."""
    return joins_cluster(config) and (
        bool(config.bootstrap_kubeconfig)
        or config.rotate_certificates
        or config.server_tls_bootstrap
    )


def shutdown_configured(config: KubeletConfig) -> bool:
    """A shutdown grace period is set: graceful node shutdown is on."""
    return opt.shutdown_grace_s(config) > 0


WORKERS: dict[WorkerName, WorkerSpec] = {
    WorkerName.PLEG: WorkerSpec(always, opt.pleg_entry),
    WorkerName.HTTP: WorkerSpec(always, opt.http_entry),
    WorkerName.POD_RESOURCES: WorkerSpec(always, opt.pod_resources_entry),
    WorkerName.PROBER: WorkerSpec(always, opt.prober_entry),
    WorkerName.FILE_SOURCE: WorkerSpec(static_pod_path_set, opt.file_source_entry, PodSource.FILE),
    WorkerName.HTTP_SOURCE: WorkerSpec(static_pod_url_set, opt.http_source_entry, PodSource.HTTP),
    WorkerName.CERT_MANAGER: WorkerSpec(manages_certificates, opt.cert_manager_entry),
    WorkerName.STATUS_MANAGER: WorkerSpec(joins_cluster, opt.status_manager_entry),
    WorkerName.NODE_LEASE: WorkerSpec(joins_cluster, opt.node_lease_entry),
    WorkerName.API_WATCHER: WorkerSpec(joins_cluster, opt.api_watcher_entry, PodSource.API),
    WorkerName.POD_OBJECTS: WorkerSpec(joins_cluster, opt.pod_objects_entry),
    WorkerName.PLUGIN_WATCHER: WorkerSpec(joins_cluster, opt.plugin_watcher_entry),
    WorkerName.NODE_SHUTDOWN: WorkerSpec(shutdown_configured, opt.node_shutdown_entry),
    WorkerName.LOG_ROTATOR: WorkerSpec(always, opt.log_rotator_entry),
    WorkerName.IMAGE_GC: WorkerSpec(always, opt.image_gc_entry),
    WorkerName.EVICTION: WorkerSpec(always, opt.eviction_entry),
}

# Pod source -> the worker that reads it.
SOURCE_WORKERS = {spec.source: name for name, spec in WORKERS.items() if spec.source is not None}
WORKER_SOURCES = {name: source for source, name in SOURCE_WORKERS.items()}


# The workers that talk to the API server with the node's credentials: held back until the
# TLS bootstrap has given the node a certificate, restarted when it is rotated.
API_WORKERS = tuple(name for name, spec in WORKERS.items() if spec.runs is joins_cluster)


def waiting_for_certificate(config: KubeletConfig) -> frozenset[WorkerName]:
    """The API workers to hold back at start: all of them while the kubeconfig is not
    usable and a bootstrap kubeconfig will give it credentials; else none."""
    if not manages_certificates(config) or not config.bootstrap_kubeconfig:
        return frozenset()
    if clientcert.usable(Path(config.kubeconfig)):
        return frozenset()
    return frozenset(API_WORKERS)


def running(config: KubeletConfig) -> list[WorkerName]:
    """The workers this configuration runs, in start order."""
    return [name for name, spec in WORKERS.items() if spec.runs(config)]


def sources(workers: list[WorkerName]) -> list[PodSource]:
    """The pod sources these workers read."""
    return [source for source, name in SOURCE_WORKERS.items() if name in workers]


def entries(
    config: KubeletConfig, sockets: HandedSockets | None = None
) -> dict[WorkerName, WorkerEntry]:
    """Worker name -> the function the forked child runs, for the workers that run;
    ``sockets``: the listening sockets the parent bound for a worker (``bound_sockets``)."""
    beat = min(1.0, config.worker_heartbeat_timeout / HEARTBEATS_PER_TIMEOUT)
    handed = sockets or {}
    return {
        name: WORKERS[name].entry(
            config,
            WorkerSettings(name, Path(config.run_dir), beat, tuple(handed.get(name, ()))),
        )
        for name in running(config)
    }


def bound_sockets(config: KubeletConfig) -> HandedSockets:
    """The listening sockets the parent binds before it forks the fork server, by worker:
    the http worker's ports (``workers/http/listening.py``)."""
    return {WorkerName.HTTP: opt.http_sockets(config)}
