"""The kubelet's command line: its flag forms, precedence, drop-ins, gates and errors."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from pkletd.supervisor import config, kubeletcmd
from pkletd.supervisor.config import ConfigError, KubeletConfig

HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
REPO = Path(__file__).resolve().parents[2]
KUBELET = REPO / ".venv" / "bin" / "kubelet"


def load(*argv: str) -> config.LoadResult:
    return config.load(kubeletcmd.parse(list(argv)))


def effective(*argv: str) -> KubeletConfig:
    return load(*argv).config


def write(path: Path, body: str) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(HEADER + body)
    return str(path)


def bad(*argv: str) -> str:
    with pytest.raises((ConfigError, kubeletcmd.BadCommandLine)) as info:
        load(*argv)
    return str(info.value)


# --- the forms of a flag --------------------------------------------------------------------


def test_value_flags_take_equals_or_the_next_word() -> None:
    cfg = effective("--max-pods=7", "--sync-frequency", "5s", "--hostname-override", "Node-1")
    assert (cfg.max_pods, cfg.sync_frequency, cfg.node_name) == (7, 5.0, "node-1")


def test_bool_flags_alone_mean_true_and_take_go_spellings() -> None:
    assert effective("--seccomp-default").seccomp_default is True
    assert effective("--register-node=false").register_node is False
    assert effective("--register-node=0").register_node is False
    assert effective("--register-node=F", "--register-node=T").register_node is True  # last wins
    assert effective("--anonymous-auth=false").authentication_anonymous is False


def test_the_last_of_a_flag_given_twice_wins() -> None:
    assert effective("--max-pods=7", "--max-pods=9").max_pods == 9


def test_negative_numbers_are_values() -> None:
    assert effective("--maximum-dead-containers", "-1").maximum_dead_containers == -1


def test_map_flags_add_up_and_use_the_kubelets_separators() -> None:
    cfg = effective(
        "--eviction-hard=memory.available<200Mi,nodefs.available<5%",
        "--system-reserved=cpu=100m",
        "--system-reserved=memory=1Gi",
        "--eviction-soft=memory.available<300Mi",
        "--eviction-soft-grace-period=memory.available=1m",
    )
    assert cfg.eviction_hard == (("memory.available", "200Mi"), ("nodefs.available", "5%"))
    assert cfg.system_reserved == (("cpu", "100m"), ("memory", "1Gi"))
    assert cfg.eviction_soft_grace_period == (("memory.available", 60.0),)


def test_certificate_and_credential_provider_flags_reach_the_config() -> None:
    cfg = effective(
        "--root-dir=/r",
        "--bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf",
        "--rotate-certificates",
        "--rotate-server-certificates=true",
        "--image-credential-provider-config=/etc/cp.yaml",
        "--image-credential-provider-bin-dir=/opt/cp",
    )
    assert cfg.bootstrap_kubeconfig == "/etc/kubernetes/bootstrap-kubelet.conf"
    assert (cfg.rotate_certificates, cfg.server_tls_bootstrap) == (True, True)
    assert (cfg.image_credential_provider_config, cfg.image_credential_provider_bin_dir) == (
        "/etc/cp.yaml",
        "/opt/cp",
    )
    assert cfg.cert_dir == "/r/pki"  # <root-dir>/pki unless --cert-dir
    assert effective("--cert-dir=/c").cert_dir == "/c"


def test_certificate_fields_from_the_file(tmp_path: Path) -> None:
    path = write(tmp_path / "c.yaml", "rotateCertificates: true\nserverTLSBootstrap: true\n")
    cfg = effective("--config", path)
    assert (cfg.rotate_certificates, cfg.server_tls_bootstrap) == (True, True)
    assert config.v1beta1(cfg)["rotateCertificates"] is True


# --- flags pkletd does not implement, deprecated flags, unknown flags ----------------------


def test_unimplemented_flags_are_accepted_and_named_in_a_warning() -> None:
    result = load("--cgroup-driver=systemd", "--fail-swap-on=false", "-v=2", "--pod-cidr", "x")
    warnings = "\n".join(result.warnings)
    for name in ("--cgroup-driver", "--fail-swap-on", "--v", "--pod-cidr"):
        assert f"flag {name} is NOT IMPLEMENTED by pkletd" in warnings
    assert len(result.warnings) == 4


def test_deprecated_flags_are_accepted_with_one_line_each() -> None:
    result = load(
        "--container-runtime=remote",
        "--network-plugin=cni",
        "--pod-infra-container-image=registry.k8s.io/pause:3.10",
        "--register-schedulable",
    )
    assert len(result.warnings) == 4
    assert all(w.startswith("Flag --") and "has been deprecated" in w for w in result.warnings)


def test_a_bad_bool_of_an_unimplemented_flag_is_refused() -> None:
    assert 'invalid argument "maybe" for "--fail-swap-on" flag' in bad("--fail-swap-on=maybe")


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--improve-speed"], "failed to parse kubelet flag: unknown flag: --improve-speed"),
        (["--max-pod=3"], "unknown flag: --max-pod"),  # no abbreviations
        (["-q"], "unknown shorthand flag: 'q' in -q"),
        (["run"], "unknown command run"),
        (["--config"], "failed to parse kubelet flag: argument --config: expected one argument"),
    ],
)
def test_command_line_errors_say_what_the_kubelet_says(argv: list[str], message: str) -> None:
    assert message in bad(*argv)


def test_an_unknown_flag_exits_2_with_the_kubelets_error(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert kubeletcmd.main(["--kubeconfig=/k", "--improve-speed=yes"]) == 2
    assert (
        capsys.readouterr().err
        == "Error: failed to parse kubelet flag: unknown flag: --improve-speed\n"
    )


def test_a_bad_config_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert kubeletcmd.main(["--feature-gates=NoSuchGate=true"]) == 2
    assert "unrecognized feature gate: NoSuchGate" in capsys.readouterr().err


def test_version_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert kubeletcmd.main(["--version"]) == 0
    assert capsys.readouterr().out == "Kubernetes v1.32.0-pkletd.0.1.0\n"
    assert kubeletcmd.main(["--version=true"]) == 0


def test_the_installed_script_and_a_link_named_kubelet(tmp_path: Path) -> None:
    link = tmp_path / "kubelet"
    link.symlink_to(REPO / ".venv" / "bin" / "pkletd")
    for command in (KUBELET, link):
        out = subprocess.run([str(command), "--version"], capture_output=True, text=True)
        assert (out.returncode, out.stdout) == (0, "Kubernetes v1.32.0-pkletd.0.1.0\n")
        out = subprocess.run([str(command), "--nope"], capture_output=True, text=True)
        assert (out.returncode, out.stderr) == (
            2,
            "Error: failed to parse kubelet flag: unknown flag: --nope\n",
        )


def test_pkletd_start_takes_the_same_flags() -> None:
    from pkletd.supervisor import cli

    args = cli._parser(True).parse_args(["start", "--network-plugin=cni", "--register-node"])
    assert config.load(args).config.register_node is True


def test_pkletd_status_stays_light() -> None:
    code = (
        "import sys; from pkletd.supervisor import cli; cli._parser(False); "
        "print(any(m in sys.modules for m in ('pkletd.supervisor.config', 'grpc', "
        "'pkletd.supervisor.kubeletcmd')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout == "False\n"


# --- precedence: defaults < --config < --config-dir < flags --------------------------------


def test_precedence_file_then_drop_ins_then_flags(tmp_path: Path) -> None:
    base = write(tmp_path / "config.yaml", "maxPods: 10\nport: 11000\nsyncFrequency: 3s\n")
    write(tmp_path / "d" / "10-a.conf", "maxPods: 20\nport: 12000\n")
    write(tmp_path / "d" / "20-b.conf", "maxPods: 30\n")
    cfg = effective("--config", base, "--config-dir", str(tmp_path / "d"), "--max-pods=40")
    assert (cfg.max_pods, cfg.port, cfg.sync_frequency) == (40, 12000, 3.0)
    cfg = effective("--config", base, "--config-dir", str(tmp_path / "d"))
    assert cfg.max_pods == 30  # the lexically last drop-in wins


def test_drop_ins_merge_maps_replace_lists_and_null_restores_the_default(tmp_path: Path) -> None:
    base = write(
        tmp_path / "config.yaml",
        "evictionHard: {memory.available: 100Mi}\nauthentication: {webhook: {enabled: true, "
        "cacheTTL: 10s}}\ntlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256]\n"
        "readOnlyPort: 10255\n",
    )
    write(
        tmp_path / "d" / "50.conf",
        "evictionHard: {nodefs.available: 5%}\nauthentication: {webhook: {cacheTTL: 1m}}\n"
        "tlsCipherSuites: [TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384]\nreadOnlyPort: null\n",
    )
    cfg = effective("--config", base, "--config-dir", str(tmp_path / "d"))
    assert cfg.eviction_hard == (("memory.available", "100Mi"), ("nodefs.available", "5%"))
    assert (cfg.authentication_webhook, cfg.authentication_webhook_cache_ttl) == (True, 60.0)
    assert cfg.tls_cipher_suites == ("TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",)
    assert cfg.read_only_port == 0


def test_only_conf_files_in_lexical_order_through_subdirectories(tmp_path: Path) -> None:
    drop = tmp_path / "d"
    write(drop / "10.conf", "maxPods: 11\n")
    write(drop / "20" / "x.conf", "maxPods: 22\n")  # inside 20/: after 10.conf, before 30
    write(drop / "30.conf.bak", "maxPods: 33\n")
    write(drop / "05.yaml", "maxPods: 5\n")
    assert effective("--config-dir", str(drop)).max_pods == 22


def test_drop_ins_without_a_config_file(tmp_path: Path) -> None:
    write(tmp_path / "d" / "a.conf", "staticPodPath: /m\n")
    cfg = effective("--config-dir", str(tmp_path / "d"))
    assert cfg.static_pod_path == "/m"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ("maxPods: lots\n", 'field "maxPods": must be an integer'),
        ("maxPod: 3\n", 'unknown field "maxPod"; did you mean "maxPods"?'),
        ("featureGates: {Nope: true}\n", 'field "featureGates": unrecognized feature gate: Nope'),
    ],
)
def test_a_bad_drop_in_is_named_with_its_field(tmp_path: Path, body: str, message: str) -> None:
    write(tmp_path / "d" / "10-good.conf", "maxPods: 3\n")
    bad_file = write(tmp_path / "d" / "20-bad.conf", body)
    assert f"{bad_file}: {message}" in bad("--config-dir", str(tmp_path / "d"))


def test_a_drop_in_needs_its_header(tmp_path: Path) -> None:
    path = tmp_path / "d" / "a.conf"
    path.parent.mkdir()
    path.write_text("maxPods: 3\n")
    assert f"{path}: apiVersion must be kubelet.config.k8s.io/v1beta1" in bad(
        "--config-dir", str(path.parent)
    )


def test_a_missing_drop_in_directory(tmp_path: Path) -> None:
    assert "--config-dir /nonexistent/d: no such directory" in bad("--config-dir=/nonexistent/d")


def test_unimplemented_fields_of_a_drop_in_warn_naming_it(tmp_path: Path) -> None:
    path = write(tmp_path / "d" / "a.conf", "cgroupDriver: systemd\n")
    result = load("--config-dir", str(tmp_path / "d"))
    assert f'{path}: field "cgroupDriver" is not implemented by pkletd yet; ignored' in (
        result.warnings
    )


# --- feature gates ---------------------------------------------------------------------------


def test_gates_from_file_drop_ins_and_flags_merge_gate_by_gate(tmp_path: Path) -> None:
    base = write(tmp_path / "c.yaml", "featureGates: {KubeletTracing: false, NodeSwap: true}\n")
    write(tmp_path / "d" / "a.conf", "featureGates: {NodeSwap: false, MemoryQoS: true}\n")
    cfg = effective(
        "--config", base, "--config-dir", str(tmp_path / "d"),
        "--feature-gates=MemoryQoS=false", "--feature-gates", "KubeletPSI=true",
    )  # fmt: skip
    assert cfg.feature_gates == (
        ("KubeletPSI", True),
        ("KubeletTracing", False),
        ("MemoryQoS", False),
        ("NodeSwap", False),
    )
    assert config.v1beta1(cfg)["featureGates"] == dict(cfg.feature_gates)


def test_gates_pkletd_does_not_act_on_are_named_in_one_warning() -> None:
    result = load("--feature-gates=NodeSwap=true,KubeletPSI=false")
    assert result.warnings == (
        "feature gates with no effect in pkletd: KubeletPSI=false, NodeSwap=true",
    )


def test_evented_pleg_gate_switches_the_pleg_unless_the_pkletd_flag_says() -> None:
    assert effective("--feature-gates=EventedPLEG=false").pleg_runtime_events is False
    assert effective().pleg_runtime_events is True
    cfg = effective("--feature-gates=EventedPLEG=false", "--pleg-runtime-events=true")
    assert cfg.pleg_runtime_events is True


@pytest.mark.parametrize(
    ("body", "gate", "message"),
    [
        (
            "shutdownGracePeriod: 30s\n",
            "GracefulNodeShutdown",
            "requires feature gate GracefulNodeShutdown",
        ),
        (
            "imageMaximumGCAge: 1h\n",
            "ImageMaximumGCAge",
            "ImageMaximumGCAge feature gate is required",
        ),
    ],
)
def test_a_gate_off_refuses_the_fields_it_guards(
    tmp_path: Path, body: str, gate: str, message: str
) -> None:
    path = write(tmp_path / "c.yaml", body)
    assert message in bad("--config", path, f"--feature-gates={gate}=false")
    effective("--config", path, f"--feature-gates={gate}=true")


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("Bogus=true", "unrecognized feature gate: Bogus"),
        ("NodeSwap", "missing bool value for NodeSwap"),
        ("NodeSwap=yes", "invalid value of NodeSwap: yes"),
    ],
)
def test_bad_feature_gate_flags(text: str, message: str) -> None:
    assert message in bad(f"--feature-gates={text}")


# --- --node-ip ----------------------------------------------------------------------------------


def test_node_ip_single_and_dual_stack() -> None:
    assert effective("--node-ip=10.0.0.5").node_ip == "10.0.0.5"
    assert effective("--node-ip= fd00::5 , 10.0.0.5").node_ip == "fd00::5,10.0.0.5"


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("10.0.0.5,10.0.0.6", "must contain either a single IP or a dual-stack pair of IPs"),
        ("10.0.0.5,fd00::5,10.0.0.7", "must contain either a single IP"),
        ("0.0.0.0,fd00::5", "dual-stack node IP cannot include '0.0.0.0' or '::'"),
        ("node-a", "could not parse 'node-a'"),
    ],
)
def test_bad_node_ips(value: str, message: str) -> None:
    assert message in bad(f"--node-ip={value}")
