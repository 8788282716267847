"""Credential provider plugins end to end, on the real containerd and the htpasswd
registry: a small plugin script in a bin dir of the test's, named by a
CredentialProviderConfig given with the kubelet's flags, on a node of the real control
plane. A private image is pulled with
the plugin's credentials and no pull secret, and the plugin runs once for two pulls
within its cacheDuration; wrong credentials from it are ErrImagePull with the registry's
401, then ImagePullBackOff; a provider that cannot be registered stops the start."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import PKLETD, Pkletd, join, wait_for
from tests.harness.registry import Registry
from tests.supervisor.credentialproviders.plugin_helpers import (
    answer,
    provider,
    runs,
    write_config,
    write_plugin,
)
from tests.supervisor.pods import test_image_pull_auth
from tests.supervisor.pods.test_image_pull_auth import (
    PASSWORD,
    USER,
    WRONG,
    pod_events,
    private_pod,
    push_private,
    refusal,
    waiting_as,
)

pytestmark = pytest.mark.slow
private_registry = test_image_pull_auth.private_registry  # the htpasswd registry's fixture
kube = test_image_pull_auth.kube  # the cluster's admin


def with_plugin(agent: Pkletd, registry: Registry, password: str) -> Path:
    """The agent's flags name a plugin answering ``USER``/``password`` for the registry,
    kept 5 minutes per registry; the plugin's log of runs."""
    bin_dir, log = agent.base / "plugins", agent.base / "plugin-runs.log"
    write_plugin(bin_dir, "registry-creds")
    reply = answer({registry.host: (USER, password)}, "Registry", cacheDuration="5m")
    env = [{"name": "PLUGIN_LOG", "value": str(log)}, {"name": "PLUGIN_ANSWER", "value": reply}]
    config = write_config(
        agent.base / "credential-providers.json",
        provider("registry-creds", registry.host, env=env),
    )
    agent.extra_args += [
        "--image-credential-provider-config",
        str(config),
        "--image-credential-provider-bin-dir",
        str(bin_dir),
    ]
    return log


def test_a_private_image_is_pulled_with_the_plugins_credentials_once_cached(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube, private_registry: Registry
) -> None:
    first, second = push_private(private_registry, "plug1"), push_private(private_registry, "plug2")
    log = with_plugin(pkletd, private_registry, PASSWORD)
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", private_pod(pkletd, "first", first))
    pkletd.wait_api_pod("first", timeout=60)
    kube.core.create_namespaced_pod("default", private_pod(pkletd, "second", second))
    pkletd.wait_api_pod("second", timeout=60)

    for name in ("first", "second"):
        assert [r for _, r, _ in pod_events(pkletd, name)][:2] == ["Pulling", "Pulled"]
    asked = [run["request"] for run in runs(log)]
    assert asked == [
        {
            "kind": "CredentialProviderRequest",
            "apiVersion": "credentialprovider.kubelet.k8s.io/v1",
            "image": first.rpartition(":")[0],  # the repository, as the kubelet asks
        }
    ]  # the second pull used the answer kept for the registry
    logs = (pkletd.base / "stderr.log").read_text()
    assert "credential provider registered provider=registry-creds" in logs
    assert PASSWORD not in logs


def test_wrong_credentials_from_the_plugin_are_err_image_pull_then_back_off(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube, private_registry: Registry
) -> None:
    image = push_private(private_registry, "plugwrong")
    with_plugin(pkletd, private_registry, WRONG)
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", private_pod(pkletd, "wrong", image))

    refused = refusal(private_registry, image)
    failed = wait_for("ErrImagePull", lambda: waiting_as(kube, "wrong", "ErrImagePull"))
    assert failed["message"] == refused
    backing_off = wait_for(
        "ImagePullBackOff", lambda: waiting_as(kube, "wrong", "ImagePullBackOff")
    )
    assert backing_off["message"] == f'Back-off pulling image "{image}"'
    assert pod_events(pkletd, "wrong")[:2] == [
        ("Normal", "Pulling", f'Pulling image "{image}"'),
        ("Warning", "Failed", f'Failed to pull image "{image}": {refused}'),
    ]
    logs = (pkletd.base / "stderr.log").read_text()
    assert f"registry={private_registry.host} provider=registry-creds" in logs
    assert WRONG not in logs


def test_a_provider_without_its_executable_stops_the_start(tmp_path: Path) -> None:
    config = write_config(tmp_path / "providers.json", provider("gone", "registry.example"))
    started = subprocess.run(
        [
            str(PKLETD),
            "start",
            "--run-dir",
            str(tmp_path / "run"),
            "--image-credential-provider-config",
            str(config),
            "--image-credential-provider-bin-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert started.returncode == 1
    assert started.stderr == (
        "pkletd: failed to register CRI auth plugins: plugin binary executable "
        f"{tmp_path / 'gone'} did not exist\n"
    )
    assert not (tmp_path / "run").exists()  # nothing was started
