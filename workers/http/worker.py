"""The http worker process: the lifecycle (snapshot, broadcasts, heartbeats) on the main
thread, the servers (``server.py``) on their own thread, the node's stats gathered on
another (``statscache.py``, the housekeeping) and the CSI volumes' stats on a fourth
(``volumestats.py``), the node's state between them (``view.py``)."""

from __future__ import annotations

import logging
import socket
from collections.abc import Sequence
from pathlib import Path

from pkletd.ipc.bus.messages import (
    CsiDriversChanged,
    Message,
    MetricsReport,
    ParentAlive,
    PodForgotten,
    PodStatusUpdated,
    ProbeMetrics,
    Snapshot,
)
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.nodestats.csivolumes import CsiVolumeStats, VolumeStatsOff
from pkletd.ipc.nodestats.summary import NodePaths
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.workers.http.authfilter import auth_filter
from pkletd.workers.http.authn import Authenticator, TokenAuthenticator
from pkletd.workers.http.authz import AlwaysAllow, Authorizer, WebhookAuthorizer
from pkletd.workers.http.containerlogs import ContainerLogs
from pkletd.workers.http.endpoints import Endpoints
from pkletd.workers.http.followreviewer import FollowingReviewer
from pkletd.workers.http.kubeletmetrics import KubeletMetrics
from pkletd.workers.http.listening import for_listen
from pkletd.workers.http.nodelogs import NodeLogs
from pkletd.workers.http.offload import Offloader
from pkletd.workers.http.options import Api, AuthorizationMode, HttpOptions, Listen
from pkletd.workers.http.reportcollector import usable
from pkletd.workers.http.reviews import ApiReviewer, NoApiServer, Reviewer
from pkletd.workers.http.routes import TABLES, Handlers, application
from pkletd.workers.http.server import HttpServer, Limits, Site, raise_fd_limit
from pkletd.workers.http.stats import NodeStats, stats_cache
from pkletd.workers.http.streaming import Streaming
from pkletd.workers.http.tlscontext import TlsError, server_context
from pkletd.workers.http.view import NodeView
from pkletd.workers.http.volumemetrics import VolumeStatsCollector
from pkletd.workers.http.volumestats import VolumeStatsRefresher
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)
LIMITS = Limits()
SERVING_WAIT_S = 1.0  # the lifecycle (bus, snapshot) starts once the listeners serve


def reviewer_for(options: HttpOptions) -> Reviewer:
    """Who answers TokenReviews and SubjectAccessReviews (only asked for when needed)."""
    api = options.api
    if not api.kubeconfig:
        return NoApiServer("no --kubeconfig: there is no API server to ask")
    if api.follow_certificates:
        return FollowingReviewer(api.kubeconfig, options.tls.cert_dir, api.qps, api.burst)
    try:
        return ApiReviewer(api.kubeconfig, api.qps, api.burst)
    except Exception as exc:  # noqa: BLE001 (a kubeconfig the client refuses, for any reason)
        log.error("cannot use kubeconfig for reviews path=%s error=%s", api.kubeconfig, exc)
        return NoApiServer(f"kubeconfig {api.kubeconfig} unusable: {exc}")


class KubeletAuth:
    """The kubelet API's authenticator and authorizer, built from the options."""

    def __init__(self, options: HttpOptions, reviewer: Reviewer, offload: Offloader) -> None:
        auth = options.auth
        tokens = (
            TokenAuthenticator(reviewer, offload, auth.authn_cache_ttl)
            if auth.webhook_authn
            else None
        )
        self.authn = Authenticator(tokens, auth.anonymous)
        self.authz: Authorizer = (
            AlwaysAllow()
            if auth.mode is AuthorizationMode.ALWAYS_ALLOW
            else WebhookAuthorizer(reviewer, offload, auth.authorized_ttl, auth.unauthorized_ttl)
        )
        if isinstance(reviewer, NoApiServer) and (
            auth.webhook_authn or auth.mode is AuthorizationMode.WEBHOOK
        ):
            # the kubelet refuses to start like this; pkletd serves what it can and says so
            level = logging.WARNING if not options.api.kubeconfig else logging.ERROR
            log.log(
                level,
                "kubelet API reviews impossible reason=%s webhook_authn=%s mode=%s; "
                "tokens get 401 and %s",
                reviewer.why, auth.webhook_authn, auth.mode,
                "every request 500" if auth.mode is AuthorizationMode.WEBHOOK else "x509 works",
            )  # fmt: skip


def volume_stats_for(options: HttpOptions, view: NodeView) -> VolumeStatsRefresher | None:
    """The CSI volumes' stats, measured every volumeStatsAggPeriod; None when it turns
    volume stats off (0 or negative, as the kubelet)."""
    if options.volume_stats_period <= 0:
        log.info("volume stats off volume_stats_agg_period=%s", options.volume_stats_period)
        return None
    stats = CsiVolumeStats(
        Path(options.root_dir),
        lambda: view.csi_drivers,
        options.volume_stats_period,
        options.volume_health,
    )
    return VolumeStatsRefresher(stats, lambda: list(view.pods.values()))


class HttpWorker:
    """``sockets``: the listening sockets the parent bound (``listening.py``); a listener
    with none is bound here."""

    def __init__(
        self,
        options: HttpOptions,
        reviewer: Reviewer | None = None,
        limits: Limits = LIMITS,
        sockets: Sequence[socket.socket] = (),
    ) -> None:
        self.view = NodeView()
        self.options = options
        self._sockets = sockets
        self._offload = Offloader()
        self._reviewer = reviewer
        self._runtime = CriRuntime(options.runtime_endpoint, options.runtime_timeout)
        self._volumes = volume_stats_for(options, self.view)
        volumes = self._volumes.stats if self._volumes is not None else None
        self._metrics = KubeletMetrics(
            self.view, VolumeStatsCollector(volumes) if volumes is not None else None
        )
        paths = NodePaths(options.node_name, Path(options.root_dir), Path(options.pod_logs_dir))
        self._stats = stats_cache(self.view, paths, self._runtime, volumes or VolumeStatsOff())
        handlers = Handlers(
            self._metrics,
            Endpoints(self.view, options.configz),
            ContainerLogs(self.view, options.pod_logs_dir),
            NodeLogs(options.node_log_dir),
            NodeStats(self._stats),
            Streaming(self.view, self._runtime, options.streaming_idle_timeout),
        )
        sites = [site for x in options.listens if (site := self._site(x, handlers)) is not None]
        self.server = HttpServer(sites, limits)
        self.server.start(wait=SERVING_WAIT_S)
        self._stats.start()
        if self._volumes is not None:
            self._volumes.start()

    def _site(self, listen: Listen, handlers: Handlers) -> Site | None:
        routes = TABLES[listen.api](handlers)
        counted = self._metrics.http.middlewares(listen.api, [r.path for r in routes])
        sockets = for_listen(self._sockets, listen)
        if listen.api is not Api.KUBELET:
            return Site(listen, application(routes, counted), sockets=sockets)
        options = self.options
        try:
            tls = server_context(options.tls, options.auth.client_ca_file, options.node_name)
        except TlsError as exc:
            log.error("kubelet API not served port=%d reason=%s", listen.port, exc)
            return None
        if self._reviewer is None:
            self._reviewer = reviewer_for(options)
        auth = KubeletAuth(options, self._reviewer, self._offload)
        middleware = auth_filter(auth.authn, auth.authz, options.node_name)
        return Site(listen, application(routes, [*counted, middleware]), tls, sockets)

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self.view.pods = {p["metadata"]["uid"]: p for p in snapshot.pods}
        self.view.probe_samples = snapshot.probe_metrics
        self.view.csi_drivers = dict(snapshot.csi_drivers)
        self.view.parent_seen = self.view.clock.monotonic()
        self._volumes_changed()
        self._stats.poke()

    def on_broadcast(self, message: Message) -> None:
        self.view.parent_seen = self.view.clock.monotonic()
        if isinstance(message, PodStatusUpdated):
            pods = dict(self.view.pods)
            pods[message.pod["metadata"]["uid"]] = message.pod
            self.view.pods = pods
            self._volumes_changed()
        elif isinstance(message, PodForgotten):
            self.view.pods = {k: v for k, v in self.view.pods.items() if k != message.uid}
            self._volumes_changed()
        elif isinstance(message, CsiDriversChanged):
            self.view.csi_drivers = dict(message.drivers)
            self._volumes_changed()
        elif isinstance(message, ParentAlive):
            self.view.sync_loop_ok = message.sync_loop_ok
        elif isinstance(message, ProbeMetrics):
            self.view.probe_samples = message.samples
        elif isinstance(message, MetricsReport):
            self.view.metrics_report = usable(message.families)

    def _volumes_changed(self) -> None:
        if self._volumes is not None:
            self._volumes.poke()

    def fds(self) -> Sequence[int]:
        return ()

    def on_readable(self, fd: int) -> None:
        raise AssertionError("http polls no fds in the lifecycle loop")

    def tick(self, now: float) -> float:
        return now + 3600.0

    def close(self) -> None:
        self.server.close()
        self._stats.close()
        if self._volumes is not None:
            self._volumes.close()
        self._runtime.close()
        self._offload.close()
        close = getattr(self._reviewer, "close", None)
        if close is not None:
            close()


def main(settings: WorkerSettings, options: HttpOptions) -> int:
    raise_fd_limit()
    worker = HttpWorker(options, sockets=settings.sockets)  # serving before the bus is up
    return serve(settings, WorkerBus(settings.run_dir, settings.name), worker)
