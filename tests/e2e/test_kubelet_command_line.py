"""pkletd as the kubelet on a kubeadm node: kubeadm's command line, unchanged, runs it.

The command line is the one kubeadm's systemd drop-in builds (``$KUBELET_KUBECONFIG_ARGS
$KUBELET_CONFIG_ARGS $KUBELET_KUBEADM_ARGS``) with a ``$KUBELET_EXTRA_ARGS``-like tail:
the ``kubelet`` script of the venv against the test containerd and the real control plane.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import NODE, REPO, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

KUBELET = REPO / ".venv" / "bin" / "kubelet"
HEADER = "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def kubeadm_command_line(
    pkletd: Pkletd, kubeconfig_args: Sequence[str], drop_ins: Path | None = None
) -> list[str]:
    """kubeadm's drop-in's command line; ``kubeconfig_args`` are its
    ``KUBELET_KUBECONFIG_ARGS`` (``--bootstrap-kubeconfig=... --kubeconfig=...`` on a node
    that joins with a token)."""
    config_dir = ["--config-dir", str(drop_ins)] if drop_ins is not None else []
    return [
        str(KUBELET),
        *kubeconfig_args,  # KUBELET_KUBECONFIG_ARGS
        f"--config={pkletd.config}",  # KUBELET_CONFIG_ARGS
        f"--container-runtime-endpoint={pkletd.endpoint}",  # KUBELET_KUBEADM_ARGS
        "--node-ip=127.0.0.1",
        "--pod-infra-container-image=registry.k8s.io/pause:3.10",
        f"--hostname-override={NODE}",
        "--container-runtime=remote",  # what old kubeadm versions wrote
        "--v=2",  # KUBELET_EXTRA_ARGS
        "--fail-swap-on=false",
        "--feature-gates=KubeletTracing=false",
        *config_dir,
    ]


def test_kubeadm_command_line_runs_the_node(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    kubeconfig = control_plane.kubeconfig(
        pkletd.base / "kubelet.conf", user=f"system:node:{NODE}", groups=["system:nodes"]
    )
    # The file names an endpoint that is not there: the flag kubeadm passes wins.
    pkletd.write_config(
        containerRuntimeEndpoint="unix:///nonexistent/containerd.sock",
        authentication={"x509": {"clientCAFile": str(control_plane.ca_path)}},
    )
    drop_ins = pkletd.base / "kubelet.conf.d"
    drop_ins.mkdir()
    (drop_ins / "10-pods.conf").write_text(HEADER + "maxPods: 42\n")
    pkletd.command = kubeadm_command_line(pkletd, [f"--kubeconfig={kubeconfig}"], drop_ins)
    pkletd.put("web", pod_manifest("web"))
    pkletd.start()

    pkletd.wait_running("web")
    node = wait_for("node registered", lambda: kube.core.read_node(NODE))
    addresses = [(a.type, a.address) for a in node.status.addresses]
    assert addresses == [("InternalIP", "127.0.0.1"), ("Hostname", NODE)]
    assert node.status.capacity["pods"] == "42"  # from the drop-in
    log = pkletd.log()
    assert "flag --v is NOT IMPLEMENTED by pkletd" in log
    assert "flag --fail-swap-on is NOT IMPLEMENTED by pkletd" in log
    assert "Flag --pod-infra-container-image has been deprecated" in log
    assert "Flag --container-runtime has been deprecated" in log
    assert "feature gates with no effect in pkletd: KubeletTracing=false" in log


def run(pkletd: Pkletd, *extra: str) -> subprocess.CompletedProcess[str]:
    pkletd.command = [str(KUBELET), f"--config={pkletd.config}"]
    return subprocess.run([*pkletd.args(), *extra], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--improve-speed"], "Error: failed to parse kubelet flag: unknown flag: --improve-speed"),
        (["--feature-gates=FasterPods=true"], "unrecognized feature gate: FasterPods"),
    ],
)
def test_an_unknown_flag_or_gate_exits_2_and_starts_nothing(
    pkletd: Pkletd, extra: list[str], message: str
) -> None:
    result = run(pkletd, *extra)
    assert result.returncode == 2
    assert message in result.stderr
    assert not pkletd.run_dir.exists()  # nothing was started


def test_a_bad_drop_in_exits_2_naming_file_and_field(pkletd: Pkletd) -> None:
    drop_ins = pkletd.base / "kubelet.conf.d"
    drop_ins.mkdir()
    (drop_ins / "10-good.conf").write_text(HEADER + "maxPods: 42\n")
    (drop_ins / "20-bad.conf").write_text(HEADER + "syncFrequency: often\n")
    result = run(pkletd, "--config-dir", str(drop_ins))
    assert result.returncode == 2
    assert f'{drop_ins / "20-bad.conf"}: field "syncFrequency": invalid duration' in result.stderr
    assert not pkletd.run_dir.exists()
