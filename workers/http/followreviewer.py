"""Reviews with the node's current client certificate, when the cert-manager keeps it.

With TLS bootstrap the kubeconfig is written after the http worker starts, and with
rotation its certificate link moves to a new pair: the reviewer connects again whenever
the kubeconfig file or the pair ``<cert-dir>/kubelet-client-current.pem`` points at has
changed since it last connected (a stat and a readlink per review, whose answers the
authenticator and authorizer cache). While the kubeconfig cannot be used, each review is
unavailable, saying why.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from pkletd.workers.http.reviews import ApiReviewer, ReviewUnavailable, Status

CURRENT = "kubelet-client-current.pem"


class FollowingReviewer:
    def __init__(self, kubeconfig: str, cert_dir: str, qps: int, burst: int) -> None:
        self.kubeconfig = kubeconfig
        self.link = Path(cert_dir) / CURRENT
        self.qps, self.burst = qps, burst
        self._lock = threading.Lock()
        self._reviewer: ApiReviewer | None = None
        self._seen: tuple[int, str] | None = None

    def token_review(self, token: str) -> Status:
        return self._current().token_review(token)

    def access_review(self, spec: dict[str, Any]) -> Status:
        return self._current().access_review(spec)

    def close(self) -> None:
        with self._lock:
            if self._reviewer is not None:
                self._reviewer.close()
                self._reviewer = None

    def _current(self) -> ApiReviewer:
        try:
            seen = (os.stat(self.kubeconfig).st_mtime_ns, os.path.realpath(self.link))
        except OSError as exc:
            raise ReviewUnavailable(f"kubeconfig {self.kubeconfig} not there yet: {exc}") from None
        with self._lock:
            if self._reviewer is not None and seen == self._seen:
                return self._reviewer
            try:
                fresh = ApiReviewer(self.kubeconfig, self.qps, self.burst)
            except Exception as exc:  # noqa: BLE001 (a kubeconfig the client refuses)
                raise ReviewUnavailable(f"kubeconfig {self.kubeconfig} unusable: {exc}") from None
            if self._reviewer is not None:
                self._reviewer.close()
            self._reviewer, self._seen = fresh, seen
            return fresh
