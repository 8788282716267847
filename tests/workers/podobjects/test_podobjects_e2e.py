"""The pod-objects worker in a real pkletd on the real containerd, joined to the real control
plane: a pod with a ConfigMap volume, a Secret variable, the service variables and the
default service account volume runs; a ConfigMap change reaches the running container;
a SIGKILLed pod-objects worker disturbs nothing and is back following changes."""

from __future__ import annotations

import base64
import os
import signal
from typing import Any

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, exec_in, join, wait_for

pytestmark = pytest.mark.slow

TOKEN_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"


def container_of(agent: Pkletd) -> tuple[str, int]:
    """The reader's container: its id and restart count."""
    (container,) = agent.pods()["reader"]["containers"]
    return container["container_id"], container["restart_count"]


def reader(node: str) -> dict[str, Any]:
    env = [{"name": "PW", "valueFrom": {"secretKeyRef": {"name": "creds", "key": "pw"}}}]
    return {
        "metadata": {"name": "reader", "namespace": "default"},
        "spec": {
            "nodeName": node,
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "conf", "configMap": {"name": "conf"}}],
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
                    "env": env,
                    "volumeMounts": [{"name": "conf", "mountPath": "/etc/conf"}],
                }
            ],
        },
    }


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def test_a_pod_reads_its_objects_and_survives_a_killed_worker(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "conf"}, "data": {"greeting": "hello"}}
    )
    secret = {"pw": base64.b64encode(b"s3cret").decode()}
    kube.core.create_namespaced_secret("default", {"metadata": {"name": "creds"}, "data": secret})
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", reader(pkletd.node))
    pkletd.wait_api_pod("reader")
    container, _ = container_of(pkletd)

    assert exec_in(pkletd, container, "cat", "/etc/conf/greeting") == "hello"
    env = exec_in(pkletd, container, "sh", "-c", 'echo "$PW $KUBERNETES_SERVICE_HOST"')
    assert env == "s3cret 10.96.0.1\n"
    assert exec_in(pkletd, container, "cat", f"{TOKEN_DIR}/namespace") == "default"
    assert exec_in(pkletd, container, "cat", f"{TOKEN_DIR}/token").count(".") == 2

    def greeting_becomes(text: str) -> None:
        kube.core.patch_namespaced_config_map("conf", "default", {"data": {"greeting": text}})
        wait_for(
            f"the container to read {text}",
            lambda: exec_in(pkletd, container, "cat", "/etc/conf/greeting") == text,
            timeout=10,
        )

    greeting_becomes("changed")
    os.kill(pkletd.workers()["pod-objects"]["pid"], signal.SIGKILL)
    wait_for("pod-objects back", pkletd.all_running, timeout=30)
    greeting_becomes("after the kill")
    assert container_of(pkletd) == (container, 0)  # never restarted
    logs = b"".join(path.read_bytes() for path in pkletd.log_dir.glob("*.log"))
    assert b"s3cret" not in logs and secret["pw"].encode() not in logs
