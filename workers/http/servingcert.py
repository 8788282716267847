"""The kubelet API's certificate from the CSR API (``serverTLSBootstrap``), swapped in
without restarting the listeners.

The listening context has no certificate of its own; its SNI callback (called for every
TLS handshake, with a server name or without) gives each new connection a context that
serves ``<cert-dir>/kubelet-server-current.pem``, built again whenever the link points at
a new pair. Connections already open keep the certificate they began with. Until the
cert-manager has stored one, every handshake fails, and the kubelet's message is logged
once: ``no serving certificate available for the kubelet``.
"""

from __future__ import annotations

import logging
import ssl
import threading
from collections.abc import Callable
from pathlib import Path

log = logging.getLogger(__name__)

NO_CERTIFICATE = "no serving certificate available for the kubelet"
CURRENT = "kubelet-server-current.pem"


class RotatingCertificate:
    def __init__(self, cert_dir: Path, make_context: Callable[[], ssl.SSLContext]) -> None:
        self.current = cert_dir / CURRENT
        self._make_context = make_context
        self._lock = threading.Lock()
        self._loaded: tuple[Path, ssl.SSLContext] | None = None
        self._warned = False

    def install(self, context: ssl.SSLContext) -> None:
        context.sni_callback = self._choose

    def context(self) -> ssl.SSLContext | None:
        """The context serving the current pair; None while there is none."""
        try:
            target = self.current.resolve(strict=True)
        except OSError:
            return None
        with self._lock:
            if self._loaded is not None and self._loaded[0] == target:
                return self._loaded[1]
            context = self._make_context()
            try:
                context.load_cert_chain(target, target)
            except (OSError, ssl.SSLError) as exc:
                log.error("serving certificate not usable path=%s error=%s", target, exc)
                return self._loaded[1] if self._loaded else None
            log.info("serving certificate loaded path=%s", target)
            self._loaded = (target, context)
            return context

    def _choose(
        self, connection: ssl.SSLObject | ssl.SSLSocket, _name: str | None, _base: ssl.SSLContext
    ) -> int | None:
        context = self.context()
        if context is None:
            if not self._warned:
                self._warned = True
                log.error("TLS handshake refused: %s", NO_CERTIFICATE)
            return ssl.ALERT_DESCRIPTION_INTERNAL_ERROR
        connection.context = context
        return None
