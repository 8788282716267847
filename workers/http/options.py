"""What the http worker is started with: its listeners, TLS, authentication and
authorization, and the node's facts its endpoints serve. Plain frozen data, built by the
parent (``supervisor/workerset.py``) from the KubeletConfiguration."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any


class Api(enum.StrEnum):
    """Which API a listener serves: each has its own route table (``routes.py``)."""

    HEALTHZ = "healthz"  # healthzBindAddress:healthzPort, plain HTTP, /healthz only
    READ_ONLY = "read-only"  # readOnlyPort, plain HTTP, no authentication
    KUBELET = "kubelet"  # address:port, HTTPS, authenticated and authorized


@dataclass(frozen=True, slots=True)
class Listen:
    host: str
    port: int
    api: Api


@dataclass(frozen=True, slots=True)
class TlsOptions:
    cert_file: str  # "" (with key_file ""): a self-signed one under cert_dir
    key_file: str
    cert_dir: str  # <root-dir>/pki
    min_version: str = ""  # Go's name; "" is TLS 1.2
    cipher_suites: tuple[str, ...] = ()  # Go's names; () is OpenSSL's defaults
    bootstrap: bool = False  # serverTLSBootstrap: serve <cert_dir>/kubelet-server-current.pem


class AuthorizationMode(enum.StrEnum):
    ALWAYS_ALLOW = "AlwaysAllow"
    WEBHOOK = "Webhook"


@dataclass(frozen=True, slots=True)
class AuthOptions:
    anonymous: bool = False
    client_ca_file: str = ""
    webhook_authn: bool = True
    authn_cache_ttl: float = 120.0
    mode: AuthorizationMode = AuthorizationMode.WEBHOOK
    authorized_ttl: float = 300.0
    unauthorized_ttl: float = 30.0


@dataclass(frozen=True, slots=True)
class ApiClientOptions:
    """How the worker reaches the API server for TokenReviews and SubjectAccessReviews."""

    kubeconfig: str = ""  # "": standalone, no API server to ask
    qps: int = 50
    burst: int = 100
    follow_certificates: bool = False  # the cert-manager writes or rotates its credentials


@dataclass(frozen=True, slots=True)
class HttpOptions:
    node_name: str
    listens: tuple[Listen, ...]
    tls: TlsOptions
    auth: AuthOptions = AuthOptions()
    api: ApiClientOptions = ApiClientOptions()
    pod_logs_dir: str = "/var/log/pods"
    root_dir: str = "/var/lib/kubelet"  # pod volumes and the node filesystem, for stats
    runtime_endpoint: str = ""  # the CRI, for image filesystem and container stats
    runtime_timeout: float = 10.0
    node_log_dir: str = "/var/log"  # what /logs/ serves, as the kubelet's http.Dir
    streaming_idle_timeout: float = 4 * 3600.0  # exec/attach/portForward; 0: none
    configz: dict[str, Any] = field(default_factory=dict)  # v1beta1 field names
    volume_stats_period: float = 60.0  # volumeStatsAggPeriod; 0 or negative: no volume stats
    volume_health: bool = False  # gate CSIVolumeHealth: the drivers' volume conditions
