"""pkletd's configuration: a kubelet KubeletConfiguration file plus command-line flags.

pkletd reads the same file the kubelet does (``--config``, a YAML document with
``apiVersion: kubelet.config.k8s.io/v1beta1`` and ``kind: KubeletConfiguration``)
and accepts the kubelet's flag names for the settings it implements.  ``load()``
turns both into one frozen ``KubeletConfig``.

Precedence, lowest first:

1. the kubelet's defaults (pkletd's own defaults for its flag-only settings);
2. fields present in the ``--config`` file;
3. flags given explicitly on the command line (every flag defaults to None, so
   an absent flag never hides a file value).

Where the kubelet's file defaulting differs from its flags' legacy defaults, the
file's apply whenever a ``--config`` file is given: anonymous auth off, token
webhook on and authorization ``Webhook`` with a file; on, off and ``AlwaysAllow``
without one. Nested fields (``authentication.webhook.enabled``) are mappings in
the file and are named with dots in errors.

As in the kubelet's file defaulting, a field set to null, or to the zero value of
its type ("", 0, "0s"), means "use the default".  The exceptions are healthzPort,
where 0 disables the endpoint, podPidsLimit, where any negative value means
"no pod-level limit" and becomes -1, and the kubelet's pointer fields
containerLogMaxSize ("0" rotates every non-empty log; a negative size turns
rotation off), containerLogMaxFiles (at least 2), containerLogMaxWorkers (at
least 1) and containerLogMonitorInterval (at least 3s), where 0 is not a default
but a value checked like any other.  The same rule applies to flag values.

Unknown-field policy for the file:

* a field pkletd implements is type-checked and range-checked; a bad value is a
  ``ConfigError`` naming the file and the field;
* a real KubeletConfiguration v1beta1 field that pkletd does not implement yet
  (cgroupDriver, tracing, ...) is accepted so that an existing
  kubelet file keeps working, and is reported back in ``LoadResult.warnings``;
  its value is not checked;
* any other name is a ``ConfigError``, with a "did you mean" hint when the name
  is close to a real one.
"""

from __future__ import annotations

import argparse
import difflib
import ipaddress
import json
import os.path
import re
import socket
import urllib.parse
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml
from pkletd.ipc import tlsnames
from pkletd.ipc.apimodel import labels, quantity
from pkletd.supervisor import dropins, featuregates, kubeletflags
from pkletd.supervisor.node import addresses
from pkletd.supervisor.pods import sysctls

API_VERSION = "kubelet.config.k8s.io/v1beta1"
KIND = "KubeletConfiguration"


class ConfigError(Exception):
    """A configuration file or flag value pkletd cannot use; the message names where."""


@dataclass(frozen=True, slots=True)
class KubeletConfig:
    """The effective configuration. Durations are float seconds."""

    # KubeletConfiguration fields (file and kubelet flags)
    static_pod_path: str
    file_check_frequency: float
    sync_frequency: float
    container_runtime_endpoint: str
    runtime_request_timeout: float
    streaming_connection_idle_timeout: float
    pod_logs_dir: str
    read_only_port: int
    healthz_port: int
    healthz_bind_address: str
    address: str
    port: int
    max_pods: int
    pod_pids_limit: int
    static_pod_url: str
    static_pod_url_header: tuple[tuple[str, str], ...]  # (name, value), in order
    http_check_frequency: float
    container_log_max_size: int  # bytes; negative: no rotation
    container_log_max_files: int
    container_log_max_workers: int
    container_log_monitor_interval: float
    image_minimum_gc_age: float
    image_maximum_gc_age: float  # 0: off
    image_gc_high_threshold_percent: int
    image_gc_low_threshold_percent: int
    register_node: bool
    register_with_taints: tuple[labels.Taint, ...]
    node_status_update_frequency: float
    node_status_report_frequency: float
    node_lease_duration_seconds: int
    node_status_max_images: int
    kube_api_qps: int
    kube_api_burst: int
    event_record_qps: int
    event_burst: int
    config_map_and_secret_change_detection_strategy: str  # Watch, Cache or Get
    cluster_dns: tuple[str, ...]  # IP addresses, in order
    cluster_domain: str
    resolv_conf: str  # the node's resolver file; "": none
    system_reserved: tuple[tuple[str, str], ...]  # resource name, quantity
    kube_reserved: tuple[tuple[str, str], ...]
    eviction_hard: tuple[tuple[str, str], ...]  # signal, quantity or percentage
    eviction_soft: tuple[tuple[str, str], ...]
    eviction_soft_grace_period: tuple[tuple[str, float], ...]  # signal, seconds
    eviction_minimum_reclaim: tuple[tuple[str, str], ...]
    eviction_pressure_transition_period: float
    eviction_max_pod_grace_period: int
    merge_default_eviction_settings: bool
    local_storage_capacity_isolation: bool  # emptyDir sizeLimit, ephemeral-storage limits
    tls_cert_file: str
    tls_private_key_file: str
    tls_min_version: str  # Go's name (VersionTLS12); "" is the worker's default
    tls_cipher_suites: tuple[str, ...]  # Go's names
    authentication_anonymous: bool
    authentication_client_ca_file: str
    authentication_webhook: bool
    authentication_webhook_cache_ttl: float
    authorization_mode: str  # AlwaysAllow or Webhook
    authorization_webhook_cache_authorized_ttl: float
    authorization_webhook_cache_unauthorized_ttl: float
    shutdown_grace_period: float
    shutdown_grace_period_critical_pods: float
    shutdown_grace_period_by_pod_priority: tuple[tuple[int, int], ...]  # priority, seconds
    allowed_unsafe_sysctls: tuple[str, ...]  # names, or prefixes ending in "*"
    seccomp_default: bool  # RuntimeDefault for containers that name no seccomp profile
    feature_gates: tuple[tuple[str, bool], ...]  # (name, enabled), sorted
    rotate_certificates: bool
    server_tls_bootstrap: bool
    volume_stats_agg_period: float  # how often volume stats are measured; negative: never
    # kubelet flags with no file field
    kubeconfig: str
    bootstrap_kubeconfig: str  # TLS bootstrap credentials when the kubeconfig is not usable
    cert_dir: str  # resolved: <root-dir>/pki when not given
    node_ip: str
    node_labels: tuple[tuple[str, str], ...]
    minimum_container_ttl_duration: float
    maximum_dead_containers_per_container: int  # negative: no limit
    maximum_dead_containers: int  # negative: no limit
    image_credential_provider_config: str  # a CredentialProviderConfig file or directory
    image_credential_provider_bin_dir: str  # where the providers' executables are
    # pkletd's own settings (flags only)
    root_dir: str
    run_dir: str
    log_dir: str
    logind_conf_dir: str
    node_name: str
    pleg_relist_period: float
    pleg_runtime_events: bool
    worker_heartbeat_timeout: float
    pod_sync_parallelism: int
    image_gc_period: float  # the kubelet's ImageGCPeriod, a constant there
    container_gc_period: float  # the kubelet's ContainerGCPeriod, a constant there
    eviction_monitoring_period: float


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What ``load()`` returns: the configuration and one warning per ignored file field."""

    config: KubeletConfig
    warnings: tuple[str, ...]


# --- Go duration strings ---------------------------------------------------------

_DURATION_UNITS = {
    "ns": 1e-9,
    "us": 1e-6,
    "µs": 1e-6,  # U+00B5 micro sign
    "μs": 1e-6,  # U+03BC Greek mu
    "ms": 1e-3,
    "s": 1.0,
    "m": 60.0,
    "h": 3600.0,
}
_DURATION_TERM = re.compile(r"([0-9]+(?:\.[0-9]*)?|\.[0-9]+)(ns|us|µs|μs|ms|s|m|h)")
_DURATION = re.compile(rf"\+?(?:(?:{_DURATION_TERM.pattern})+|0)")


def parse_duration(text: str) -> float:
    """Seconds in a Go duration string ("20s", "1m30s", "500ms", "0"); ValueError if bad."""
    if text.startswith("-") and _DURATION.fullmatch(text[1:]):
        raise ValueError(f"negative duration {_show(text)} is not allowed")
    if not _DURATION.fullmatch(text):
        raise ValueError(f'invalid duration {_show(text)} (want e.g. "20s", "1m30s")')
    terms = _DURATION_TERM.findall(text)
    return sum(float(number) * _DURATION_UNITS[unit] for number, unit in terms)


# --- value parsers: YAML value in, typed value out, ValueError with the reason ----------
# Each accepts the zero value of its type, which the zero rule then turns into the default.


def _show(value: object) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= 60 else text[:57] + "..."


def _string(value: object) -> str:
    if not isinstance(value, str):
        raise ValueError(f"must be a string, got {_show(value)}")
    return value


def _duration(value: object) -> float:
    if not isinstance(value, str):
        raise ValueError(f'must be a duration string such as "20s", got {_show(value)}')
    return parse_duration(value)


def _signed_duration(value: object) -> float:
    """A duration that may be negative (volumeStatsAggPeriod: negative turns it off)."""
    if isinstance(value, str) and value.startswith("-"):
        return -_duration(value[1:])
    return _duration(value)


def _integer(lo: int, hi: int) -> Callable[[object], int]:
    def parse(value: object) -> int:
        if isinstance(value, bool) or not isinstance(value, int) or not lo <= value <= hi:
            raise ValueError(f"must be an integer in {lo}..{hi}, got {_show(value)}")
        return value

    return parse


_port = _integer(0, 65535)
_int32 = _integer(0, 2**31 - 1)
_signed_int32 = _integer(-(2**31), 2**31 - 1)
_percent = _integer(0, 100)
_int64 = _integer(-(2**63), 2**63 - 1)


def _pids_limit(value: object) -> int:
    return max(_int64(value), -1)


def _ip_address(value: object) -> str:
    text = _string(value)
    try:
        if text:
            ipaddress.ip_address(text)
    except ValueError:
        raise ValueError(f"must be an IP address, got {_show(text)}") from None
    return text


def _ip_list(value: object) -> tuple[str, ...]:
    """clusterDNS: a list of IP addresses (the flag's comma-separated text is split)."""
    if not isinstance(value, list):
        raise ValueError(f"must be a list of IP addresses, got {_show(value)}")
    for item in value:
        try:
            ipaddress.ip_address(_string(item))
        except ValueError:
            raise ValueError(f"must be a list of IP addresses, got {_show(item)} in it") from None
    return tuple(value)


_DOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")


def _domain(value: object) -> str:
    """clusterDomain: a DNS subdomain (``cluster.local``), or empty for none."""
    text = _string(value)
    if text and (len(text) > 253 or not _DOMAIN.fullmatch(text)):
        raise ValueError(f'must be a DNS domain such as "cluster.local", got {_show(text)}')
    return text


def _absolute_path(value: object) -> str:
    text = _string(value)
    if text and not os.path.isabs(text):
        raise ValueError(f"must be an absolute path, got {_show(text)}")
    return text


def _node_name(value: object) -> str:
    return _string(value).strip().lower()


def _url(value: object) -> str:
    text = _string(value)
    parts = urllib.parse.urlsplit(text)
    if text and (parts.scheme not in ("http", "https") or not parts.hostname):
        raise ValueError(f"must be an http:// or https:// URL, got {_show(text)}")
    return text


_HEADER_NAME = re.compile(r"[!#$%&'*+.^_`|~0-9A-Za-z-]+")  # an HTTP token (RFC 9110)


def _header_map(value: object) -> tuple[tuple[str, str], ...]:
    """staticPodURLHeader: header name -> list of values; (name, value) pairs in order."""
    want = f"must be a mapping of header names to lists of values, got {_show(value)}"
    if not isinstance(value, dict):
        raise ValueError(want)
    pairs: list[tuple[str, str]] = []
    for name, values in value.items():
        if not isinstance(values, list) or not all(isinstance(v, str) for v in values):
            raise ValueError(want)
        if not isinstance(name, str) or not _HEADER_NAME.fullmatch(name):
            raise ValueError(f"header name {_show(name)} is not a valid HTTP header name")
        for text in values:
            if any(c in text for c in "\r\n\0"):
                raise ValueError(f"header {name}: a value must not contain line breaks")
            pairs.append((name, text))
    return tuple(pairs)


def _colon_multimap(texts: list[str]) -> dict[str, list[str]]:
    """--manifest-url-header values ("a:x,b:y", repeatable) as the file field's mapping."""
    found: dict[str, list[str]] = {}
    for text in texts:
        for pair in text.split(","):
            if not pair:
                continue
            name, colon, value = pair.partition(":")
            if not colon:
                raise ValueError(f"malformed pair {_show(pair)}, want NAME:VALUE")
            found.setdefault(name.strip(), []).append(value.strip())
    return found


DEFAULT_LOG_MAX_SIZE = 10 * 2**20  # the kubelet's "10Mi"


def _log_max_size(value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, str | int):
        raise ValueError(f'must be a quantity such as "10Mi", got {_show(value)}')
    if value == "":
        return DEFAULT_LOG_MAX_SIZE
    try:
        size = quantity.parse(value)
    except quantity.BadQuantity as exc:
        raise ValueError(f"invalid quantity {_show(value)}: {exc}") from None
    if size.denominator != 1 or not -(2**63) <= size < 2**63:  # the kubelet's AsInt64
        raise ValueError(f"must be a whole number of bytes, got {_show(value)}")
    return int(size)


def _monitor_interval(value: object) -> float:
    seconds = _duration(value)
    if seconds < 3:
        raise ValueError(f"must be at least 3s, got {_show(value)}")
    return seconds


def _bool(value: object) -> bool:
    if isinstance(value, bool):
        return value
    if value in ("true", "false"):  # a flag's text
        return value == "true"
    raise ValueError(f"must be true or false, got {_show(value)}")


def _node_ips(value: object) -> str:
    """--node-ip: one IP or a dual-stack pair, normalised ("10.0.0.5,fd00::5")."""
    return ",".join(str(ip) for ip in addresses.parse_node_ips(_string(value)))


def _feature_gates(value: object) -> tuple[tuple[str, bool], ...]:
    """featureGates: gate name -> bool, every name one the kubelet knows; sorted."""
    if not isinstance(value, dict) or not all(isinstance(v, bool) for v in value.values()):
        raise ValueError(f"must be a mapping of gate names to true or false, got {_show(value)}")
    gates = {str(name): enabled for name, enabled in value.items()}
    featuregates.check(gates)
    return tuple(sorted(gates.items()))


def _pairs(separator: str) -> Callable[[list[str]], dict[str, str]]:
    """A map flag's texts ("a=1,b=2", or "memory.available<1Gi" for the eviction
    thresholds), repeatable, as the file field's mapping."""

    def parse(texts: list[str]) -> dict[str, str]:
        found: dict[str, str] = {}
        for text in texts:
            for pair in filter(None, (p.strip() for p in text.split(","))):
                name, sep, value = pair.partition(separator)
                if not sep:
                    raise ValueError(f"malformed pair {_show(pair)}, want NAME{separator}VALUE")
                found[name.strip()] = value.strip()
        return found

    return parse


def _gate_texts(texts: list[str]) -> dict[str, bool]:
    found: dict[str, bool] = {}
    for text in texts:
        found.update(featuregates.parse_flag(text))
    return found


def _node_labels(value: object) -> tuple[tuple[str, str], ...]:
    try:
        pairs = labels.parse_labels(_string(value))
    except labels.InvalidLabel as exc:
        raise ValueError(str(exc)) from None
    refused = [k for k, _ in pairs if not labels.node_label_allowed(k)]
    if refused:
        raise ValueError(
            "unknown 'kubernetes.io' or 'k8s.io' labels specified with --node-labels: "
            + ", ".join(refused)
        )
    return pairs


def _taint_list(value: object) -> tuple[labels.Taint, ...]:
    """registerWithTaints: a list of {key, value, effect}; the flag: k=v:Effect,..."""
    try:
        if isinstance(value, str):
            return tuple(labels.parse_taint(t.strip()) for t in value.split(",") if t.strip())
        if not isinstance(value, list) or not all(isinstance(t, dict) for t in value):
            raise ValueError(f"must be a list of {{key, value, effect}}, got {_show(value)}")
        return tuple(_taint(t) for t in value)
    except labels.InvalidLabel as exc:
        raise ValueError(str(exc)) from None


def _taint(item: dict[Any, Any]) -> labels.Taint:
    unknown = set(item) - {"key", "value", "effect", "timeAdded"}
    if unknown:
        raise ValueError(f"taint {_show(item)}: unknown field {_show(sorted(map(str, unknown)))}")
    key, value, effect = item.get("key", ""), item.get("value", ""), item.get("effect", "")
    if not all(isinstance(v, str) for v in (key, value, effect)):
        raise ValueError(f"taint {_show(item)}: key, value and effect must be strings")
    return labels.parse_taint(f"{key}={value}:{effect}" if value else f"{key}:{effect}")


def _quantity_map(value: object) -> tuple[tuple[str, str], ...]:
    """systemReserved, kubeReserved: resource name -> quantity."""
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping of resource names to quantities, got {_show(value)}")
    pairs = []
    for name, amount in value.items():
        try:
            if not isinstance(name, str) or quantity.parse(amount) < 0:
                raise quantity.BadQuantity("must not be negative")
        except quantity.BadQuantity as exc:
            raise ValueError(f"{name}: invalid quantity {_show(amount)}: {exc}") from None
        pairs.append((name, str(amount)))
    return tuple(pairs)


EVICTION_SIGNALS = (
    "memory.available",
    "nodefs.available",
    "nodefs.inodesFree",
    "imagefs.available",
    "imagefs.inodesFree",
    "containerfs.available",
    "containerfs.inodesFree",
    "pid.available",
)


# The kubelet's DefaultEvictionHard on Linux (pkg/kubelet/eviction/defaults_linux.go).
DEFAULT_EVICTION_HARD = (
    ("memory.available", "100Mi"),
    ("nodefs.available", "10%"),
    ("nodefs.inodesFree", "5%"),
    ("imagefs.available", "15%"),
)


def _signal_map(value: object, what: str) -> dict[str, str]:
    if not isinstance(value, dict):
        raise ValueError(f"must be a mapping of signals to {what}, got {_show(value)}")
    found = {}
    for signal, amount in value.items():
        if signal not in EVICTION_SIGNALS:
            raise ValueError(f"unsupported eviction signal {_show(signal)}")
        if isinstance(amount, bool) or not isinstance(amount, str | int | float):
            raise ValueError(f"{signal}: must be a string, got {_show(amount)}")
        found[str(signal)] = str(amount)
    return found


def _signal_percent(signal: str, text: str) -> float:
    try:
        return float(text.removesuffix("%"))
    except ValueError:
        raise ValueError(f"{signal}: invalid percentage {_show(text)}") from None


def _signal_quantity(signal: str, text: str) -> Fraction:
    try:
        return quantity.parse(text)
    except quantity.BadQuantity as exc:
        raise ValueError(f"{signal}: invalid quantity {_show(text)}: {exc}") from None


def _eviction_map(value: object) -> tuple[tuple[str, str], ...]:
    """evictionHard, evictionSoft: signal -> a positive quantity or a percentage, checked as
    the kubelet's ParseThresholdConfig checks them (it ignores 0% and 100%)."""
    pairs = []
    for signal, text in _signal_map(value, "thresholds").items():
        if text.endswith("%"):
            percent = _signal_percent(signal, text)
            if not 0 <= percent <= 100:
                bound = ">= 0%" if percent < 0 else "<= 100%"
                raise ValueError(f"eviction percentage threshold {signal} must be {bound}: {text}")
        elif _signal_quantity(signal, text) <= 0:
            raise ValueError(f"eviction threshold {signal} must be positive: {text}")
        pairs.append((signal, text))
    return tuple(pairs)


def _grace_periods(value: object) -> tuple[tuple[str, float], ...]:
    """evictionSoftGracePeriod: signal -> a duration (seconds)."""
    pairs = []
    for signal, text in _signal_map(value, "durations").items():
        try:
            pairs.append((signal, parse_duration(text)))
        except ValueError as exc:
            raise ValueError(f"{signal}: {exc}") from None
    return tuple(pairs)


def _minimum_reclaims(value: object) -> tuple[tuple[str, str], ...]:
    """evictionMinimumReclaim: signal -> a quantity (not negative) or a positive percentage."""
    pairs = []
    for signal, text in _signal_map(value, "quantities").items():
        if text.endswith("%") and _signal_percent(signal, text) <= 0:
            raise ValueError(
                f"eviction percentage minimum reclaim {signal} must be positive: {text}"
            )
        if not text.endswith("%") and _signal_quantity(signal, text) < 0:
            raise ValueError(f"negative eviction minimum reclaim specified for {signal}")
        pairs.append((signal, text))
    return tuple(pairs)


AUTHORIZATION_MODES = ("AlwaysAllow", "Webhook")
# How the pod-objects worker follows ConfigMaps and Secrets: a watch per object, a GET
# once a cached read is older than the node's object TTL, or a GET every pod sync.
CHANGE_DETECTION_STRATEGIES = ("Watch", "Cache", "Get")


def _tls_version(value: object) -> str:
    text = _string(value)
    if text and text not in tlsnames.TLS_VERSIONS:
        raise ValueError(f"must be one of {', '.join(tlsnames.TLS_VERSIONS)}, got {_show(text)}")
    return text


def _cipher_suites(value: object) -> tuple[str, ...]:
    """tlsCipherSuites: a list of Go's names (the flag's comma-separated text is split)."""
    if not isinstance(value, list) or not all(isinstance(name, str) for name in value):
        raise ValueError(f"must be a list of cipher suite names, got {_show(value)}")
    for name in value:
        if name not in tlsnames.GO_CIPHERS and name not in tlsnames.TLS13_CIPHERS:
            raise ValueError(f"Cipher suite {name} not supported or doesn't exist")
    return tuple(value)


def _change_detection(value: object) -> str:
    """configMapAndSecretChangeDetectionStrategy; the kubelet refuses any other value at
    start ("unknown configmap and secret manager mode")."""
    text = _string(value)
    if text and text not in CHANGE_DETECTION_STRATEGIES:
        raise ValueError(
            f"must be one of {', '.join(CHANGE_DETECTION_STRATEGIES)}, got {_show(text)}"
        )
    return text


def _authorization_mode(value: object) -> str:
    text = _string(value)
    if text and text not in AUTHORIZATION_MODES:
        raise ValueError(f"must be one of {', '.join(AUTHORIZATION_MODES)}, got {_show(text)}")
    return text


def _shutdown_period(value: object) -> float:
    """shutdownGracePeriod, shutdownGracePeriodCriticalPods: zero (off) or at least 1s."""
    seconds = _duration(value)
    if 0 < seconds < 1:
        raise ValueError(f"must be either zero or otherwise >= 1 sec, got {_show(value)}")
    return seconds


def _priority_periods(value: object) -> tuple[tuple[int, int], ...]:
    """shutdownGracePeriodByPodPriority: a list of {priority, shutdownGracePeriodSeconds}."""
    want = f"must be a list of {{priority, shutdownGracePeriodSeconds}}, got {_show(value)}"
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise ValueError(want)
    found = []
    for item in value:
        unknown = set(item) - {"priority", "shutdownGracePeriodSeconds"}
        if unknown:
            raise ValueError(f"{_show(item)}: unknown field {_show(sorted(map(str, unknown)))}")
        try:
            priority = _integer(-(2**31), 2**31 - 1)(item.get("priority", 0))
            seconds = _integer(0, 2**63 - 1)(item.get("shutdownGracePeriodSeconds", 0))
        except ValueError as exc:
            raise ValueError(f"{_show(item)}: {exc}") from None
        found.append((priority, seconds))
    return tuple(found)


def _sysctl_patterns(value: object) -> tuple[str, ...]:
    """allowedUnsafeSysctls: sysctls, or prefixes ending in "*", that the kernel namespaces
    (the kubelet refuses to start with any other); the flag's text is comma-separated."""
    if isinstance(value, str):
        value = [part.strip() for part in value.split(",") if part.strip()]
    if not isinstance(value, list) or not all(isinstance(p, str) for p in value):
        raise ValueError(f"must be a list of sysctl names or patterns, got {_show(value)}")
    return tuple(sysctls.check_pattern(p) for p in value)


# --- the field table ----------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class _Field:
    yaml: str | None  # KubeletConfiguration name; None for pkletd's flag-only settings
    attr: str  # KubeletConfig attribute, also the argparse dest
    parse: Callable[[object], object]
    default: object
    flag: str | None
    help: str
    zero_means_default: bool = True
    metavar: str = ""  # shown in --help; by default from the default's type
    repeat: bool = False  # a flag that may be given several times (a list of texts)
    # The default when a --config file is given, where the kubelet's v1beta1 defaulting
    # differs from its flags' legacy defaults (anonymous auth, token webhook, authz mode).
    file_default: object = None
    # A repeatable flag's texts to the file field's value (a mapping); else the text is
    # taken as the file's value would be (integers and lists made from it).
    from_flag: Callable[[list[str]], object] | None = None

    def default_for(self, with_file: bool) -> object:
        return self.file_default if with_file and self.file_default is not None else self.default


_FIELDS: tuple[_Field, ...] = (
    _Field("staticPodPath", "static_pod_path", _string, "", "--pod-manifest-path",
           "directory (or single file) of static pod manifests; empty means none"),
    _Field("fileCheckFrequency", "file_check_frequency", _duration, 20.0,
           "--file-check-frequency", "how often to rescan the static pod path"),
    _Field("syncFrequency", "sync_frequency", _duration, 60.0, "--sync-frequency",
           "maximum period between resyncs of running containers"),
    _Field("containerRuntimeEndpoint", "container_runtime_endpoint", _string,
           "unix:///run/containerd/containerd.sock", "--container-runtime-endpoint",
           "CRI endpoint of the container runtime"),
    _Field("runtimeRequestTimeout", "runtime_request_timeout", _duration, 120.0,
           "--runtime-request-timeout", "timeout for CRI requests other than long-running ones"),
    _Field("streamingConnectionIdleTimeout", "streaming_connection_idle_timeout", _duration,
           4 * 3600.0, "--streaming-connection-idle-timeout",
           "how long an exec, attach or port-forward stream may carry nothing before it is "
           "closed"),
    _Field("podLogsDir", "pod_logs_dir", _absolute_path, "/var/log/pods", None, ""),
    _Field("readOnlyPort", "read_only_port", _port, 0, "--read-only-port",
           "unauthenticated read-only port; 0 disables it"),
    _Field("healthzPort", "healthz_port", _port, 10248, "--healthz-port",
           "port of the healthz endpoint; 0 disables it", zero_means_default=False),
    _Field("healthzBindAddress", "healthz_bind_address", _ip_address, "127.0.0.1",
           "--healthz-bind-address", "IP address of the healthz endpoint"),
    _Field("address", "address", _ip_address, "0.0.0.0", "--address",
           "IP address to serve the kubelet API on"),
    _Field("port", "port", _port, 10250, "--port", "port to serve the kubelet API on"),
    _Field("maxPods", "max_pods", _int32, 110, "--max-pods", "maximum number of pods"),
    _Field("podPidsLimit", "pod_pids_limit", _pids_limit, -1, "--pod-max-pids",
           "most processes per pod; -1: no pod-level limit", zero_means_default=False),
    _Field("staticPodURL", "static_pod_url", _url, "", "--manifest-url",
           "URL of pods to run (a Pod or a PodList, YAML or JSON); empty means none"),
    _Field("staticPodURLHeader", "static_pod_url_header", _header_map, (),
           "--manifest-url-header",
           "HTTP headers for --manifest-url as NAME:VALUE[,NAME:VALUE...]; repeatable",
           metavar="NAME:VALUE", repeat=True),
    _Field("httpCheckFrequency", "http_check_frequency", _duration, 20.0,
           "--http-check-frequency", "how often to fetch --manifest-url"),
    _Field("containerLogMaxSize", "container_log_max_size", _log_max_size,
           DEFAULT_LOG_MAX_SIZE, "--container-log-max-size",
           "size (a quantity, e.g. 10Mi) at which a container log is rotated; negative: never",
           zero_means_default=False, metavar="QUANTITY"),
    _Field("containerLogMaxFiles", "container_log_max_files", _integer(2, 2**31 - 1), 5,
           "--container-log-max-files",
           "most log files kept per container, the one being written included",
           zero_means_default=False),
    _Field("containerLogMaxWorkers", "container_log_max_workers", _integer(1, 2**31 - 1), 1,
           None, "", zero_means_default=False),
    _Field("containerLogMonitorInterval", "container_log_monitor_interval", _monitor_interval,
           10.0, None, "", zero_means_default=False),
    _Field("imageMinimumGCAge", "image_minimum_gc_age", _duration, 120.0,
           "--minimum-image-ttl-duration",
           "minimum age of an unused image before it is garbage collected"),
    _Field("imageMaximumGCAge", "image_maximum_gc_age", _duration, 0.0, None, ""),
    _Field("imageGCHighThresholdPercent", "image_gc_high_threshold_percent", _percent, 85,
           "--image-gc-high-threshold",
           "percent of the image filesystem used at which image GC runs; 100: never",
           zero_means_default=False),
    _Field("imageGCLowThresholdPercent", "image_gc_low_threshold_percent", _percent, 80,
           "--image-gc-low-threshold", "percent of the image filesystem image GC frees down to",
           zero_means_default=False),
    _Field("registerNode", "register_node", _bool, True, "--register-node",
           "register the node with the API server (with --kubeconfig)",
           zero_means_default=False, metavar="BOOL"),
    _Field("registerWithTaints", "register_with_taints", _taint_list, (),
           "--register-with-taints",
           "taints the node registers with, key=value:Effect[,...]", metavar="TAINTS"),
    _Field("nodeStatusUpdateFrequency", "node_status_update_frequency", _duration, 10.0,
           "--node-status-update-frequency", "how often the node status is computed"),
    _Field("nodeStatusReportFrequency", "node_status_report_frequency", _duration, 300.0,
           None, ""),
    _Field("nodeLeaseDurationSeconds", "node_lease_duration_seconds", _integer(0, 2**31 - 1),
           40, None, ""),
    _Field("nodeStatusMaxImages", "node_status_max_images", _integer(-1, 2**31 - 1), 50,
           "--node-status-max-images", "most images reported in the node status; -1: all",
           zero_means_default=False),
    _Field("kubeAPIQPS", "kube_api_qps", _int32, 50, "--kube-api-qps",
           "queries per second to the API server"),
    _Field("kubeAPIBurst", "kube_api_burst", _int32, 100, "--kube-api-burst",
           "burst of queries to the API server"),
    _Field("eventRecordQPS", "event_record_qps", _int32, 50, "--event-qps",
           "events posted per second"),
    _Field("eventBurst", "event_burst", _int32, 100, "--event-burst", "burst of events posted"),
    _Field("configMapAndSecretChangeDetectionStrategy",
           "config_map_and_secret_change_detection_strategy", _change_detection, "Watch",
           None, ""),
    _Field("clusterDNS", "cluster_dns", _ip_list, (), "--cluster-dns",
           "DNS server IPs of the cluster, comma-separated, for pods with dnsPolicy ClusterFirst",
           metavar="IPS"),
    _Field("clusterDomain", "cluster_domain", _domain, "", "--cluster-domain",
           "the cluster's DNS domain, searched by pods before the node's domains"),
    _Field("resolvConf", "resolv_conf", _absolute_path, "/etc/resolv.conf", "--resolv-conf",
           "the node's resolver file, the base of the pods' DNS; empty: none (pods with "
           "dnsPolicy Default get a local nameserver and no lookups)",
           zero_means_default=False, metavar="FILE"),
    _Field("systemReserved", "system_reserved", _quantity_map, (), "--system-reserved",
           "resources reserved for the system, NAME=QUANTITY[,...]", metavar="RESOURCES",
           repeat=True, from_flag=_pairs("=")),
    _Field("kubeReserved", "kube_reserved", _quantity_map, (), "--kube-reserved",
           "resources reserved for Kubernetes daemons, NAME=QUANTITY[,...]",
           metavar="RESOURCES", repeat=True, from_flag=_pairs("=")),
    _Field("evictionHard", "eviction_hard", _eviction_map, DEFAULT_EVICTION_HARD,
           "--eviction-hard", "hard eviction thresholds, SIGNAL<QUANTITY[,...]",
           metavar="THRESHOLDS", repeat=True, from_flag=_pairs("<")),
    _Field("evictionSoft", "eviction_soft", _eviction_map, (), "--eviction-soft",
           "soft eviction thresholds, SIGNAL<QUANTITY[,...]", metavar="THRESHOLDS",
           repeat=True, from_flag=_pairs("<")),
    _Field("evictionSoftGracePeriod", "eviction_soft_grace_period", _grace_periods, (),
           "--eviction-soft-grace-period", "grace periods of the soft thresholds, "
           "SIGNAL=DURATION[,...]", metavar="PERIODS", repeat=True, from_flag=_pairs("=")),
    _Field("evictionMinimumReclaim", "eviction_minimum_reclaim", _minimum_reclaims, (),
           "--eviction-minimum-reclaim", "minimum reclaims, SIGNAL=QUANTITY[,...]",
           metavar="RECLAIMS", repeat=True, from_flag=_pairs("=")),
    _Field("evictionPressureTransitionPeriod", "eviction_pressure_transition_period", _duration,
           300.0, "--eviction-pressure-transition-period",
           "how long a pressure condition stays after its signal is no longer met"),
    _Field("evictionMaxPodGracePeriod", "eviction_max_pod_grace_period", _int32, 0,
           "--eviction-max-pod-grace-period",
           "longest grace period (seconds) of a pod evicted for a soft threshold"),
    _Field("mergeDefaultEvictionSettings", "merge_default_eviction_settings", _bool, False,
           None, ""),
    _Field("localStorageCapacityIsolation", "local_storage_capacity_isolation", _bool, True,
           "--local-storage-capacity-isolation",
           "enforce emptyDir sizeLimit and ephemeral-storage limits, and report the node's "
           "ephemeral-storage", zero_means_default=False, metavar="BOOL"),
    _Field("tlsCertFile", "tls_cert_file", _string, "", "--tls-cert-file",
           "serving certificate of the kubelet API (with its CA after it); empty: a "
           "self-signed one in <root-dir>/pki"),
    _Field("tlsPrivateKeyFile", "tls_private_key_file", _string, "", "--tls-private-key-file",
           "private key of --tls-cert-file"),
    _Field("tlsMinVersion", "tls_min_version", _tls_version, "", "--tls-min-version",
           "minimum TLS version of the kubelet API (VersionTLS10..VersionTLS13); empty: 1.2",
           metavar="VERSION"),
    _Field("tlsCipherSuites", "tls_cipher_suites", _cipher_suites, (), "--tls-cipher-suites",
           "cipher suites of the kubelet API (Go's names, comma-separated); empty: OpenSSL's",
           metavar="NAMES"),
    _Field("authentication.anonymous.enabled", "authentication_anonymous", _bool, True,
           "--anonymous-auth", "serve requests without credentials as system:anonymous",
           zero_means_default=False, metavar="BOOL", file_default=False),
    _Field("authentication.x509.clientCAFile", "authentication_client_ca_file", _string, "",
           "--client-ca-file", "CA bundle that verifies client certificates of the kubelet API"),
    _Field("authentication.webhook.enabled", "authentication_webhook", _bool, False,
           "--authentication-token-webhook", "check bearer tokens with TokenReviews",
           zero_means_default=False, metavar="BOOL", file_default=True),
    _Field("authentication.webhook.cacheTTL", "authentication_webhook_cache_ttl", _duration,
           120.0, "--authentication-token-webhook-cache-ttl",
           "how long TokenReview answers are cached"),
    _Field("authorization.mode", "authorization_mode", _authorization_mode, "AlwaysAllow",
           "--authorization-mode", "AlwaysAllow, or Webhook (SubjectAccessReviews)",
           metavar="MODE", file_default="Webhook"),
    _Field("authorization.webhook.cacheAuthorizedTTL",
           "authorization_webhook_cache_authorized_ttl", _duration, 300.0,
           "--authorization-webhook-cache-authorized-ttl",
           "how long an allowing SubjectAccessReview is cached"),
    _Field("authorization.webhook.cacheUnauthorizedTTL",
           "authorization_webhook_cache_unauthorized_ttl", _duration, 30.0,
           "--authorization-webhook-cache-unauthorized-ttl",
           "how long a denying SubjectAccessReview is cached"),
    _Field("shutdownGracePeriod", "shutdown_grace_period", _shutdown_period, 0.0, None, ""),
    _Field("shutdownGracePeriodCriticalPods", "shutdown_grace_period_critical_pods",
           _shutdown_period, 0.0, None, ""),
    _Field("shutdownGracePeriodByPodPriority", "shutdown_grace_period_by_pod_priority",
           _priority_periods, (), None, ""),
    _Field("allowedUnsafeSysctls", "allowed_unsafe_sysctls", _sysctl_patterns, (),
           "--allowed-unsafe-sysctls",
           "unsafe sysctls, or patterns ending in *, pods may set (comma-separated)",
           metavar="SYSCTLS"),
    _Field("seccompDefault", "seccomp_default", _bool, False, "--seccomp-default",
           "run containers that name no seccomp profile with RuntimeDefault instead of "
           "Unconfined", zero_means_default=False, metavar="BOOL"),
    _Field("featureGates", "feature_gates", _feature_gates, (), "--feature-gates",
           "feature gates, NAME=true|false[,...]; repeatable, merged over featureGates",
           metavar="GATES", repeat=True, from_flag=_gate_texts),
    _Field("rotateCertificates", "rotate_certificates", _bool, False, "--rotate-certificates",
           "renew the client certificate from the API server as it nears expiry",
           zero_means_default=False, metavar="BOOL"),
    _Field("serverTLSBootstrap", "server_tls_bootstrap", _bool, False,
           "--rotate-server-certificates",
           "request the serving certificate from the API server and renew it",
           zero_means_default=False, metavar="BOOL"),
    _Field("volumeStatsAggPeriod", "volume_stats_agg_period", _signed_duration, 60.0,
           "--volume-stats-agg-period",
           "how often the pods' volume stats are measured and cached; negative: never"),
    _Field(None, "kubeconfig", _string, "", "--kubeconfig",
           "kubeconfig of the API server to join; empty: standalone (static pods only)"),
    _Field(None, "bootstrap_kubeconfig", _string, "", "--bootstrap-kubeconfig",
           "kubeconfig with bootstrap credentials, to get a client certificate when "
           "--kubeconfig is missing or expired (TLS bootstrap)"),
    _Field(None, "cert_dir", _string, "", "--cert-dir",
           "where the client certificates are kept; empty: <root-dir>/pki"),
    _Field(None, "node_ip", _node_ips, "", "--node-ip",
           "IP address of the node (its InternalIP); empty: the host's"),
    _Field(None, "node_labels", _node_labels, (), "--node-labels",
           "labels the node registers with, key=value[,...]", metavar="LABELS"),
    _Field(None, "minimum_container_ttl_duration", _duration, 0.0,
           "--minimum-container-ttl-duration",
           "minimum age of a finished container before it is garbage collected (deprecated "
           "in the kubelet)"),
    _Field(None, "maximum_dead_containers_per_container", _signed_int32, 1,
           "--maximum-dead-containers-per-container",
           "most old instances kept per container; negative: no limit (deprecated in the "
           "kubelet)", zero_means_default=False),
    _Field(None, "maximum_dead_containers", _signed_int32, -1, "--maximum-dead-containers",
           "most old container instances kept on the node; negative: no limit (deprecated "
           "in the kubelet)", zero_means_default=False),
    _Field(None, "image_credential_provider_config", _string, "",
           "--image-credential-provider-config",
           "CredentialProviderConfig (kubelet.config.k8s.io/v1) file, or directory of "
           "*.json, *.yaml and *.yml files; empty: no credential provider plugins",
           metavar="PATH"),
    _Field(None, "image_credential_provider_bin_dir", _string, "",
           "--image-credential-provider-bin-dir",
           "directory of the credential provider plugins' executables", metavar="DIR"),
    _Field(None, "root_dir", _string, "/var/lib/kubelet", "--root-dir",
           "directory for pod volumes and plugin state"),
    _Field(None, "run_dir", _string, "/run/pkletd", "--run-dir",
           "directory for pkletd's sockets and runtime state"),
    _Field(None, "log_dir", _string, "/var/log/pkletd", "--log-dir",
           "directory for pkletd's own logs"),
    _Field(None, "logind_conf_dir", _absolute_path, "/etc/systemd/logind.conf.d",
           "--logind-conf-dir",
           "where the logind drop-in raising InhibitDelayMaxSec to the shutdown grace "
           "period is written"),
    _Field(None, "node_name", _node_name, socket.gethostname().lower(), "--hostname-override",
           "node name to use instead of the host name"),
    _Field(None, "pleg_relist_period", _duration, 1.0, "--pleg-relist-period",
           "how often to relist containers from the runtime without its events"),
    _Field(None, "pleg_runtime_events", _bool, True, "--pleg-runtime-events",
           "follow the runtime's event stream, relisting every 5m while it flows; "
           "false: relist every --pleg-relist-period", zero_means_default=False,
           metavar="BOOL"),
    _Field(None, "worker_heartbeat_timeout", _duration, 10.0, "--worker-heartbeat-timeout",
           "how long a worker may stay silent before it is restarted"),
    _Field(None, "pod_sync_parallelism", _int32, 10, "--pod-sync-parallelism",
           "how many pods are synced at once"),
    _Field(None, "image_gc_period", _duration, 300.0, "--image-gc-period",
           "how often image GC runs (a constant in the kubelet; for tests)"),
    _Field(None, "container_gc_period", _duration, 60.0, "--container-gc-period",
           "how often container GC runs (a constant in the kubelet; for tests)"),
    _Field(None, "eviction_monitoring_period", _duration, 10.0, "--eviction-monitoring-period",
           "how often the eviction signals are measured (the kubelet's is fixed at 10s)"),
)  # fmt: skip

_BY_YAML = {field.yaml: field for field in _FIELDS if field.yaml is not None}
# Fields the file nests in mappings ("authentication": {"webhook": {"enabled": true}}),
# by their top-level name. Every nested v1beta1 field of these is implemented.
_NESTED = frozenset(name.split(".")[0] for name in _BY_YAML if "." in name)

# Every field of k8s.io/kubelet/config/v1beta1 KubeletConfiguration, implemented or not.
_V1BETA1_FIELDS = frozenset(
    """
    enableServer staticPodPath podLogsDir syncFrequency fileCheckFrequency
    httpCheckFrequency staticPodURL staticPodURLHeader address port readOnlyPort
    tlsCertFile tlsPrivateKeyFile tlsCipherSuites tlsCurvePreferences tlsMinVersion
    rotateCertificates serverTLSBootstrap authentication authorization
    registryPullQPS registryBurst imagePullCredentialsVerificationPolicy
    preloadedImagesVerificationAllowlist eventRecordQPS eventBurst
    enableDebuggingHandlers enableContentionProfiling healthzPort healthzBindAddress
    oomScoreAdj clusterDomain clusterDNS streamingConnectionIdleTimeout
    nodeStatusUpdateFrequency nodeStatusReportFrequency nodeLeaseDurationSeconds
    imageMinimumGCAge imageMaximumGCAge imageGCHighThresholdPercent
    imageGCLowThresholdPercent volumeStatsAggPeriod kubeletCgroups systemCgroups
    cgroupRoot cgroupsPerQOS cgroupDriver cpuManagerPolicy singleProcessOOMKill
    cpuManagerPolicyOptions cpuManagerReconcilePeriod draManagerReconcilePeriod
    memoryManagerPolicy topologyManagerPolicy topologyManagerScope
    topologyManagerPolicyOptions qosReserved runtimeRequestTimeout hairpinMode
    maxPods podCIDR podPidsLimit resolvConf runOnce cpuCFSQuota cpuCFSQuotaPeriod
    nodeStatusMaxImages maxOpenFiles contentType kubeAPIQPS kubeAPIBurst
    serializeImagePulls maxParallelImagePulls evictionHard evictionSoft
    evictionSoftGracePeriod evictionPressureTransitionPeriod evictionMaxPodGracePeriod
    evictionMinimumReclaim mergeDefaultEvictionSettings podsPerCore
    enableControllerAttachDetach protectKernelDefaults makeIPTablesUtilChains
    iptablesMasqueradeBit iptablesDropBit featureGates failSwapOn memorySwap
    containerLogMaxSize containerLogMaxFiles containerLogMaxWorkers
    containerLogMonitorInterval configMapAndSecretChangeDetectionStrategy
    systemReserved kubeReserved reservedSystemCPUs showHiddenMetricsForVersion
    systemReservedCgroup kubeReservedCgroup enforceNodeAllocatable
    allowedUnsafeSysctls volumePluginDir providerID kernelMemcgNotification logging
    enableSystemLogHandler enableSystemLogQuery shutdownGracePeriod
    shutdownGracePeriodCriticalPods shutdownGracePeriodByPodPriority crashLoopBackOff
    reservedMemory enableProfilingHandler enableDebugFlagsHandler seccompDefault
    memoryThrottlingFactor memoryReservationPolicy registerWithTaints registerNode
    tracing localStorageCapacityIsolation containerRuntimeEndpoint
    imageServiceEndpoint failCgroupV1 userNamespaces
""".split()
)
_HEADER = {"apiVersion": API_VERSION, "kind": KIND}


# --- flags ----------------------------------------------------------------------------


def _show_default(value: object) -> str:
    return f"{value:g}s" if isinstance(value, float) else _show(value)


def _metavar(field: _Field) -> str:
    kinds: dict[type, str] = {float: "DURATION", int: "INT"}
    return field.metavar or kinds.get(type(field.default), "STRING")


def _flag_help(field: _Field) -> str:
    overrides = f"; overrides {field.yaml} from --config" if field.yaml else ""
    text = f"{field.help} (default {_show_default(field.default)}{overrides})"
    return text.replace("%", "%%")  # argparse formats help with %


def _shape(field: _Field) -> dict[str, Any]:
    """How argparse takes the flag: a bool alone means true (``--x``, ``--x=false``, and
    ``--x false`` too); a repeatable flag collects its texts."""
    if field.parse is _bool:
        return {"nargs": "?", "const": "true"}
    return {"action": "append"} if field.repeat else {}


def _kubelet_shape(flag: kubeletflags.KubeletFlag) -> dict[str, Any]:
    if flag.kind is kubeletflags.Kind.BOOL:
        return {"nargs": "?", "const": "true", "metavar": "BOOL"}
    return {"action": "append"} if flag.kind is kubeletflags.Kind.REPEATED else {}


def add_flags(parser: argparse.ArgumentParser) -> None:
    """Add --config, --config-dir and the kubelet/pkletd flags, and the kubelet's flags
    pkletd does not implement; all default to None (meaning "not given")."""
    parser.add_argument(
        "--config", default=None, metavar="FILE", help=f"{KIND} ({API_VERSION}) YAML file"
    )
    parser.add_argument(
        "--config-dir", default=None, metavar="DIR",
        help=f"drop-in directory: its *{dropins.SUFFIX} files, merged in lexical order over "
        "--config",
    )  # fmt: skip
    for field in _FIELDS:
        if field.flag is not None:
            parser.add_argument(
                field.flag, dest=field.attr, default=None, metavar=_metavar(field),
                help=_flag_help(field), **_shape(field),
            )  # fmt: skip
    for flag in kubeletflags.ALL:
        names = ["-v", "--v"] if flag.name == "v" else [f"--{flag.name}"]
        what = "deprecated" if flag.deprecated else "not implemented by pkletd"
        parser.add_argument(
            *names, dest=flag.dest, default=None, help=f"a kubelet flag, {what}; ignored",
            **_kubelet_shape(flag),
        )  # fmt: skip


_FLAG_BOOLS = {"1": True, "t": True, "true": True, "0": False, "f": False, "false": False}


def _flag_bool(flag: str, text: str) -> bool:
    """A bool flag's text as Go's strconv.ParseBool reads it (the kubelet's flags)."""
    value = _FLAG_BOOLS.get(text.lower())
    if value is None:
        raise ConfigError(
            f'invalid argument "{text}" for "{flag}" flag: strconv.ParseBool: parsing '
            f'"{text}": invalid syntax'
        )
    return value


def _flag_raw(field: _Field, text: Any) -> object:
    """Flags arrive as text; an integer field takes the integer the text spells, if any.
    A repeatable flag's texts become the file field's mapping."""
    if field.from_flag is not None:
        try:
            return field.from_flag(text)
        except ValueError as exc:
            raise ConfigError(f"{field.flag}: {exc}") from None
    if field.parse is _bool:
        return _flag_bool(str(field.flag), text)
    if field.repeat:
        try:
            return _colon_multimap(text)
        except ValueError as exc:
            raise ConfigError(f"{field.flag}: {exc}") from None
    if isinstance(field.default, int) and re.fullmatch(r"[+-]?[0-9]+", text):
        return int(text)
    if field.parse in (_cipher_suites, _ip_list):
        return [name.strip() for name in text.split(",") if name.strip()]
    return text


def _flag_values(args: argparse.Namespace, with_file: bool) -> dict[str, Any]:
    values: dict[str, Any] = {}
    for field in _FIELDS:
        text = getattr(args, field.attr, None)
        if field.flag is not None and text is not None:
            raw = _flag_raw(field, text)
            values[field.attr] = _resolve(field, raw, field.flag, with_file)
    return values


# --- the file -----------------------------------------------------------------------------


def _resolve(field: _Field, raw: object, where: str, with_file: bool) -> Any:
    try:
        value = field.parse(raw)
    except ValueError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    return field.default_for(with_file) if field.zero_means_default and not value else value


def _yaml_message(exc: yaml.YAMLError) -> str:
    if isinstance(exc, yaml.MarkedYAMLError) and exc.problem_mark is not None:
        mark = exc.problem_mark
        what = ", ".join(part for part in (exc.context, exc.problem) if part)
        return f"{what} (line {mark.line + 1}, column {mark.column + 1})"
    return str(exc)


def _read_mapping(path: str) -> dict[Any, Any]:
    try:
        data = Path(path).read_bytes()
    except FileNotFoundError:
        raise ConfigError(f"{path}: no such file") from None
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read: {exc.strerror}") from None
    try:
        doc = yaml.safe_load(data)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML: {_yaml_message(exc)}") from None
    if not isinstance(doc, dict):
        raise ConfigError(f"{path}: top level must be a mapping of fields, got {_show(doc)}")
    return doc


def _check_header(path: str, doc: dict[Any, Any]) -> None:
    for key, want in _HEADER.items():
        got = doc.get(key)
        if got != want:
            found = "" if got is None else f", got {_show(got)}"
            raise ConfigError(f"{path}: {key} must be {want}{found}")


def _unknown_field(path: str, name: str) -> ConfigError:
    known = _V1BETA1_FIELDS if "." not in name else frozenset(_BY_YAML)
    close = difflib.get_close_matches(name, known, n=1)
    hint = f'; did you mean "{close[0]}"?' if close else ""
    return ConfigError(f'{path}: unknown field "{name}"{hint}')


def _flatten(path: str, name: str, raw: object) -> dict[str, object]:
    """A nested group ("authentication") as dotted names ("authentication.webhook.enabled")."""
    if raw is None:
        return {}
    if not isinstance(raw, dict):
        raise ConfigError(f'{path}: field "{name}": must be a mapping, got {_show(raw)}')
    found: dict[str, object] = {}
    for key, value in raw.items():
        dotted = f"{name}.{key}"
        if dotted in _BY_YAML:
            found[dotted] = value
        elif any(known.startswith(dotted + ".") for known in _BY_YAML):
            found.update(_flatten(path, dotted, value))
        else:
            raise _unknown_field(path, dotted)
    return found


def _read_doc(path: str) -> dict[Any, Any]:
    doc = _read_mapping(path)
    _check_header(path, doc)
    return doc


def _file_values(path: str, doc: dict[Any, Any]) -> tuple[dict[str, Any], tuple[str, ...]]:
    """The fields of one document (a file, or the merge of several) and the warnings for
    the real fields pkletd ignores; errors name ``path`` and the field."""
    values: dict[str, Any] = {}
    warnings: list[str] = []
    fields: dict[str, object] = {}
    for key, raw in doc.items():
        name = str(key)
        fields.update(_flatten(path, name, raw) if name in _NESTED else {name: raw})
    for name, raw in fields.items():
        field = _BY_YAML.get(name)
        if field is not None:
            if raw is not None:
                values[field.attr] = _resolve(field, raw, f'{path}: field "{name}"', True)
        elif name in _V1BETA1_FIELDS:
            warnings.append(f'{path}: field "{name}" is not implemented by pkletd yet; ignored')
        elif name not in _HEADER:
            raise _unknown_field(path, name)
    return values, tuple(warnings)


def _documents(args: argparse.Namespace) -> list[tuple[str, dict[Any, Any]]]:
    """--config, then each --config-dir drop-in, by path, read and header-checked."""
    found = []
    path = getattr(args, "config", None)
    if path is not None:
        found.append((path, _read_doc(path)))
    directory = getattr(args, "config_dir", None)
    if directory is not None:
        try:
            found += [(name, _read_doc(name)) for name in dropins.files(directory)]
        except dropins.DropInError as exc:
            raise ConfigError(str(exc)) from None
    return found


def _read_files(args: argparse.Namespace) -> tuple[dict[str, Any], list[str]]:
    """The file fields: each file checked alone (errors name it), then their merge."""
    documents = _documents(args)
    warnings: list[str] = []
    for path, doc in documents:
        warnings += _file_values(path, doc)[1]
    if len(documents) < 2:
        return (_file_values(*documents[0])[0] if documents else {}), warnings
    merged: dict[Any, Any] = {}
    for _, doc in documents:
        merged = dropins.merge(merged, doc)
    where = f"{documents[0][0]} with its --config-dir drop-ins"
    return _file_values(where, merged)[0], warnings


def _kubelet_flag_warnings(args: argparse.Namespace) -> list[str]:
    """One line per kubelet flag given that pkletd accepts without acting on it."""
    found = []
    for flag in kubeletflags.ALL:
        text = getattr(args, flag.dest, None)
        if text is not None:
            if flag.kind is kubeletflags.Kind.BOOL:
                _flag_bool(f"--{flag.name}", text)
            found.append(kubeletflags.warning(flag))
    return found


def load(args: argparse.Namespace) -> LoadResult:
    """Defaults, then the --config file, then the --config-dir drop-ins, then the flags
    given explicitly (feature gates merge with the files' gate by gate)."""
    with_file = getattr(args, "config", None) is not None or bool(getattr(args, "config_dir", None))
    values: dict[str, Any] = {field.attr: field.default_for(with_file) for field in _FIELDS}
    file_values, warnings = _read_files(args)
    values.update(file_values)
    flag_values = _flag_values(args, with_file)
    gates = dict(values["feature_gates"]) | dict(flag_values.pop("feature_gates", ()))
    values.update(flag_values, feature_gates=tuple(sorted(gates.items())))
    values["cert_dir"] = values["cert_dir"] or os.path.join(values["root_dir"], "pki")
    warnings += _kubelet_flag_warnings(args) + _apply_gates(values, args)
    _check_shutdown(values)
    _check_tls(values)
    _check_image_gc(values)
    _settle_eviction(values)
    return LoadResult(KubeletConfig(**values), tuple(warnings))


def _apply_gates(values: dict[str, Any], args: argparse.Namespace) -> list[str]:
    """The gates that switch pkletd's features, with the kubelet's checks of the fields
    they guard; one warning naming the gates that change nothing here."""
    gates = dict(values["feature_gates"])
    evented = gates.get("EventedPLEG")
    if evented is not None and getattr(args, "pleg_runtime_events", None) is None:
        values["pleg_runtime_events"] = evented
    guarded = (
        ("GracefulNodeShutdown", ("shutdown_grace_period", "shutdown_grace_period_critical_pods"),
         "specifying shutdownGracePeriod or shutdownGracePeriodCriticalPods requires feature "
         "gate GracefulNodeShutdown"),
        ("GracefulNodeShutdownBasedOnPodPriority", ("shutdown_grace_period_by_pod_priority",),
         "specifying shutdownGracePeriodByPodPriority requires feature gate "
         "GracefulNodeShutdownBasedOnPodPriority"),
        ("ImageMaximumGCAge", ("image_maximum_gc_age",),
         "ImageMaximumGCAge feature gate is required for Kubelet configuration option "
         "imageMaximumGCAge"),
    )  # fmt: skip
    for gate, attrs, message in guarded:
        if gates.get(gate) is False and any(values[attr] for attr in attrs):
            raise ConfigError(f"featureGates: {message}")
    inert = [f"{n}={str(v).lower()}" for n, v in gates.items() if n not in featuregates.SWITCHES]
    return [f"feature gates with no effect in pkletd: {', '.join(inert)}"] if inert else []


def _settle_eviction(values: dict[str, Any]) -> None:
    """Every soft threshold needs its grace period (the kubelet will not start without);
    with mergeDefaultEvictionSettings the signals evictionHard leaves out keep their
    defaults, without it an evictionHard given replaces them whole."""
    periods = dict(values["eviction_soft_grace_period"])
    for signal, _ in values["eviction_soft"]:
        if signal not in periods:
            raise ConfigError(
                "evictionSoftGracePeriod: grace period must be specified for the soft "
                f"eviction threshold {signal}"
            )
    if values["merge_default_eviction_settings"]:
        given = {signal for signal, _ in values["eviction_hard"]}
        missing = tuple(pair for pair in DEFAULT_EVICTION_HARD if pair[0] not in given)
        values["eviction_hard"] = values["eviction_hard"] + missing


def _check_tls(values: dict[str, Any]) -> None:
    """The kubelet's cross-field TLS checks."""
    if values["tls_min_version"] == "VersionTLS13" and values["tls_cipher_suites"]:
        raise ConfigError(
            "tlsCipherSuites: minimum TLS version is 1.3, so cipher suites cannot be configured"
        )
    if bool(values["tls_cert_file"]) != bool(values["tls_private_key_file"]):
        raise ConfigError("tlsCertFile and tlsPrivateKeyFile must be given together")


def _check_shutdown(values: dict[str, Any]) -> None:
    """The kubelet's cross-field checks of graceful node shutdown (its feature gates on)."""
    period = values["shutdown_grace_period"]
    critical = values["shutdown_grace_period_critical_pods"]
    if critical > period:
        raise ConfigError(
            f"shutdownGracePeriodCriticalPods {go_duration(critical)} must be <= "
            f"shutdownGracePeriod {go_duration(period)}"
        )
    if values["shutdown_grace_period_by_pod_priority"] and (period or critical):
        raise ConfigError(
            "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod "
            "at the same time"
        )


def _check_image_gc(values: dict[str, Any]) -> None:
    """The kubelet's cross-field image GC checks, in its words."""
    low = values["image_gc_low_threshold_percent"]
    high = values["image_gc_high_threshold_percent"]
    if low >= high:
        raise ConfigError(
            f"imageGCLowThresholdPercent (--image-gc-low-threshold) {low} must be less than "
            f"imageGCHighThresholdPercent (--image-gc-high-threshold) {high}"
        )
    max_age, min_age = values["image_maximum_gc_age"], values["image_minimum_gc_age"]
    if max_age and max_age <= min_age:
        raise ConfigError(
            f"imageMaximumGCAge {go_duration(max_age)} must be greater than imageMinimumGCAge "
            f"{go_duration(min_age)}"
        )


# --- the effective configuration, as /configz shows it -------------------------------------


def go_duration(seconds: float) -> str:
    """Seconds as Go's ``time.Duration.String()``: "1m0s", "20s", "500ms", "1h0m0s"."""
    nanos = round(seconds * 1e9)
    if nanos == 0:
        return "0s"
    sign, nanos = ("-", -nanos) if nanos < 0 else ("", nanos)
    if nanos < 1_000_000_000:
        for unit, size in (("ms", 1_000_000), ("µs", 1_000), ("ns", 1)):
            if nanos >= size:
                return f"{sign}{_trimmed(nanos / size)}{unit}"
    hours, rest = divmod(nanos, 3_600_000_000_000)
    minutes, rest = divmod(rest, 60_000_000_000)
    text = f"{_trimmed(rest / 1e9)}s"
    if hours or minutes:
        text = f"{minutes}m{text}"
    if hours:
        text = f"{hours}h{text}"
    return sign + text


def _trimmed(number: float) -> str:
    return f"{number:.9f}".rstrip("0").rstrip(".")


def _byte_quantity(size: int) -> str:
    for suffix, unit in (("Gi", 2**30), ("Mi", 2**20), ("Ki", 2**10)):
        if size and size % unit == 0:
            return f"{size // unit}{suffix}"
    return str(size)


def _v1beta1_value(field: _Field, value: Any) -> Any:
    if isinstance(value, float) and field.parse in (_duration, _signed_duration, _monitor_interval):
        return go_duration(value)
    if field.attr == "container_log_max_size":
        return _byte_quantity(value)
    if field.attr == "static_pod_url_header":
        headers: dict[str, list[str]] = {}
        for name, text in value:
            headers.setdefault(name, []).append(text)
        return headers
    if field.attr == "shutdown_grace_period_by_pod_priority":
        return [{"priority": p, "shutdownGracePeriodSeconds": s} for p, s in value]
    if field.attr == "register_with_taints":
        return [taint.as_api() for taint in value]
    if field.parse in (_quantity_map, _eviction_map, _minimum_reclaims, _feature_gates):
        return dict(value)
    if field.parse is _grace_periods:
        return {signal: go_duration(seconds) for signal, seconds in value}
    return list(value) if isinstance(value, tuple) else value


def v1beta1(config: KubeletConfig) -> dict[str, Any]:
    """The file fields of ``config`` under their v1beta1 names, nested as the file nests
    them, with Go's duration strings: the kubelet's ``/configz`` ``kubeletconfig``."""
    doc: dict[str, Any] = {}
    for field in _FIELDS:
        if field.yaml is None:
            continue
        *groups, leaf = field.yaml.split(".")
        where = doc
        for group in groups:
            where = where.setdefault(group, {})
        where[leaf] = _v1beta1_value(field, getattr(config, field.attr))
    return doc
