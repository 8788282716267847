"""The kubelet API finds ephemeral containers as it finds the others: exec and attach by
their status in ephemeralContainerStatuses (attach with their own tty), logs by their
restart count and log path."""

from __future__ import annotations

from typing import Any

from pkletd.workers.http.containerlogs import log_file
from pkletd.workers.http.streaming import container_spec, running_container

ID = "c0ffee"


def debugged_pod(state: dict[str, Any]) -> dict[str, Any]:
    return {
        "metadata": {"name": "web", "namespace": "default", "uid": "u1"},
        "spec": {
            "containers": [{"name": "app", "image": "busybox"}],
            "ephemeralContainers": [
                {"name": "debugger", "image": "busybox", "tty": True, "stdin": True}
            ],
        },
        "status": {
            "containerStatuses": [{"name": "app", "state": {"running": {}}, "restartCount": 0,
                                   "containerID": "containerd://app1"}],
            "ephemeralContainerStatuses": [{"name": "debugger", "state": state,
                                            "restartCount": 0,
                                            "containerID": f"containerd://{ID}"}],
        },
    }  # fmt: skip


def test_exec_and_attach_find_a_running_one() -> None:
    pod = debugged_pod({"running": {"startedAt": "2026-01-01T00:00:00Z"}})
    assert running_container(pod, "debugger", "") == ID
    assert running_container(pod, "debugger", "u1") == ID
    assert container_spec(pod, "debugger")["tty"] is True  # attach uses its own terminal
    ended = debugged_pod({"terminated": {"exitCode": 0, "containerID": f"containerd://{ID}"}})
    assert running_container(ended, "debugger", "") is None


def test_logs_are_read_from_its_own_log_file() -> None:
    ended = debugged_pod({"terminated": {"exitCode": 0, "containerID": f"containerd://{ID}"}})
    found = log_file("/var/log/pods", ended, "debugger", previous=False)
    assert found.path == "/var/log/pods/default_web_u1/debugger/0.log"
    assert found.container_id == f"containerd://{ID}"
