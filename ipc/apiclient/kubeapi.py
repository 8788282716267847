"""The Kubernetes API server, through the official client: a kubeconfig in, an
``ApiClient`` out that every API worker shares its rules through.

``connect`` reads the kubeconfig (server, CA, client certificate or token) as the
kubelet's ``--kubeconfig``, and returns a client whose every request first takes a
token from a ``RateLimiter`` (``kubeAPIQPS``, ``kubeAPIBurst``: client-go's token
bucket) and carries pkletd's user agent. ``describe`` turns any failure of a call
into one short line for logs and ``pkletd status``. ``send_json`` makes a raw request
with a JSON body, for the workers that keep objects as API JSON.

Imported by the API workers only: ``kubernetes.client`` costs ~0.4 s to import, so
the fork server loads it only when pkletd joins a cluster.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import kubernetes.client
import kubernetes.config
import urllib3
from kubernetes.client.exceptions import ApiException
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock

USER_AGENT = "pkletd/0.1.0 (linux/amd64) kubernetes/v1.32"
REQUEST_TIMEOUT_S = 10.0  # a single non-watch call
JSON = "application/json"


class RateLimiter:
    """A token bucket: ``burst`` tokens, refilled at ``qps`` a second; ``take`` waits."""

    def __init__(
        self,
        qps: float,
        burst: int,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._qps = qps
        self._burst = max(1, burst)
        self._tokens = float(self._burst)
        self._clock = clock
        self._last = clock.monotonic()
        self._lock = threading.Lock()

    def take(self) -> None:
        with self._lock:
            now = self._clock.monotonic()
            self._tokens = min(self._burst, self._tokens + (now - self._last) * self._qps)
            self._last = now
            self._tokens -= 1
            wait = -self._tokens / self._qps if self._tokens < 0 else 0.0
        if wait > 0:
            self._clock.sleep(wait)


@dataclass(frozen=True, slots=True)
class Answer:
    """A raw request's answer: the HTTP status, its reason phrase and the body."""

    status: int
    reason: str
    data: bytes


class LimitedApiClient(kubernetes.client.ApiClient):
    """An ``ApiClient`` whose every request waits for the rate limiter first."""

    def __init__(self, configuration: kubernetes.client.Configuration, limiter: RateLimiter):
        super().__init__(configuration)
        self.user_agent = USER_AGENT
        self._limiter = limiter

    def call_api(self, *args: Any, **kwargs: Any) -> Any:
        self._limiter.take()
        return super().call_api(*args, **kwargs)

    def send_json(
        self,
        method: str,
        path: str,
        body: dict[str, Any] | None = None,
        content_type: str = JSON,
        query: Sequence[tuple[str, str]] = (),
        timeout: float = REQUEST_TIMEOUT_S,
    ) -> Answer:
        """One request with a JSON body sent as is (no model round-trip drops a field) and
        its answer read whole, whatever the status: the connection goes back to the pool
        at once, and no exception raised later keeps its socket alive."""
        headers = {"Accept": JSON}
        if body is not None:
            headers["Content-Type"] = content_type
        request = self.param_serialize(
            method=method,
            resource_path=path,
            query_params=list(query),
            header_params=headers,
            body=body,
            auth_settings=["BearerToken"],
        )
        response = self.call_api(*request, _request_timeout=timeout)
        try:
            data = bytes(response.read())
        finally:
            response.response.release_conn()
        return Answer(int(response.status), str(response.reason or ""), data)

    def close(self) -> None:
        """Close the pooled connections now (urllib3 2's ``PoolManager.clear`` leaves them
        to the garbage collector, sockets and all), then the client."""
        pools = self.rest_client.pool_manager.pools
        for key in list(pools.keys()):
            pool = pools.get(key)
            if pool is not None:
                pool.close()
        super().close()  # type: ignore[no-untyped-call]


def connect(
    kubeconfig: str, qps: int, burst: int, pool_size: int | None = None
) -> LimitedApiClient:
    """A client for the API server the kubeconfig names, with its credentials.
    ``pool_size``: connections kept for reuse (the client's default: 5 per CPU), for a
    worker that holds many watches open at once."""
    configuration = kubernetes.client.Configuration()
    kubernetes.config.load_kube_config(  # type: ignore[no-untyped-call]
        config_file=kubeconfig, client_configuration=configuration, persist_config=False
    )
    configuration.retries = False  # the workers retry with their own back-off, and log once
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    client = LimitedApiClient(configuration, RateLimiter(qps, burst))
    _share_tls_context(client.rest_client.pool_manager.connection_pool_kw)
    return client


def _share_tls_context(pool_kw: dict[str, Any]) -> None:
    """One TLS context, with the CA and the client certificate loaded once, for every
    connection: urllib3 otherwise builds a context per connection and reads the files
    again each time (~40 KB each, which a worker holding hundreds of watches feels)."""
    context = urllib3.util.ssl_.create_urllib3_context(cert_reqs=pool_kw["cert_reqs"])
    ca_file, ca_data = pool_kw.pop("ca_certs", None), pool_kw.pop("ca_cert_data", None)
    if ca_file or ca_data:
        context.load_verify_locations(cafile=ca_file, cadata=ca_data)
    else:
        context.load_default_certs()
    cert_file, key_file = pool_kw.pop("cert_file", None), pool_kw.pop("key_file", None)
    if cert_file:
        context.load_cert_chain(cert_file, key_file)
    pool_kw["ssl_context"] = context


def describe(exc: BaseException) -> str:
    """A failed call in one line: the API's status and reason, or the connection error."""
    if isinstance(exc, ApiException):
        return f"HTTP {exc.status} {exc.reason}".strip()
    if isinstance(exc, urllib3.exceptions.MaxRetryError):
        return f"cannot reach the API server: {exc.reason}"
    return f"{type(exc).__name__}: {exc}"


def status_of(exc: BaseException) -> int:
    """The HTTP status of a failed call, 0 when no response came."""
    return int(exc.status or 0) if isinstance(exc, ApiException) else 0
