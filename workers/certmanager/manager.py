"""The node's client certificate over time: bootstrap, rotation, fall back to bootstrap.

Each ``step`` looks at the kubeconfig and the store and does what is due:

- the kubeconfig is missing or its certificate expired: with a bootstrap kubeconfig, ask
  for a certificate with the bootstrap credentials, store it, write the kubeconfig that
  points at the current link (the kubelet's TLS bootstrap); without one, fail;
- the current pair is valid: report it, and with rotation on, once the pair's jittered
  deadline has passed, ask for a new one as the node itself (``system:node:<name>``);
- the kubeconfig carries credentials of its own (no pair in the store): nothing to do.

A failure is logged with its cause and reported, and the next step comes after a backoff
(``timing``); nothing else of the node waits on it. The steps run on a thread of the
cert-manager worker (``worker.py``), never on its bus loop.
"""

from __future__ import annotations

import datetime as dt
import logging
import random
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pkletd.ipc.apiclient import clientcert
from pkletd.ipc.bus.messages import ClientCertificateReported
from pkletd.workers.certmanager import csr, kubeconfigs, requester, timing
from pkletd.workers.certmanager.store import Pair, Store

log = logging.getLogger(__name__)

IDLE_CHECK_S = 60.0  # how often a node with nothing due looks again
Connect = Callable[[str], Any]  # kubeconfig path -> API client


@dataclass(frozen=True, slots=True)
class CertSettings:
    node_name: str
    kubeconfig: Path
    bootstrap_kubeconfig: Path | None
    cert_dir: Path
    rotate: bool
    serving_sans: tuple[str, ...] = ()  # serverTLSBootstrap: the node's hostnames and IPs


class CertManager:
    def __init__(
        self,
        settings: CertSettings,
        connect: Connect,
        report: Callable[[ClientCertificateReported], None],
        rng: random.Random | None = None,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    ) -> None:
        self.settings = settings
        self.store = Store(settings.cert_dir)
        self._connect = connect
        self._report = report
        self._rng = rng or random.Random()
        self._now = now
        self._deadlines: dict[Path, dt.datetime] = {}
        self._last: ClientCertificateReported | None = None

    def run(self, stop: threading.Event) -> None:
        failures = 0
        while not stop.is_set():
            try:
                wait = self.step(stop)
                failures = 0
            except (requester.RequestFailed, kubeconfigs.BootstrapConfigError) as exc:
                failures += 1
                wait = timing.backoff_s(failures, self._rng)
                log.error("client certificate not obtained error=%s retry_in_s=%.1f", exc, wait)
                self._tell(self._last.path if self._last else "", self._not_after(), str(exc))
            stop.wait(wait)

    def step(self, stop: threading.Event) -> float:
        """Do what is due now; the seconds until the next look."""
        pair = self.store.current()
        if not clientcert.usable(self.settings.kubeconfig, self._now()):
            self._bootstrap(stop)
            return 0.0
        if pair is None or pair.expired(self._now()):
            self._tell(str(self.settings.kubeconfig), 0.0, "")  # the operator's credentials
            return IDLE_CHECK_S
        self._tell(str(pair.path), pair.not_after.timestamp(), "")
        if not self.settings.rotate:
            return IDLE_CHECK_S
        due = self._deadline(pair)
        if self._now() < due:
            return min(IDLE_CHECK_S, (due - self._now()).total_seconds())
        self._rotate(stop)
        return 0.0

    def _deadline(self, pair: Pair) -> dt.datetime:
        if pair.path not in self._deadlines:
            due = timing.rotation_deadline(pair.not_before, pair.not_after, self._rng)
            self._deadlines[pair.path] = due
            log.info("client certificate rotation deadline=%s path=%s", due.isoformat(), pair.path)
        return self._deadlines[pair.path]

    def _bootstrap(self, stop: threading.Event) -> None:
        bootstrap = self.settings.bootstrap_kubeconfig
        if bootstrap is None:
            raise requester.RequestFailed(
                f"kubeconfig {self.settings.kubeconfig} is missing or expired and there is "
                "no bootstrap kubeconfig"
            )
        cluster = kubeconfigs.bootstrap_cluster(bootstrap)
        key = self.store.pending_key() or csr.new_key()
        self.store.keep_pending_key(key)
        request = csr.request_for(self.settings.node_name, key)
        log.info(
            "requesting client certificate with bootstrap credentials node=%s", request.node_name
        )
        client = self._client(str(bootstrap))
        cert = requester.obtain(client, request, csr.bootstrap_name(request), stop, "bootstrap")
        path = self.store.write(cert, key, self._now())
        self.store.drop_pending_key()
        kubeconfigs.write_node_kubeconfig(
            self.settings.kubeconfig, cluster, self.store.current_path
        )
        log.info("client certificate obtained by TLS bootstrap path=%s", path)

    def _rotate(self, stop: threading.Event) -> None:
        key = csr.new_key()
        request = csr.request_for(self.settings.node_name, key)
        log.info("rotating client certificate node=%s", request.node_name)
        client = self._client(str(self.settings.kubeconfig))
        cert = requester.obtain(client, request, "", stop, "node")
        path = self.store.write(cert, key, self._now())
        log.info("client certificate rotated path=%s", path)

    def _client(self, kubeconfig: str) -> Any:
        try:
            return self._connect(kubeconfig)
        except Exception as exc:  # the kubeconfig is the operator's to fix
            raise requester.RequestFailed(f"kubeconfig {kubeconfig} not usable: {exc}") from exc

    def _not_after(self) -> float:
        return self._last.not_after if self._last else 0.0

    def _tell(self, path: str, not_after: float, error: str) -> None:
        report = ClientCertificateReported(path, not_after, error)
        if report != self._last:
            self._last = report
            self._report(report)
