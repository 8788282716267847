"""Tests for pkletd.supervisor.config: defaults < file < flags, and the error messages."""

from __future__ import annotations

import argparse
import dataclasses
import re
import socket
from pathlib import Path

import pytest
from pkletd.supervisor import config
from pkletd.supervisor.config import ConfigError, KubeletConfig, LoadResult, parse_duration

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
# The kubelet's file defaulting, where it differs from its flags' legacy defaults.
WITH_A_FILE = {
    "authentication_anonymous": False,
    "authentication_webhook": True,
    "authorization_mode": "Webhook",
}


def parse(*argv: str) -> argparse.Namespace:
    parser = argparse.ArgumentParser()
    config.add_flags(parser)
    return parser.parse_args(argv)


def load(*argv: str) -> LoadResult:
    return config.load(parse(*argv))


def write(tmp_path: Path, body: str, header: str = HEADER) -> str:
    path = tmp_path / "kubelet-config.yaml"
    path.write_text(header + body)
    return str(path)


def load_error(*argv: str) -> str:
    with pytest.raises(ConfigError) as info:
        load(*argv)
    return str(info.value)


def file_error(tmp_path: Path, body: str, header: str = HEADER) -> tuple[str, str]:
    path = write(tmp_path, body, header)
    return path, load_error("--config", path)


# --- defaults, file, flags ---------------------------------------------------------------


def test_defaults_without_a_file() -> None:
    result = load()
    assert result.warnings == ()
    assert result.config == KubeletConfig(
        static_pod_path="",
        file_check_frequency=20.0,
        sync_frequency=60.0,
        container_runtime_endpoint="unix:///run/containerd/containerd.sock",
        runtime_request_timeout=120.0,
        streaming_connection_idle_timeout=4 * 3600.0,
        pod_logs_dir="/var/log/pods",
        read_only_port=0,
        healthz_port=10248,
        healthz_bind_address="127.0.0.1",
        address="0.0.0.0",
        port=10250,
        max_pods=110,
        pod_pids_limit=-1,
        static_pod_url="",
        static_pod_url_header=(),
        http_check_frequency=20.0,
        container_log_max_size=10 * 1024 * 1024,
        container_log_max_files=5,
        container_log_max_workers=1,
        container_log_monitor_interval=10.0,
        image_minimum_gc_age=120.0,
        image_maximum_gc_age=0.0,
        image_gc_high_threshold_percent=85,
        image_gc_low_threshold_percent=80,
        register_node=True,
        register_with_taints=(),
        node_status_update_frequency=10.0,
        node_status_report_frequency=300.0,
        node_lease_duration_seconds=40,
        node_status_max_images=50,
        kube_api_qps=50,
        kube_api_burst=100,
        event_record_qps=50,
        event_burst=100,
        config_map_and_secret_change_detection_strategy="Watch",
        cluster_dns=(),
        cluster_domain="",
        resolv_conf="/etc/resolv.conf",
        system_reserved=(),
        kube_reserved=(),
        eviction_hard=(
            ("memory.available", "100Mi"),
            ("nodefs.available", "10%"),
            ("nodefs.inodesFree", "5%"),
            ("imagefs.available", "15%"),
        ),
        eviction_soft=(),
        eviction_soft_grace_period=(),
        eviction_minimum_reclaim=(),
        eviction_pressure_transition_period=300.0,
        eviction_max_pod_grace_period=0,
        merge_default_eviction_settings=False,
        local_storage_capacity_isolation=True,
        tls_cert_file="",
        tls_private_key_file="",
        tls_min_version="",
        tls_cipher_suites=(),
        authentication_anonymous=True,
        authentication_client_ca_file="",
        authentication_webhook=False,
        authentication_webhook_cache_ttl=120.0,
        authorization_mode="AlwaysAllow",
        authorization_webhook_cache_authorized_ttl=300.0,
        authorization_webhook_cache_unauthorized_ttl=30.0,
        shutdown_grace_period=0.0,
        shutdown_grace_period_critical_pods=0.0,
        shutdown_grace_period_by_pod_priority=(),
        allowed_unsafe_sysctls=(),
        seccomp_default=False,
        kubeconfig="",
        bootstrap_kubeconfig="",
        cert_dir="/var/lib/kubelet/pki",
        feature_gates=(),
        rotate_certificates=False,
        server_tls_bootstrap=False,
        volume_stats_agg_period=60.0,
        image_credential_provider_config="",
        image_credential_provider_bin_dir="",
        node_ip="",
        node_labels=(),
        minimum_container_ttl_duration=0.0,
        maximum_dead_containers_per_container=1,
        maximum_dead_containers=-1,
        root_dir="/var/lib/kubelet",
        run_dir="/run/pkletd",
        log_dir="/var/log/pkletd",
        logind_conf_dir="/etc/systemd/logind.conf.d",
        node_name=socket.gethostname().lower(),
        pleg_relist_period=1.0,
        pleg_runtime_events=True,
        worker_heartbeat_timeout=10.0,
        pod_sync_parallelism=10,
        image_gc_period=300.0,
        container_gc_period=60.0,
        eviction_monitoring_period=10.0,
    )


def test_load_accepts_a_namespace_without_any_flags() -> None:
    assert config.load(argparse.Namespace()) == load()


def test_config_is_frozen_and_slotted() -> None:
    cfg = load().config
    assert not hasattr(cfg, "__dict__")
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.__setattr__("port", 1)


def test_file_values(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
staticPodPath: /etc/kubernetes/manifests
fileCheckFrequency: 5s
syncFrequency: 1m30s
containerRuntimeEndpoint: unix:///run/crio/crio.sock
runtimeRequestTimeout: 500ms
podLogsDir: /srv/pod-logs
readOnlyPort: 10255
healthzPort: 0
healthzBindAddress: "::1"
address: 10.0.0.5
port: 11250
maxPods: 30
podPidsLimit: 4096
""",
    )
    result = load("--config", path)
    assert result.warnings == ()
    cfg = result.config
    assert cfg.static_pod_path == "/etc/kubernetes/manifests"
    assert cfg.file_check_frequency == 5.0
    assert cfg.sync_frequency == 90.0
    assert cfg.container_runtime_endpoint == "unix:///run/crio/crio.sock"
    assert cfg.runtime_request_timeout == 0.5
    assert cfg.pod_logs_dir == "/srv/pod-logs"
    assert cfg.read_only_port == 10255
    assert cfg.healthz_port == 0
    assert cfg.healthz_bind_address == "::1"
    assert cfg.address == "10.0.0.5"
    assert cfg.port == 11250
    assert cfg.max_pods == 30
    assert cfg.pod_pids_limit == 4096
    assert cfg.root_dir == "/var/lib/kubelet"


def test_absent_fields_keep_defaults(tmp_path: Path) -> None:
    path = write(tmp_path, "maxPods: 12\n")
    cfg = load("--config", path).config
    assert cfg == dataclasses.replace(load().config, max_pods=12, **WITH_A_FILE)


def test_null_and_zero_values_mean_default_like_the_kubelet(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        'syncFrequency: "0s"\nport: 0\nmaxPods: 0\naddress: ""\npodLogsDir:\nreadOnlyPort: 0\n',
    )
    assert load("--config", path).config == dataclasses.replace(load().config, **WITH_A_FILE)


def test_zero_is_kept_where_it_means_something(tmp_path: Path) -> None:
    path = write(tmp_path, "healthzPort: 0\npodPidsLimit: 0\n")
    cfg = load("--config", path).config
    assert (cfg.healthz_port, cfg.pod_pids_limit) == (0, 0)


def test_negative_pod_pids_limit_becomes_minus_one(tmp_path: Path) -> None:
    path = write(tmp_path, "podPidsLimit: -7\n")
    assert load("--config", path).config.pod_pids_limit == -1


def test_flags_override_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "staticPodPath: /from/file\nsyncFrequency: 2m\nmaxPods: 30\nport: 11250\n",
    )
    cfg = load(
        "--config",
        path,
        "--pod-manifest-path",
        "/from/flag",
        "--sync-frequency=10s",
        "--max-pods",
        "7",
    ).config
    assert cfg.static_pod_path == "/from/flag"
    assert cfg.sync_frequency == 10.0
    assert cfg.max_pods == 7
    assert cfg.port == 11250  # not given as a flag: the file value stays


def test_every_kubelet_flag(tmp_path: Path) -> None:
    cfg = load(
        "--pod-manifest-path=/m",
        "--file-check-frequency=1s",
        "--sync-frequency=2s",
        "--container-runtime-endpoint=unix:///x.sock",
        "--runtime-request-timeout=3s",
        "--read-only-port=10255",
        "--healthz-port=0",
        "--healthz-bind-address=0.0.0.0",
        "--address=127.0.0.2",
        "--port=12000",
        "--max-pods=5",
    ).config
    assert (cfg.static_pod_path, cfg.container_runtime_endpoint) == ("/m", "unix:///x.sock")
    assert (cfg.file_check_frequency, cfg.sync_frequency, cfg.runtime_request_timeout) == (
        1.0,
        2.0,
        3.0,
    )
    assert (cfg.read_only_port, cfg.healthz_port, cfg.port, cfg.max_pods) == (10255, 0, 12000, 5)
    assert (cfg.healthz_bind_address, cfg.address) == ("0.0.0.0", "127.0.0.2")


def test_pkletd_flags() -> None:
    cfg = load(
        "--root-dir=/r",
        "--run-dir=/run/x",
        "--log-dir=/l",
        "--hostname-override=  Node-A ",
        "--pleg-relist-period=250ms",
        "--worker-heartbeat-timeout=30s",
        "--pod-sync-parallelism=3",
    ).config
    assert (cfg.root_dir, cfg.run_dir, cfg.log_dir) == ("/r", "/run/x", "/l")
    assert cfg.node_name == "node-a"  # trimmed and lowercased, as the kubelet does
    assert (cfg.pleg_relist_period, cfg.worker_heartbeat_timeout) == (0.25, 30.0)
    assert cfg.pod_sync_parallelism == 3


def test_flags_default_to_none_so_absence_is_visible() -> None:
    args = parse()
    assert args.config is None
    assert all(getattr(args, f.attr) is None for f in config._FIELDS if f.flag is not None)


def test_help_mentions_defaults_and_file_field(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("COLUMNS", "300")
    parser = argparse.ArgumentParser()
    config.add_flags(parser)
    text = parser.format_help()
    assert "(default 20s; overrides fileCheckFrequency from --config)" in text
    assert "--hostname-override STRING" in text
    assert "--pleg-relist-period DURATION" in text
    assert "--max-pods INT" in text


# --- warnings for real-but-unimplemented fields --------------------------------------------


def test_unimplemented_kubelet_fields_warn(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
maxPods: 50
cgroupDriver: systemd
tracing:
  endpoint: localhost:4317
podsPerCore: 10
""",
    )
    result = load("--config", path)
    assert result.config.max_pods == 50
    assert result.warnings == tuple(
        f'{path}: field "{name}" is not implemented by pkletd yet; ignored'
        for name in (
            "cgroupDriver",
            "tracing",
            "podsPerCore",
        )
    )


def test_field_table_matches_dataclass_and_v1beta1_list() -> None:
    attrs = [f.attr for f in config._FIELDS]
    assert attrs == [f.name for f in dataclasses.fields(KubeletConfig)]
    names = {f.yaml.split(".")[0] for f in config._FIELDS if f.yaml is not None}
    assert names <= config._V1BETA1_FIELDS
    assert {"featureGates", "serializeImagePulls", "kubeAPIQPS", "containerLogMaxSize"} <= (
        config._V1BETA1_FIELDS
    )


# --- file errors name the file and the field ------------------------------------------------


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "fileCheckFrequency: 20x\n",
            'field "fileCheckFrequency": invalid duration "20x" (want e.g. "20s", "1m30s")',
        ),
        ("syncFrequency: -5s\n", 'field "syncFrequency": negative duration "-5s" is not allowed'),
        (
            "syncFrequency: 20\n",
            'field "syncFrequency": must be a duration string such as "20s", got 20',
        ),
        (
            "readOnlyPort: abc\n",
            'field "readOnlyPort": must be an integer in 0..65535, got "abc"',
        ),
        (
            "readOnlyPort: 70000\n",
            'field "readOnlyPort": must be an integer in 0..65535, got 70000',
        ),
        ("healthzPort: true\n", 'field "healthzPort": must be an integer in 0..65535, got true'),
        ("port: 8080.0\n", 'field "port": must be an integer in 0..65535, got 8080.0'),
        ("maxPods: -1\n", 'field "maxPods": must be an integer in 0..2147483647, got -1'),
        ("staticPodPath: 123\n", 'field "staticPodPath": must be a string, got 123'),
        ("staticPodPath: [a]\n", 'field "staticPodPath": must be a string, got ["a"]'),
        ("address: localhost\n", 'field "address": must be an IP address, got "localhost"'),
        ("podLogsDir: logs\n", 'field "podLogsDir": must be an absolute path, got "logs"'),
    ],
)
def test_bad_field_values(tmp_path: Path, body: str, message: str) -> None:
    path, error = file_error(tmp_path, body)
    assert error == f"{path}: {message}"


def test_unknown_field_with_suggestion(tmp_path: Path) -> None:
    path, error = file_error(tmp_path, "staticPodPat: /etc/kubernetes/manifests\n")
    assert error == f'{path}: unknown field "staticPodPat"; did you mean "staticPodPath"?'


def test_unknown_field_suggests_unimplemented_names_too(tmp_path: Path) -> None:
    path, error = file_error(tmp_path, "cgroupdriver: systemd\n")
    assert error == f'{path}: unknown field "cgroupdriver"; did you mean "cgroupDriver"?'


def test_unknown_field_without_suggestion(tmp_path: Path) -> None:
    path, error = file_error(tmp_path, "frobnicate: yes\n")
    assert error == f'{path}: unknown field "frobnicate"'


def test_missing_file(tmp_path: Path) -> None:
    path = str(tmp_path / "nope.yaml")
    assert load_error("--config", path) == f"{path}: no such file"


def test_unreadable_path(tmp_path: Path) -> None:
    assert load_error("--config", str(tmp_path)).startswith(f"{tmp_path}: cannot read: ")


def test_invalid_yaml(tmp_path: Path) -> None:
    path, error = file_error(tmp_path, "maxPods: 1\n  port: 2\n")
    assert (
        error == f"{path}: not valid YAML: mapping values are not allowed here (line 4, column 7)"
    )


def test_several_documents_are_invalid_yaml(tmp_path: Path) -> None:
    path, error = file_error(tmp_path, "---\nmaxPods: 1\n")
    assert error.startswith(f"{path}: not valid YAML: expected a single document in the stream")


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("kind: KubeletConfiguration\n", "apiVersion must be kubelet.config.k8s.io/v1beta1"),
        (
            "apiVersion: kubelet.config.k8s.io/v1alpha1\nkind: KubeletConfiguration\n",
            "apiVersion must be kubelet.config.k8s.io/v1beta1,"
            ' got "kubelet.config.k8s.io/v1alpha1"',
        ),
        ("apiVersion: kubelet.config.k8s.io/v1beta1\n", "kind must be KubeletConfiguration"),
        (
            "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: Pod\n",
            'kind must be KubeletConfiguration, got "Pod"',
        ),
    ],
)
def test_bad_header(tmp_path: Path, header: str, message: str) -> None:
    path, error = file_error(tmp_path, "", header)
    assert error == f"{path}: {message}"


@pytest.mark.parametrize(
    ("text", "shown"), [("", "null"), ("- a\n- b\n", '["a", "b"]'), ("hello\n", '"hello"')]
)
def test_top_level_must_be_a_mapping(tmp_path: Path, text: str, shown: str) -> None:
    path, error = file_error(tmp_path, text, header="")
    assert error == f"{path}: top level must be a mapping of fields, got {shown}"


# --- flag errors name the flag ---------------------------------------------------------------


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ("--sync-frequency=5",),
            '--sync-frequency: invalid duration "5" (want e.g. "20s", "1m30s")',
        ),
        (
            ("--pleg-relist-period=-1s",),
            '--pleg-relist-period: negative duration "-1s" is not allowed',
        ),
        (("--port=http",), '--port: must be an integer in 0..65535, got "http"'),
        (("--read-only-port=1.5",), '--read-only-port: must be an integer in 0..65535, got "1.5"'),
        (("--max-pods=-3",), "--max-pods: must be an integer in 0..2147483647, got -3"),
        (("--address=::zz",), '--address: must be an IP address, got "::zz"'),
    ],
)
def test_bad_flag_values(argv: tuple[str, ...], message: str) -> None:
    assert load_error(*argv) == message


def test_file_errors_are_reported_even_when_a_flag_overrides_the_field(tmp_path: Path) -> None:
    path = write(tmp_path, "maxPods: x\n")
    assert load_error("--config", path, "--max-pods=3").startswith(f'{path}: field "maxPods"')


# --- durations ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("20s", 20.0),
        ("1m", 60.0),
        ("1m30s", 90.0),
        ("500ms", 0.5),
        ("2h", 7200.0),
        ("1.5h", 5400.0),
        (".5s", 0.5),
        ("1h2m3s", 3723.0),
        ("250us", 250e-6),
        ("250µs", 250e-6),
        ("250μs", 250e-6),
        ("10ns", 10e-9),
        ("0", 0.0),
        ("0s", 0.0),
        ("+5s", 5.0),
    ],
)
def test_parse_duration(text: str, seconds: float) -> None:
    assert parse_duration(text) == pytest.approx(seconds)


@pytest.mark.parametrize(
    "text", ["", "20x", "20", "s", "1.5", ".s", "5 s", " 5s", "1e3s", "1d", "٢s", "5s-1s"]
)
def test_parse_duration_rejects_malformed(text: str) -> None:
    with pytest.raises(ValueError, match="invalid duration"):
        parse_duration(text)


@pytest.mark.parametrize("text", ["-5s", "-1m30s", "-0"])
def test_parse_duration_rejects_negative(text: str) -> None:
    with pytest.raises(ValueError, match="negative duration"):
        parse_duration(text)


# --- the HTTP pod source and container log rotation ------------------------------------------


def test_http_source_and_log_rotation_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
staticPodURL: https://config.example/pods?node=a
staticPodURLHeader:
  Authorization: [Bearer abc]
  X-Multi: [one, two]
httpCheckFrequency: 5s
containerLogMaxSize: 1.5Mi
containerLogMaxFiles: 3
containerLogMaxWorkers: 4
containerLogMonitorInterval: 3s
""",
    )
    result = load("--config", path)
    assert result.warnings == ()  # implemented now: no "not implemented" warning
    cfg = result.config
    assert cfg.static_pod_url == "https://config.example/pods?node=a"
    assert cfg.static_pod_url_header == (
        ("Authorization", "Bearer abc"),
        ("X-Multi", "one"),
        ("X-Multi", "two"),
    )
    assert cfg.http_check_frequency == 5.0
    assert cfg.container_log_max_size == 1536 * 1024
    assert (cfg.container_log_max_files, cfg.container_log_max_workers) == (3, 4)
    assert cfg.container_log_monitor_interval == 3.0


def test_http_source_and_log_rotation_flags(tmp_path: Path) -> None:
    path = write(tmp_path, "staticPodURLHeader: {From-File: [x]}\ncontainerLogMaxFiles: 9\n")
    cfg = load(
        "--config",
        path,
        "--manifest-url=http://127.0.0.1:8080/pods",
        "--manifest-url-header",
        "a:hello,b:again, c : world",
        "--manifest-url-header=b:beautiful",
        "--http-check-frequency=1s",
        "--container-log-max-size=512Ki",
        "--container-log-max-files=2",
    ).config
    assert cfg.static_pod_url == "http://127.0.0.1:8080/pods"
    # The kubelet's ColonSeparatedMultimapStringString: the flags replace the file's map.
    assert cfg.static_pod_url_header == (
        ("a", "hello"),
        ("b", "again"),
        ("b", "beautiful"),
        ("c", "world"),
    )
    assert cfg.http_check_frequency == 1.0
    assert (cfg.container_log_max_size, cfg.container_log_max_files) == (512 * 1024, 2)


def test_log_rotation_fields_have_no_flags_where_the_kubelet_has_none() -> None:
    flags = {f.flag for f in config._FIELDS}
    assert {"--container-log-max-size", "--container-log-max-files"} <= flags
    names = {f.yaml: f.flag for f in config._FIELDS}
    assert names["containerLogMaxWorkers"] is None
    assert names["containerLogMonitorInterval"] is None


@pytest.mark.parametrize(
    ("body", "size"),
    [
        ('containerLogMaxSize: "0"\n', 0),  # not the default: every non-empty log rotates
        ("containerLogMaxSize: -1\n", -1),  # negative: rotation off
        ('containerLogMaxSize: ""\n', 10 * 1024 * 1024),
        ("containerLogMaxSize: 10M\n", 10_000_000),
        ("containerLogMaxSize: 1e3\n", 1000),
        ("containerLogMaxSize: 2048\n", 2048),
    ],
)
def test_container_log_max_size_is_a_quantity(tmp_path: Path, body: str, size: int) -> None:
    assert load("--config", write(tmp_path, body)).config.container_log_max_size == size


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("staticPodURL: ftp://x/pods\n", 'must be an http:// or https:// URL, got "ftp://x/pods"'),
        ("staticPodURL: /pods\n", 'must be an http:// or https:// URL, got "/pods"'),
        (
            "staticPodURLHeader: [a]\n",
            'must be a mapping of header names to lists of values, got ["a"]',
        ),
        (
            "staticPodURLHeader: {a: b}\n",
            'must be a mapping of header names to lists of values, got {"a": "b"}',
        ),
        (
            'staticPodURLHeader: {"bad name": [x]}\n',
            'header name "bad name" is not a valid HTTP header name',
        ),
        ("httpCheckFrequency: 20\n", 'must be a duration string such as "20s", got 20'),
        ("containerLogMaxSize: 10Q\n", 'invalid quantity "10Q"'),
        ('containerLogMaxSize: "1.5"\n', 'must be a whole number of bytes, got "1.5"'),
        ("containerLogMaxSize: 1.5\n", 'must be a quantity such as "10Mi", got 1.5'),
        ("containerLogMaxSize: [1]\n", 'must be a quantity such as "10Mi", got [1]'),
        ("containerLogMaxFiles: 1\n", "must be an integer in 2..2147483647, got 1"),
        ("containerLogMaxFiles: 0\n", "must be an integer in 2..2147483647, got 0"),
        ("containerLogMaxWorkers: 0\n", "must be an integer in 1..2147483647, got 0"),
        ("containerLogMonitorInterval: 1s\n", 'must be at least 3s, got "1s"'),
    ],
)
def test_bad_http_source_and_log_rotation_values(tmp_path: Path, body: str, message: str) -> None:
    path, error = file_error(tmp_path, body)
    field = body.split(":")[0]
    assert error.startswith(f'{path}: field "{field}": ')
    assert message in error


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--manifest-url-header=nocolon",), '--manifest-url-header: malformed pair "nocolon"'),
        (("--manifest-url-header=:x",), 'header name "" is not a valid HTTP header name'),
        (("--manifest-url=localhost:8080",), "--manifest-url: must be an http:// or https:// URL"),
        (("--container-log-max-files=1",), "--container-log-max-files: must be an integer in 2.."),
        (("--container-log-max-size=lots",), '--container-log-max-size: invalid quantity "lots"'),
    ],
)
def test_bad_http_source_and_log_rotation_flags(argv: tuple[str, ...], message: str) -> None:
    assert message in load_error(*argv)


def test_header_values_cannot_smuggle_lines(tmp_path: Path) -> None:
    path, error = file_error(tmp_path, 'staticPodURLHeader: {A: ["x\\r\\nB: y"]}\n')
    assert error == (
        f'{path}: field "staticPodURLHeader": header A: a value must not contain line breaks'
    )


def test_cluster_fields_from_file_and_flags(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
registerNode: false
registerWithTaints: [{key: dedicated, value: gpu, effect: NoSchedule}]
nodeStatusUpdateFrequency: 5s
nodeLeaseDurationSeconds: 20
kubeAPIQPS: 5
systemReserved: {cpu: 100m, memory: 200Mi}
evictionHard: {memory.available: 500Mi, nodefs.available: 15%}
""",
    )
    cfg = load("--config", path, "--kubeconfig", "/etc/kubernetes/kubelet.conf").config
    assert cfg.kubeconfig == "/etc/kubernetes/kubelet.conf"
    assert cfg.register_node is False
    assert [t.as_api() for t in cfg.register_with_taints] == [
        {"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}
    ]
    assert (cfg.node_status_update_frequency, cfg.node_lease_duration_seconds) == (5.0, 20)
    assert cfg.kube_api_qps == 5 and cfg.kube_api_burst == 100
    assert cfg.system_reserved == (("cpu", "100m"), ("memory", "200Mi"))
    assert cfg.eviction_hard == (("memory.available", "500Mi"), ("nodefs.available", "15%"))
    flags = load(
        "--register-with-taints=a=b:NoExecute,c:PreferNoSchedule",
        "--node-labels=zone=a,node.kubernetes.io/pool=x",
        "--node-ip=10.0.0.7",
        "--register-node=false",
    ).config
    assert [t.as_api() for t in flags.register_with_taints] == [
        {"key": "a", "value": "b", "effect": "NoExecute"},
        {"key": "c", "effect": "PreferNoSchedule"},
    ]
    assert flags.node_labels == (("zone", "a"), ("node.kubernetes.io/pool", "x"))
    assert flags.node_ip == "10.0.0.7" and flags.register_node is False


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--node-labels=node-role.kubernetes.io/master="], "unknown 'kubernetes.io' or 'k8s.io'"),
        (["--node-labels=novalue"], "want key=value"),
        (["--register-with-taints=a=b:Sometimes"], "effect one of"),
        (["--node-ip=10.0.0.300"], "could not parse"),
        (["--register-node=maybe"], 'invalid argument "maybe" for "--register-node" flag'),
    ],
)
def test_bad_cluster_flags_are_named(args: list[str], expected: str) -> None:
    with pytest.raises(ConfigError, match=expected):
        load(*args)


def test_bad_cluster_fields_name_file_and_field(tmp_path: Path) -> None:
    path = write(tmp_path, "evictionHard: {memory.free: 1Gi}\n")
    with pytest.raises(ConfigError, match='field "evictionHard": unsupported eviction signal'):
        load("--config", path)
    path = write(tmp_path, "registerWithTaints: [{key: a, effect: Never}]\n")
    with pytest.raises(ConfigError, match='field "registerWithTaints"'):
        load("--config", path)


def test_eviction_fields(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
evictionHard: {memory.available: 200Mi}
evictionSoft: {memory.available: 1Gi, nodefs.available: 20%}
evictionSoftGracePeriod: {memory.available: 1m30s, nodefs.available: 2m}
evictionMinimumReclaim: {memory.available: 0Mi, nodefs.available: 500Mi, imagefs.available: 2%}
evictionPressureTransitionPeriod: 30s
evictionMaxPodGracePeriod: 20
""",
    )
    result = load("--config", path, "--eviction-monitoring-period=2s")
    cfg = result.config
    assert result.warnings == ()
    assert cfg.eviction_hard == (("memory.available", "200Mi"),)  # replaces the defaults
    assert cfg.eviction_soft == (("memory.available", "1Gi"), ("nodefs.available", "20%"))
    assert cfg.eviction_soft_grace_period == (
        ("memory.available", 90.0),
        ("nodefs.available", 120.0),
    )
    assert dict(cfg.eviction_minimum_reclaim) == {
        "memory.available": "0Mi",
        "nodefs.available": "500Mi",
        "imagefs.available": "2%",
    }
    assert cfg.eviction_pressure_transition_period == 30.0
    assert cfg.eviction_max_pod_grace_period == 20
    assert cfg.eviction_monitoring_period == 2.0
    shown = config.v1beta1(cfg)
    assert shown["evictionSoftGracePeriod"] == {
        "memory.available": "1m30s",
        "nodefs.available": "2m0s",
    }
    assert shown["evictionHard"] == {"memory.available": "200Mi"}


def test_merge_default_eviction_settings_keeps_the_other_defaults(tmp_path: Path) -> None:
    path = write(
        tmp_path, "evictionHard: {memory.available: 1Gi}\nmergeDefaultEvictionSettings: true\n"
    )
    assert load("--config", path).config.eviction_hard == (
        ("memory.available", "1Gi"),
        ("nodefs.available", "10%"),
        ("nodefs.inodesFree", "5%"),
        ("imagefs.available", "15%"),
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        (
            "evictionHard: {memory.available: 0Mi}",
            'field "evictionHard": eviction threshold memory.available must be positive: 0Mi',
        ),
        (
            "evictionSoft: {nodefs.available: 101%}\n"
            "evictionSoftGracePeriod: {nodefs.available: 1m}",
            'field "evictionSoft": eviction percentage threshold nodefs.available must be <= 100%',
        ),
        (
            "evictionHard: {pid.available: lots}",
            'field "evictionHard": pid.available: invalid quantity "lots"',
        ),
        (
            "evictionSoftGracePeriod: {memory.available: 90}",
            'field "evictionSoftGracePeriod": memory.available: invalid duration "90"',
        ),
        (
            "evictionMinimumReclaim: {memory.available: 0%}",
            'field "evictionMinimumReclaim": eviction percentage minimum reclaim memory.available '
            "must be positive: 0%",
        ),
        (
            "evictionMinimumReclaim: {memory.available: -1Mi}",
            "negative eviction minimum reclaim specified for memory.available",
        ),
        ("evictionMaxPodGracePeriod: -1", 'field "evictionMaxPodGracePeriod": must be an integer'),
        ("evictionSoft: [memory.available]", 'field "evictionSoft": must be a mapping of signals'),
    ],
)
def test_bad_eviction_fields_are_named(tmp_path: Path, body: str, expected: str) -> None:
    _, error = file_error(tmp_path, body + "\n")
    assert expected in error


def test_a_soft_threshold_needs_its_grace_period(tmp_path: Path) -> None:
    _, error = file_error(tmp_path, "evictionSoft: {memory.available: 1Gi}\n")
    assert error == (
        "evictionSoftGracePeriod: grace period must be specified for the soft eviction "
        "threshold memory.available"
    )


def test_change_detection_strategy(tmp_path: Path) -> None:
    for strategy in ("Watch", "Cache", "Get"):
        path = write(tmp_path, f"configMapAndSecretChangeDetectionStrategy: {strategy}\n")
        result = load("--config", path)
        assert result.warnings == ()
        assert result.config.config_map_and_secret_change_detection_strategy == strategy
    path = write(tmp_path, 'configMapAndSecretChangeDetectionStrategy: ""\n')
    assert load("--config", path).config.config_map_and_secret_change_detection_strategy == (
        "Watch"
    )
    path, error = file_error(tmp_path, "configMapAndSecretChangeDetectionStrategy: TTL\n")
    assert error == (
        f'{path}: field "configMapAndSecretChangeDetectionStrategy": must be one of Watch, '
        'Cache, Get, got "TTL"'
    )


# --- the kubelet API: TLS, authentication, authorization ------------------------------------


def test_auth_defaults_differ_with_a_file_as_the_kubelets_do(tmp_path: Path) -> None:
    flags_only = load().config
    assert (flags_only.authentication_anonymous, flags_only.authentication_webhook) == (
        True,
        False,
    )
    assert flags_only.authorization_mode == "AlwaysAllow"
    with_file = load("--config", write(tmp_path, "maxPods: 3\n")).config
    assert (with_file.authentication_anonymous, with_file.authentication_webhook) == (False, True)
    assert with_file.authorization_mode == "Webhook"


def test_nested_auth_fields_from_the_file(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        """
authentication:
  anonymous:
    enabled: true
  x509:
    clientCAFile: /etc/kubernetes/pki/ca.crt
  webhook:
    enabled: false
    cacheTTL: 30s
authorization:
  mode: AlwaysAllow
  webhook:
    cacheAuthorizedTTL: 1m
    cacheUnauthorizedTTL: 5s
tlsCertFile: /srv/kubelet.crt
tlsPrivateKeyFile: /srv/kubelet.key
tlsMinVersion: VersionTLS13
""",
    )
    result = load("--config", path)
    assert result.warnings == ()
    cfg = result.config
    assert cfg.authentication_anonymous is True
    assert cfg.authentication_client_ca_file == "/etc/kubernetes/pki/ca.crt"
    assert (cfg.authentication_webhook, cfg.authentication_webhook_cache_ttl) == (False, 30.0)
    assert cfg.authorization_mode == "AlwaysAllow"
    assert cfg.authorization_webhook_cache_authorized_ttl == 60.0
    assert cfg.authorization_webhook_cache_unauthorized_ttl == 5.0
    assert (cfg.tls_cert_file, cfg.tls_private_key_file) == ("/srv/kubelet.crt", "/srv/kubelet.key")
    assert cfg.tls_min_version == "VersionTLS13"


def test_false_is_a_value_not_the_default_for_anonymous_auth(tmp_path: Path) -> None:
    path = write(tmp_path, "authentication: {anonymous: {enabled: false}}\n")
    assert load("--config", path).config.authentication_anonymous is False
    assert load("--config", path, "--anonymous-auth=true").config.authentication_anonymous


def test_auth_and_tls_flags(tmp_path: Path) -> None:
    cfg = load(
        "--config", write(tmp_path, "authorization: {mode: Webhook}\n"),
        "--anonymous-auth=false",
        "--client-ca-file=/ca.crt",
        "--authentication-token-webhook=true",
        "--authentication-token-webhook-cache-ttl=10s",
        "--authorization-mode=AlwaysAllow",
        "--authorization-webhook-cache-authorized-ttl=1s",
        "--authorization-webhook-cache-unauthorized-ttl=2s",
        "--tls-cert-file=/c.crt",
        "--tls-private-key-file=/c.key",
        "--tls-min-version=VersionTLS12",
        "--tls-cipher-suites=TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,TLS_AES_128_GCM_SHA256",
    ).config  # fmt: skip
    assert cfg.authentication_anonymous is False
    assert cfg.authentication_client_ca_file == "/ca.crt"
    assert (cfg.authentication_webhook, cfg.authentication_webhook_cache_ttl) == (True, 10.0)
    assert cfg.authorization_mode == "AlwaysAllow"
    assert (
        cfg.authorization_webhook_cache_authorized_ttl,
        cfg.authorization_webhook_cache_unauthorized_ttl,
    ) == (1.0, 2.0)
    assert cfg.tls_cipher_suites == (
        "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
        "TLS_AES_128_GCM_SHA256",
    )


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "authorization: {mode: RBAC}\n",
            'field "authorization.mode": must be one of AlwaysAllow, Webhook, got "RBAC"',
        ),
        (
            "authentication: {webhook: {cacheTTL: 2}}\n",
            'field "authentication.webhook.cacheTTL": must be a duration string such as "20s",'
            " got 2",
        ),
        (
            "authentication: {anonymous: {enabled: no-way}}\n",
            'field "authentication.anonymous.enabled": must be true or false, got "no-way"',
        ),
        ("authentication: [x509]\n", 'field "authentication": must be a mapping, got ["x509"]'),
        (
            "authentication: {x509: /ca.crt}\n",
            'field "authentication.x509": must be a mapping, got "/ca.crt"',
        ),
        (
            "authentication: {anonymus: {enabled: true}}\n",
            'unknown field "authentication.anonymus"; did you mean "authentication.anonymous'
            '.enabled"?',
        ),
        (
            "tlsMinVersion: TLS1.2\n",
            'field "tlsMinVersion": must be one of VersionTLS10, VersionTLS11, VersionTLS12, '
            'VersionTLS13, got "TLS1.2"',
        ),
        (
            "tlsCipherSuites: [TLS_RSA_WITH_NULL_SHA]\n",
            'field "tlsCipherSuites": Cipher suite TLS_RSA_WITH_NULL_SHA not supported or'
            " doesn't exist",
        ),
        (
            "tlsCipherSuites: TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256\n",
            'field "tlsCipherSuites": must be a list of cipher suite names, got'
            ' "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"',
        ),
    ],
)
def test_bad_auth_and_tls_fields_name_file_and_field(
    tmp_path: Path, body: str, message: str
) -> None:
    path, error = file_error(tmp_path, body)
    assert error == f"{path}: {message}"


def test_tls_cross_field_checks(tmp_path: Path) -> None:
    body = "tlsMinVersion: VersionTLS13\ntlsCipherSuites: [TLS_RSA_WITH_AES_128_CBC_SHA]\n"
    assert file_error(tmp_path, body)[1] == (
        "tlsCipherSuites: minimum TLS version is 1.3, so cipher suites cannot be configured"
    )
    assert load_error("--tls-cert-file=/a.crt") == (
        "tlsCertFile and tlsPrivateKeyFile must be given together"
    )
    assert load_error("--authorization-mode=Node") == (
        '--authorization-mode: must be one of AlwaysAllow, Webhook, got "Node"'
    )


def test_v1beta1_is_the_effective_config_under_the_files_names(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "syncFrequency: 90s\nauthorization: {mode: Webhook}\n"
        "registerWithTaints: [{key: k, value: v, effect: NoSchedule}]\n"
        "systemReserved: {cpu: 100m}\n",
    )
    doc = config.v1beta1(load("--config", path, "--max-pods=7").config)
    assert doc["syncFrequency"] == "1m30s"
    assert doc["maxPods"] == 7
    assert doc["containerLogMaxSize"] == "10Mi"
    assert doc["authorization"] == {
        "mode": "Webhook",
        "webhook": {"cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s"},
    }
    assert doc["authentication"]["webhook"] == {"enabled": True, "cacheTTL": "2m0s"}
    assert doc["registerWithTaints"] == [{"key": "k", "value": "v", "effect": "NoSchedule"}]
    assert doc["systemReserved"] == {"cpu": "100m"}
    assert doc["kubeReserved"] == {}
    assert "rootDir" not in doc and "root_dir" not in doc


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0, "0s"), (0.5, "500ms"), (1.5, "1.5s"), (20, "20s"), (60, "1m0s"), (90, "1m30s"),
     (3600, "1h0m0s"), (14400, "4h0m0s"), (0.000001, "1µs")],
)  # fmt: skip
def test_go_duration(seconds: float, text: str) -> None:
    assert config.go_duration(seconds) == text


def test_image_gc_fields_and_flags(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "imageGCHighThresholdPercent: 0\nimageGCLowThresholdPercent: 0\n"
        "imageMinimumGCAge: 0s\nimageMaximumGCAge: 1h\n",
    )
    cfg = load("--config", path, "--image-gc-high-threshold=1").config
    # the thresholds are the kubelet's pointer fields: 0 is a value; a zero duration is not
    assert (cfg.image_gc_high_threshold_percent, cfg.image_gc_low_threshold_percent) == (1, 0)
    assert (cfg.image_minimum_gc_age, cfg.image_maximum_gc_age) == (120.0, 3600.0)
    cfg = load("--minimum-image-ttl-duration=1ms", "--image-gc-low-threshold=10").config
    assert (cfg.image_minimum_gc_age, cfg.image_gc_low_threshold_percent) == (0.001, 10)
    doc = config.v1beta1(cfg)
    assert doc["imageGCHighThresholdPercent"] == 85 and doc["imageMinimumGCAge"] == "1ms"


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("imageGCHighThresholdPercent: 101\n",
         'field "imageGCHighThresholdPercent": must be an integer in 0..100, got 101'),
        ("imageGCLowThresholdPercent: -1\n", 'field "imageGCLowThresholdPercent"'),
        ("imageGCLowThresholdPercent: 85\n",
         "imageGCLowThresholdPercent (--image-gc-low-threshold) 85 must be less than "
         "imageGCHighThresholdPercent (--image-gc-high-threshold) 85"),
        ("imageMaximumGCAge: 1m\n",
         "imageMaximumGCAge 1m0s must be greater than imageMinimumGCAge 2m0s"),
        ("imageMaximumGCAge: -1h\n", 'field "imageMaximumGCAge": negative duration'),
    ],
)  # fmt: skip
def test_bad_image_gc_fields_are_named(tmp_path: Path, body: str, expected: str) -> None:
    with pytest.raises(ConfigError, match=re.escape(expected)):
        load("--config", write(tmp_path, body))


def test_container_gc_flags() -> None:
    cfg = load().config
    assert cfg.maximum_dead_containers_per_container == 1
    assert (cfg.maximum_dead_containers, cfg.minimum_container_ttl_duration) == (-1, 0.0)
    assert (cfg.image_gc_period, cfg.container_gc_period) == (300.0, 60.0)
    cfg = load(
        "--maximum-dead-containers-per-container=0",
        "--maximum-dead-containers=-1",
        "--minimum-container-ttl-duration=1m",
        "--container-gc-period=1s",
        "--image-gc-period=2s",
    ).config
    assert (cfg.maximum_dead_containers_per_container, cfg.maximum_dead_containers) == (0, -1)
    assert cfg.minimum_container_ttl_duration == 60.0
    assert (cfg.image_gc_period, cfg.container_gc_period) == (2.0, 1.0)
    assert "--maximum-dead-containers: must be an integer" in load_error(
        "--maximum-dead-containers=many"
    )
