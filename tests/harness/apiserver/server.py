"""``ApiServer``: the whole test API server and its lifecycle, over HTTPS on 127.0.0.1.

A ``ThreadingHTTPServer`` whose accepted sockets are wrapped in TLS by the worker thread
(ALPN ``http/1.1``; client certs requested and verified against the cluster CA). Every open
connection (and every kubelet connection a proxy holds) is tracked, so ``stop()`` closes them
all, open watches included, and leaves no thread behind. ``restart()`` listens on the same
port again with the same objects and revision counter::

    server = ApiServer(tmp_path, ApiServerConfig(bookmark_interval=1.0))
    server.start()
    path = server.kubeconfig(user="system:node:n1", groups=["system:nodes"])
    server.drop_watches(); server.compact(); server.restart(); server.stop()
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from http.server import ThreadingHTTPServer
from pathlib import Path
from typing import Any

from tests.harness.apiserver.admission import Admission
from tests.harness.apiserver.auth import (
    Authenticator,
    Authorizer,
    StaticTokens,
    UserInfo,
    default_authorizer,
)
from tests.harness.apiserver.bootstraptokens import (
    BootstrapTokens,
    bootstrappers_limited,
    token_secret,
)
from tests.harness.apiserver.certs import Pki
from tests.harness.apiserver.controllers import Controllers
from tests.harness.apiserver.csrsigning import CsrSigning
from tests.harness.apiserver.deletion import Deleter
from tests.harness.apiserver.handler import ApiHandler
from tests.harness.apiserver.metrics import RequestLog, RequestRecord
from tests.harness.apiserver.nodeauthz import NodeAuthorizer, cluster_authorizer
from tests.harness.apiserver.proxy import KubeletClientConfig, KubeletProxy
from tests.harness.apiserver.resources import ResourceTable, build_resources
from tests.harness.apiserver.rest import Registry
from tests.harness.apiserver.reviews import Reviews
from tests.harness.apiserver.routes import Router
from tests.harness.apiserver.scheduler import Scheduler
from tests.harness.apiserver.storagecontrollers import StorageControllers
from tests.harness.apiserver.store import Store
from tests.harness.apiserver.tokens import TokenIssuer

log = logging.getLogger(__name__)
HANDSHAKE_TIMEOUT = 10.0
STOP_TIMEOUT = 10.0


@dataclass
class ApiServerConfig:
    host: str = "127.0.0.1"
    port: int = 0  # 0: a free port, kept across restart()
    version: str = "v1.32.4"
    anonymous_auth: bool = False
    bookmark_interval: float = 60.0  # the real server: about a minute
    history_limit: int = 5000  # watch events kept for resuming (compact() forgets them)
    min_request_timeout: float = 1800.0  # a watch without timeoutSeconds lasts 1-2x this
    kubelet_preferred_address_types: tuple[str, ...] = (
        "InternalIP",
        "Hostname",
        "InternalDNS",
        "ExternalDNS",
        "ExternalIP",
    )
    kubelet_ca: Path | None = None  # verify kubelets' serving certs with this CA
    kubelet_port: int = 10250  # when a node reports no daemonEndpoints
    scheduler: bool = False
    pod_generation: bool = False  # PodObservedGenerationTracking (1.33+): pods get generation
    extend_token_expiration: bool = True
    max_token_expiration: int = 0  # --service-account-max-token-expiration (s); 0: none
    node_authorization: bool = True  # --authorization-mode=Node,RBAC (off: allow everyone)
    authorize_node_with_selectors: bool = True  # the 1.32 feature gate (beta, on)
    admin_groups: tuple[str, ...] = ("system:masters",)
    csr_auto_approve: bool = True  # kube-controller-manager's csrapproving controller
    csr_certificate_lifetime_s: float = 365 * 24 * 3600.0  # what the signer issues
    extra: dict[str, Any] = field(default_factory=dict)


class Tracker:
    """Open sockets (client connections, kubelet backends) that stop() must close."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._sockets: set[socket.socket] = set()

    def add(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.add(sock)

    def discard(self, sock: socket.socket) -> None:
        with self._lock:
            self._sockets.discard(sock)

    def shutdown_all(self) -> None:
        with self._lock:
            sockets = list(self._sockets)
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)


class ServerParts:
    """Everything a request needs, built once per ApiServer and kept across restarts."""

    def __init__(self, pki: Pki, config: ApiServerConfig) -> None:
        self.config = config
        self.store = Store(config.history_limit)
        self.table: ResourceTable = build_resources(self.store, config.pod_generation)
        self.tokens = StaticTokens()
        self.issuer = TokenIssuer(
            pki.sa_key_path.read_bytes(),
            self.store,
            extend_expiration=config.extend_token_expiration,
            max_expiration=config.max_token_expiration,
        )
        self.authenticator = Authenticator(
            [self.tokens, BootstrapTokens(self.store), self.issuer], config.anonymous_auth
        )
        self.authorizer: Authorizer = default_authorizer
        if config.node_authorization:
            nodes = NodeAuthorizer(self.store, config.authorize_node_with_selectors)
            self.authorizer = cluster_authorizer(nodes, bootstrappers_limited(default_authorizer))
        self.admission = Admission(self.store)
        self.controllers = Controllers(self.table, pki.ca_pem)
        self.csrs = CsrSigning(
            self.store, pki, config.csr_auto_approve, config.csr_certificate_lifetime_s
        )
        self.controllers.csrs = self.csrs
        self.registry = Registry(self.store, self.admission, self.controllers)
        self.deleter = Deleter(self.registry)
        self.controllers.registry, self.controllers.deleter = self.registry, self.deleter
        self.controllers.storage = StorageControllers(self.table, self.registry, self.deleter)
        self.reviews = Reviews(self.store, self.issuer, self.authenticator, lambda: self.authorizer)
        self.tracker = Tracker()
        self.proxy = KubeletProxy(
            self.store,
            KubeletClientConfig(
                pki.kubelet_client_cert,
                config.kubelet_ca,
                config.kubelet_preferred_address_types,
                config.kubelet_port,
            ),
            self.tracker,
        )
        self.request_log = RequestLog()
        self.router = Router(self)
        self.version = config.version
        self.min_request_timeout = config.min_request_timeout
        self.port = config.port

    def bookmark_interval(self) -> float:
        return self.config.bookmark_interval

    def address(self) -> str:
        return f"{self.config.host}:{self.port}"


class ApiHttpServer(ThreadingHTTPServer):
    """Daemon worker threads (one per connection), which ``join_workers`` waits for."""

    daemon_threads = True

    def __init__(self, address: tuple[str, int], app: ServerParts, context: ssl.SSLContext) -> None:
        self.app = app
        self.context = context
        self._workers: set[threading.Thread] = set()
        self._workers_lock = threading.Lock()
        super().__init__(address, ApiHandler)

    def process_request_thread(self, request: Any, client_address: Any) -> None:
        with self._workers_lock:
            self._workers.add(threading.current_thread())
        try:
            super().process_request_thread(request, client_address)
        finally:
            with self._workers_lock:
                self._workers.discard(threading.current_thread())

    def join_workers(self, timeout: float) -> list[threading.Thread]:
        """Wait for the connection threads to end; those still running at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            with self._workers_lock:
                workers = list(self._workers)
            if not workers or time.monotonic() >= deadline:
                return workers
            workers[0].join(max(0.0, deadline - time.monotonic()))

    def finish_request(self, request: Any, client_address: Any) -> None:
        self.app.tracker.add(request)
        try:
            request.settimeout(HANDSHAKE_TIMEOUT)
            tls = self.context.wrap_socket(request, server_side=True)
            tls.settimeout(None)
        except (OSError, ssl.SSLError) as exc:
            log.debug("TLS handshake failed from %s: %s", client_address, exc)
            self.app.tracker.discard(request)
            return
        self.app.tracker.discard(request)
        self.app.tracker.add(tls)
        try:
            ApiHandler(tls, client_address, self)
        finally:
            self.app.tracker.discard(tls)
            with contextlib.suppress(OSError):
                tls.close()

    def handle_error(self, request: Any, client_address: Any) -> None:
        log.debug("connection from %s ended with an error", client_address, exc_info=True)


class ApiServer:
    """The test API server. ``base_dir`` holds its PKI and the kubeconfigs it writes."""

    def __init__(
        self, base_dir: Path, config: ApiServerConfig | None = None, **overrides: Any
    ) -> None:
        self.base_dir = Path(base_dir)
        self.config = replace(config or ApiServerConfig(), **overrides)
        self.pki = Pki(self.base_dir / "pki")
        self.parts = ServerParts(self.pki, self.config)
        self.scheduler = Scheduler(self.parts.registry, self.parts.table)
        self._httpd: ApiHttpServer | None = None
        self._thread: threading.Thread | None = None
        self._bootstrapped = False

    # ----------------------------------------------------------------------- lifecycle

    def start(self) -> None:
        """Listen (returns once accepting) and create the bootstrap objects the first time."""
        if self._httpd is not None:
            return
        httpd = ApiHttpServer((self.config.host, self.parts.port), self.parts, self._context())
        self.parts.port = httpd.server_address[1]
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.1},
            name=f"apiserver-{self.parts.port}",
            daemon=True,
        )
        self._thread.start()
        if not self._bootstrapped:
            self.parts.controllers.bootstrap(lambda: self.parts.port)
            self._bootstrapped = True
        if self.config.scheduler:
            self.scheduler.start()

    def _context(self) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(*(str(p) for p in self.pki.serving_cert))
        context.load_verify_locations(str(self.pki.ca_cert_path))
        context.verify_mode = ssl.CERT_OPTIONAL
        context.set_alpn_protocols(["http/1.1"])
        return context

    def stop(self) -> None:
        """Close every connection (watches, proxies, idle keep-alives) and stop listening."""
        self.scheduler.stop()
        httpd, self._httpd = self._httpd, None
        if httpd is None:
            return
        self.parts.store.close_watchers()
        httpd.shutdown()
        self.parts.tracker.shutdown_all()
        httpd.server_close()
        stuck = httpd.join_workers(STOP_TIMEOUT)
        if stuck:
            log.warning("connection threads still running after stop: %s", stuck)
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def restart(self) -> None:
        """Stop and listen again on the same port; objects and revisions are kept."""
        self.stop()
        self.start()

    def __enter__(self) -> ApiServer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ----------------------------------------------------------------------- access

    @property
    def port(self) -> int:
        return self.parts.port

    @property
    def url(self) -> str:
        return f"https://{self.config.host}:{self.parts.port}"

    @property
    def ca_path(self) -> Path:
        return self.pki.ca_cert_path

    @property
    def store(self) -> Store:
        return self.parts.store

    @property
    def authorizer(self) -> Authorizer:
        return self.parts.authorizer

    @authorizer.setter
    def authorizer(self, authorizer: Authorizer) -> None:
        self.parts.authorizer = authorizer

    def kubeconfig(
        self,
        path: Path | None = None,
        user: str = "admin",
        groups: Sequence[str] | None = None,
        token: str | None = None,
        namespace: str | None = None,
    ) -> Path:
        """A kubeconfig for ``user`` (client cert in ``groups``, or ``token``)."""
        if groups is None:
            groups = self.config.admin_groups if user == "admin" else ()
        stem = user.replace(":", "_")
        path = path or self.base_dir / f"{stem}.kubeconfig"
        return self.pki.write_kubeconfig(path, self.url, user, groups, token, namespace)

    def client_cert(self, user: str, groups: Sequence[str] = ()) -> tuple[Path, Path]:
        return self.pki.client_cert(user, groups)

    def add_token(self, token: str, user: str, groups: Sequence[str] = (), uid: str = "") -> None:
        """Accept ``Authorization: Bearer <token>`` as ``user`` (the static token file)."""
        self.parts.tokens.add(token, UserInfo(user, tuple(groups), uid))

    def add_bootstrap_token(self, token: str, extra_groups: str = "") -> None:
        """Store the Secret that makes ``<id>.<secret>`` a bootstrap token."""
        token_id, _, secret = token.partition(".")
        self.parts.store.create("secrets", token_secret(token_id, secret, extra_groups))

    def decide_csr(self, name: str, approved: bool, reason: str, message: str = "") -> None:
        """Approve or deny a CSR by hand (``kubectl certificate approve|deny``)."""
        self.parts.csrs.approve(name, approved, reason, message)

    def bootstrap_kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig as ``kubeadm join`` writes ``bootstrap-kubelet.conf``."""
        return self.pki.write_kubeconfig(path, self.url, "tls-bootstrap-token-user", token=token)

    def requests(self, **filters: Any) -> list[RequestRecord]:
        """Recorded requests: filters user, resource, verb, subresource, user_agent, since."""
        return self.parts.request_log.requests(**filters)

    def request_count(self, **filters: Any) -> int:
        return len(self.requests(**filters))

    def drop_watches(self, abrupt: bool = False) -> None:
        """End every open watch: cleanly (the stream ends, as at a server-side timeout) or,
        with ``abrupt``, by cutting the watch's TCP connection mid-stream."""
        for watcher in self.parts.store.watchers():
            if abrupt and watcher.connection is not None:
                with contextlib.suppress(OSError):
                    watcher.connection.shutdown(socket.SHUT_RDWR)
            watcher.close()

    def trust_kubelet_ca(self, ca: Path | None) -> None:
        """Verify kubelets' serving certs with ``ca`` (``--kubelet-certificate-authority``);
        None goes back to not verifying them."""
        self.parts.proxy.config.ca = ca

    def compact(self) -> None:
        """Forget the watch history: resuming from an older resourceVersion gets 410."""
        self.parts.store.compact()

    @property
    def table(self) -> ResourceTable:
        return self.parts.table
