"""Pods that use the cluster's objects, on a real pkletd joined to the real control plane
(kube-apiserver with its service-account token signer, kube-controller-manager) with real
containerd: configMap, secret and projected volumes (and the default kube-api-access one,
its ``ca.crt`` from ``kube-root-ca.crt``), their updates seen inside a running container
(not through a subPath), tokens the API server accepts for their audience, environment
from objects and Services, and every bad input with the kubelet's reason and message while
the rest of the pod and the node go on. Secrets appear in no pkletd log line and not in
``pkletd status``."""

from __future__ import annotations

import base64
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.containerd import mounts_under
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

NS = "default"
EXTRA = "authentication.kubernetes.io/"  # a bound token's claims, as TokenReview shows them
PASSWORD = "s3cret-pa55"  # must never reach a pkletd log or its status


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane) -> Iterator[Pkletd]:
    yield join(pkletd, control_plane)


def b64(text: str | bytes) -> str:
    raw = text.encode() if isinstance(text, str) else text
    return base64.b64encode(raw).decode()


def pod(name: str, *containers: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": NS},
        "spec": {
            "nodeName": "testnode",
            "terminationGracePeriodSeconds": 1,
            "containers": list(containers),
            **spec,
        },
    }


def container(name: str, script: str, **fields: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": BUSYBOX,
        "imagePullPolicy": "Never",
        "command": ["sh", "-c", script],
        **fields,
    }


def config_map(kube: Kube, name: str, data: dict[str, str], **extra: Any) -> None:
    body = {"metadata": {"name": name}, "data": data, **extra}
    kube.core.create_namespaced_config_map(NS, body)


def api_status(kube: Kube, name: str) -> Any:
    return kube.core.read_namespaced_pod(name, NS).status


def waiting_of(kube: Kube, name: str, container_name: str) -> Any:
    statuses = api_status(kube, name).container_statuses or []
    found = [s.state.waiting for s in statuses if s.name == container_name and s.state.waiting]
    return found[0] if found else None


def wait_waiting(kube: Kube, name: str, container_name: str, reason: str, message: str) -> None:
    def check() -> bool:
        waiting = waiting_of(kube, name, container_name)
        return waiting is not None and (waiting.reason, waiting.message) == (reason, message)

    wait_for(f"{name}/{container_name} waiting {reason}: {message}", check, timeout=30)


def running(kube: Kube, name: str, container_name: str) -> bool:
    statuses = api_status(kube, name).container_statuses or []
    return any(s.name == container_name and s.state.running for s in statuses)


def logs(kube: Kube, name: str, container_name: str = "") -> str:
    extra = ["-c", container_name] if container_name else []
    return kube.kubectl("logs", name, *extra, check=False).stdout


def volume(agent: Pkletd, name: str, plugin: str, volume_name: str) -> Path:
    uid = agent.pods()[name]["uid"]
    return agent.root_dir / "pods" / uid / "volumes" / f"kubernetes.io~{plugin}" / volume_name


def review(kube: Kube, token: str, audiences: list[str]) -> Any:
    body = kubernetes.client.V1TokenReview(
        spec=kubernetes.client.V1TokenReviewSpec(token=token, audiences=audiences)
    )
    return kube.authn.create_token_review(body).status


def assert_no_secret_in_logs_or_status(agent: Pkletd, *secrets: str) -> None:
    texts = [path.read_text() for path in agent.log_dir.glob("*.log")]
    texts += [(agent.base / "stderr.log").read_text(), agent.cli("status", "--json").stdout]
    for secret in secrets:
        assert not any(secret in text for text in texts), "a secret reached a log or status"


FILES_SCRIPT = (
    'while true; do echo "cfg=$(cat /cfg/mode) sub=$(cat /etc/mode) pw=$(cat /mix/pw | wc -c)";'
    " sleep 0.2; done"
)


def test_volumes_follow_their_objects(
    node: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    config_map(kube, "settings", {"mode": "one", "other": "x"}, binaryData={"blob": b64(b"\0\1")})
    kube.core.create_namespaced_secret(
        NS, {"metadata": {"name": "creds"}, "data": {"password": b64(PASSWORD)}}
    )
    mounts = [
        {"name": "cfg", "mountPath": "/cfg"},
        {"name": "cfg", "mountPath": "/etc/mode", "subPath": "mode"},
        {"name": "creds", "mountPath": "/creds"},
        {"name": "mix", "mountPath": "/mix"},
    ]
    mix_sources = [
        {"configMap": {"name": "settings", "items": [{"key": "other", "path": "conf/other"}]}},
        {"secret": {"name": "creds", "items": [{"key": "password", "path": "pw", "mode": 0o400}]}},
        {"downwardAPI": {"items": [{"path": "name", "fieldRef": {"fieldPath": "metadata.name"}}]}},
        {"serviceAccountToken": {"path": "vault-token", "audience": "vault"}},
    ]
    manifest = pod(
        "files",
        container("c", FILES_SCRIPT, volumeMounts=mounts),
        volumes=[
            {"name": "cfg", "configMap": {"name": "settings"}},
            {"name": "creds", "secret": {"secretName": "creds", "defaultMode": 0o440}},
            {"name": "mix", "projected": {"sources": mix_sources}},
        ],
    )
    kube.core.create_namespaced_pod(NS, manifest)
    node.wait_api_pod("files")
    wait_for("the container reading its files", lambda: "cfg=one sub=one" in logs(kube, "files"))

    cfg = volume(node, "files", "configmap", "cfg")
    assert (cfg / "mode").read_text() == "one" and (cfg / "blob").read_bytes() == b"\0\1"
    assert mounts_under(cfg) == []  # a ConfigMap on disk
    creds = volume(node, "files", "secret", "creds")
    assert mounts_under(creds) == [str(creds)]  # a Secret on a tmpfs
    assert stat.S_IMODE((creds / "password").stat().st_mode) == 0o440
    mix = volume(node, "files", "projected", "mix")
    assert mounts_under(mix) == [str(mix)]
    assert (mix / "conf" / "other").read_text() == "x" and (mix / "name").read_text() == "files"
    assert stat.S_IMODE((mix / "pw").stat().st_mode) == 0o400

    # The tokens are the API server's, for their audiences, bound to the pod.
    access = next(v for v in api_status_volumes(kube, "files") if v.startswith("kube-api-access"))
    default_dir = volume(node, "files", "projected", access)
    default_token = (default_dir / "token").read_text()
    reviewed = review(kube, default_token, [])
    assert (
        reviewed.authenticated and reviewed.user.username == "system:serviceaccount:default:default"
    )
    bound = reviewed.user.extra or {}
    assert bound[f"{EXTRA}pod-name"] == ["files"]
    assert bound[f"{EXTRA}pod-uid"] == [node.pods()["files"]["uid"]]
    assert bound[f"{EXTRA}node-name"] == [node.node]
    assert (default_dir / "ca.crt").read_text() == control_plane.ca_path.read_text()
    assert (default_dir / "namespace").read_text() == NS
    vault_token = (mix / "vault-token").read_text()
    assert review(kube, vault_token, ["vault"]).authenticated
    assert not review(
        kube, vault_token, ["https://kubernetes.default.svc.cluster.local"]
    ).authenticated

    # Updates reach the running container within seconds; the subPath keeps its file.
    kube.core.patch_namespaced_config_map("settings", NS, {"data": {"mode": "two"}})
    wait_for(
        "the new value inside the container",
        lambda: "cfg=two sub=one" in logs(kube, "files"),
        timeout=15,
    )
    kube.core.patch_namespaced_secret("creds", NS, {"data": {"password": b64("longer-password")}})
    wait_for(
        "the new secret in the projected volume", lambda: "pw=15" in logs(kube, "files"), timeout=15
    )
    assert api_status(kube, "files").container_statuses[0].restart_count == 0

    assert_no_secret_in_logs_or_status(
        node, PASSWORD, "longer-password", default_token, vault_token
    )

    # Bound to the pod: once it is deleted, kube-apiserver no longer takes them.
    kube.core.delete_namespaced_pod("files", NS)
    wait_for(
        "the pod's token refused",
        lambda: not review(kube, vault_token, ["vault"]).authenticated,
        timeout=30,
    )


def api_status_volumes(kube: Kube, name: str) -> list[str]:
    return [v.name for v in kube.core.read_namespaced_pod(name, NS).spec.volumes]


ENV_SCRIPT = 'env; while true; do echo "now MODE=$CM_MODE file=$(cat /cm/MODE)"; sleep 0.2; done'


def environment(text: str) -> dict[str, str]:
    return dict(
        line.split("=", 1)
        for line in text.splitlines()
        if "=" in line and not line.startswith("now ")
    )


def test_environment_from_objects_and_services(node: Pkletd, kube: Kube) -> None:
    config_map(kube, "env-cm", {"MODE": "fast", "1bad": "skipped-without-prefix"})
    kube.core.create_namespaced_secret(
        NS, {"metadata": {"name": "env-secret"}, "data": {"PASSWORD": b64(PASSWORD)}}
    )
    db = kube.core.create_namespaced_service(
        NS,
        {
            "metadata": {"name": "my-db"},
            "spec": {"ports": [{"name": "pg", "port": 5432, "protocol": "TCP"}]},
        },
    )
    kube.core.create_namespaced_service(
        NS,
        {"metadata": {"name": "headless"}, "spec": {"clusterIP": "None", "ports": [{"port": 80}]}},
    )
    env = [
        {"name": "LEVEL", "valueFrom": {"configMapKeyRef": {"name": "env-cm", "key": "MODE"}}},
        {
            "name": "MAYBE",
            "valueFrom": {"secretKeyRef": {"name": "env-secret", "key": "nope", "optional": True}},
        },
        {"name": "DB_URL", "value": "pg://$(MY_DB_SERVICE_HOST):$(MY_DB_SERVICE_PORT_PG)"},
    ]
    env_from = [
        {"configMapRef": {"name": "env-cm"}},  # "1bad" is no variable name: skipped
        {"configMapRef": {"name": "env-cm"}, "prefix": "CM_"},  # "CM_1bad" is one
        {"secretRef": {"name": "env-secret"}},
    ]
    mounts = [{"name": "cm", "mountPath": "/cm"}]
    linked = container("c", ENV_SCRIPT, env=env, envFrom=env_from, volumeMounts=mounts)
    volumes = [{"name": "cm", "configMap": {"name": "env-cm"}}]
    kube.core.create_namespaced_pod(NS, pod("envs", linked, volumes=volumes))
    kube.core.create_namespaced_pod(
        NS, pod("nolinks", container("c", "env; sleep 3600"), enableServiceLinks=False)
    )
    node.wait_api_pod("envs")
    found = wait_for("the environment in the log", lambda: environment(logs(kube, "envs")) or None)
    ip = db.spec.cluster_ip
    assert found["MODE"] == "fast" and "1bad" not in found
    assert found["CM_MODE"] == "fast" and found["CM_1bad"] == "skipped-without-prefix"
    assert found["PASSWORD"] == PASSWORD and found["LEVEL"] == "fast" and "MAYBE" not in found
    assert found["KUBERNETES_SERVICE_HOST"] == "10.96.0.1"
    assert found["KUBERNETES_SERVICE_PORT"] == "443"
    assert found["KUBERNETES_PORT_443_TCP"] == "tcp://10.96.0.1:443"
    assert found["MY_DB_SERVICE_HOST"] == ip and found["MY_DB_SERVICE_PORT_PG"] == "5432"
    assert found["MY_DB_PORT"] == f"tcp://{ip}:5432"
    assert found["MY_DB_PORT_5432_TCP_ADDR"] == ip and found["MY_DB_PORT_5432_TCP_PROTO"] == "tcp"
    assert found["DB_URL"] == f"pg://{ip}:5432"
    assert not any(k.startswith("HEADLESS_") for k in found)

    node.wait_api_pod("nolinks")
    plain = wait_for("nolinks' environment", lambda: environment(logs(kube, "nolinks")) or None)
    assert "KUBERNETES_SERVICE_HOST" in plain and not any(k.startswith("MY_DB") for k in plain)

    invalid = [e for e in node.events() if e["reason"] == "InvalidEnvironmentVariableNames"]
    assert invalid[0]["message"] == (
        "Keys [1bad] from the EnvFrom configMap default/env-cm were skipped since they are "
        "considered invalid environment variable names."
    )

    # The file follows the ConfigMap; the running container's environment does not.
    kube.core.patch_namespaced_config_map("env-cm", NS, {"data": {"MODE": "slow"}})
    wait_for("the new file", lambda: "now MODE=fast file=slow" in logs(kube, "envs"), timeout=15)
    assert_no_secret_in_logs_or_status(node, PASSWORD)


def test_bad_inputs_get_the_kubelets_messages(node: Pkletd, kube: Kube, tmp_path: Path) -> None:
    config_map(kube, "settings", {"mode": "one"})
    ok = container("ok", "sleep 3600")

    def ref(kind: str, name: str, key: str) -> list[dict[str, Any]]:
        return [{"name": "V", "valueFrom": {kind: {"name": name, "key": key}}}]

    cfg_mount = [{"name": "cfg", "mountPath": "/cfg"}]
    cases = {
        "no-cm": pod(
            "no-cm",
            container("c", "sleep 3600", volumeMounts=cfg_mount),
            volumes=[{"name": "cfg", "configMap": {"name": "later"}}],
        ),
        "no-key": pod(
            "no-key",
            container("c", "sleep 3600", volumeMounts=cfg_mount),
            volumes=[
                {
                    "name": "cfg",
                    "configMap": {"name": "settings", "items": [{"key": "absent", "path": "a"}]},
                }
            ],
        ),
        "env-key": pod(
            "env-key",
            ok,
            container("c", "sleep 3600", env=ref("configMapKeyRef", "settings", "absent")),
        ),
        "env-secret": pod(
            "env-secret", container("c", "sleep 3600", env=ref("secretKeyRef", "nope", "k"))
        ),
    }
    for manifest in cases.values():
        kube.core.create_namespaced_pod(NS, manifest)

    wait_waiting(
        kube,
        "no-cm",
        "c",
        "ContainerCreating",
        'MountVolume.SetUp failed for volume "cfg" : configmap "later" not found',
    )
    wait_waiting(
        kube,
        "no-key",
        "c",
        "ContainerCreating",
        'MountVolume.SetUp failed for volume "cfg" : '
        "configmap references non-existent config key: absent",
    )
    wait_waiting(
        kube,
        "env-key",
        "c",
        "CreateContainerConfigError",
        "couldn't find key absent in ConfigMap default/settings",
    )
    wait_waiting(kube, "env-secret", "c", "CreateContainerConfigError", 'secret "nope" not found')
    # The rest of the pod goes on.
    wait_for("the good container of env-key running", lambda: running(kube, "env-key", "ok"))
    mounts_failed = [e for e in node.events() if e["reason"] == "FailedMount"]
    assert any('configmap "later" not found' in e["message"] for e in mounts_failed)

    # An object too large is refused by the API server; the node goes on.
    big = tmp_path / "big"
    big.write_text("x" * (1024 * 1024 + 1))
    refused = kube.kubectl("create", "configmap", "huge", f"--from-file=big={big}", check=False)
    assert refused.returncode != 0 and "Too long" in refused.stderr

    # The missing ConfigMap comes: the waiting pod starts.
    config_map(kube, "later", {"k": "v"})
    node.wait_api_pod("no-cm")
    assert node.all_running()
