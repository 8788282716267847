"""Static pods on the real containerd: add, edit, delete, logs, labels, HTTP."""

from __future__ import annotations

import json
import urllib.request

import pytest

from tests.harness.containerd import list_containers, list_pod_sandboxes
from tests.harness.node import NODE, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow


def sandboxes_of(address: str, pod_name: str) -> list[object]:
    return [s for s in list_pod_sandboxes(address) if s.metadata.name == f"{pod_name}-{NODE}"]


def test_dropped_in_edited_and_deleted(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put(
        "app",
        pod_manifest(
            "app", "trap 'exit 0' TERM; echo hello-from-app; while true; do sleep 1; done"
        ),
    )
    first = pkletd.wait_running("app", timeout=15)
    first_id = first["containers"][0]["container_id"]

    log_dir = pkletd.pod_logs / f"default_app-{NODE}_{first['uid']}" / "c0"
    line = wait_for(
        "container log line",
        lambda: (log_dir / "0.log").exists() and (log_dir / "0.log").read_text(),
    )
    # The CRI log format: RFC3339Nano time, stream, tag, message.
    timestamp, stream, tag, message = line.splitlines()[0].split(" ", 3)
    assert (stream, tag, message) == ("stdout", "F", "hello-from-app")
    assert timestamp.startswith("20")

    pkletd.put(
        "app", pod_manifest("app", "trap 'exit 0' TERM; echo edited; while true; do sleep 1; done")
    )

    def replaced() -> dict[str, object] | None:
        pod = pkletd.pod("app")
        if pod is None or pod["uid"] == first["uid"] or pod["phase"] != "Running":
            return None
        return pod if pod["containers"][0]["state"] == "running" else None

    second = wait_for("edited pod running", replaced, timeout=20)
    assert second["containers"][0]["container_id"] != first_id
    wait_for(
        "old sandbox removed",
        lambda: (
            not [s for s in sandboxes_of(pkletd.endpoint, "app") if s.metadata.uid == first["uid"]]
        ),
    )

    pkletd.remove("app")
    wait_for("pod gone from status", lambda: pkletd.pod("app") is None, timeout=20)
    wait_for("sandbox removed", lambda: not sandboxes_of(pkletd.endpoint, "app"), timeout=20)


def test_kubelet_labels_and_annotations(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("labelled", pod_manifest("labelled"))
    pod = pkletd.wait_running("labelled")
    (sandbox,) = sandboxes_of(pkletd.endpoint, "labelled")
    assert sandbox.labels["io.kubernetes.pod.name"] == f"labelled-{NODE}"
    assert sandbox.labels["io.kubernetes.pod.namespace"] == "default"
    assert sandbox.labels["io.kubernetes.pod.uid"] == pod["uid"]
    assert sandbox.labels["test"] == "labelled"
    assert sandbox.annotations["kubernetes.io/config.source"] == "file"
    (container,) = [c for c in list_containers(pkletd.endpoint) if c.pod_sandbox_id == sandbox.id]
    assert container.labels["io.kubernetes.container.name"] == "c0"
    assert container.labels["io.kubernetes.pod.uid"] == pod["uid"]
    assert container.annotations["io.kubernetes.container.restartCount"] == "0"
    assert len(container.annotations["io.kubernetes.container.hash"]) == 8


def test_pod_network_and_http_endpoints(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("netpod", pod_manifest("netpod", host_network=False))
    pkletd.wait_running("netpod")
    with urllib.request.urlopen(
        f"http://127.0.0.1:{pkletd.healthz_port}/healthz", timeout=5
    ) as reply:
        assert reply.read() == b"ok"

    def listed() -> dict[str, object] | None:
        url = f"http://127.0.0.1:{pkletd.read_only_port}/pods"
        with urllib.request.urlopen(url, timeout=5) as reply:
            pods = json.load(reply)
        assert pods["kind"] == "PodList"
        found = [p for p in pods["items"] if p["metadata"]["name"] == f"netpod-{NODE}"]
        return found[0] if found and found[0]["status"].get("podIP") else None

    pod = wait_for("pod with IP in /pods", listed)
    status = pod["status"]
    assert status["phase"] == "Running"
    assert status["podIP"].startswith("10.88.")
    assert status["qosClass"] == "BestEffort"
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions == {
        "PodReadyToStartContainers": "True",
        "Initialized": "True",
        "Ready": "True",
        "ContainersReady": "True",
        "PodScheduled": "True",
    }
    (container,) = status["containerStatuses"]
    assert container["ready"] and container["started"] and container["restartCount"] == 0
    assert container["containerID"].startswith("containerd://")
    assert container["imageID"].startswith("sha256:")


def test_stop_leaves_pods_running(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("survivor", pod_manifest("survivor"))
    pod = pkletd.wait_running("survivor")
    assert pkletd.cli("stop").returncode == 0
    assert pkletd.proc is not None and pkletd.proc.wait(timeout=30) == 0
    running = [c for c in list_containers(pkletd.endpoint) if c.state == 1]  # CONTAINER_RUNNING
    assert pod["containers"][0]["container_id"] in [c.id for c in running]
