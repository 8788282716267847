"""A container's environment on the real containerd: values, $(VAR), the downward API."""

from __future__ import annotations

import os

import pytest

from tests.harness.node import NODE, Pkletd, api_pod, exec_in, wait_for
from tests.supervisor.pods.pod_helpers import (
    container_ids,
    manifest,
    wait_running_container,
    wait_waiting,
)

pytestmark = pytest.mark.slow


def environment(agent: Pkletd, container_id: str) -> dict[str, str]:
    text = exec_in(agent, container_id, "env")
    return dict(line.split("=", 1) for line in text.splitlines() if "=" in line)


def test_values_expansion_and_downward_api(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("envpod", manifest("env-downward"))
    pod = pkletd.wait_running("envpod")
    (cid,) = container_ids(pkletd, "envpod").values()
    env = environment(pkletd, cid)
    status = wait_for("pod IP in the API status", lambda: api_pod(pkletd, "envpod"))["status"]
    name = f"envpod-{NODE}"

    assert env["GREETING"] == "hello"
    assert env["MESSAGE"] == "hello from $(POD_NAME)"  # POD_NAME is defined later: kept
    assert env["ESCAPED"] == "$(GREETING)"
    assert env["UNDEFINED_REF"] == "$(NOT_DEFINED)-x"
    assert env["LATE_REF"] == "$(POD_NAME)"
    assert env["POD_NAME"] == name
    assert env["POD_NAMESPACE"] == "default"
    assert env["POD_UID"] == pod["uid"]
    assert env["APP_LABEL"] == "envpod"
    assert env["NOTE"] == "hello world"
    assert env["NODE_NAME"] == NODE
    assert env["SERVICE_ACCOUNT"] == "builder"
    assert env["HOST_IP"] == env["HOST_IPS"] == status["hostIP"]
    assert env["POD_IP"] == env["POD_IPS"] == status["podIP"]
    assert env["POD_IP"].startswith("10.88.")
    assert env["MEMORY_LIMIT_MI"] == "64"
    assert env["MEMORY_REQUEST"] == str(32 * 2**20)
    assert env["CPU_REQUEST_MILLI"] == "250"
    assert env["CPU_LIMIT"] == str(os.cpu_count())  # no limit: the node's allocatable
    assert "OPTIONAL_KEY" not in env
    assert not any(k.startswith("KUBERNETES_SERVICE") for k in env)  # no API: no services

    # $(VAR) in args against the final environment; $$ escapes; unknown names stay.
    argv = exec_in(pkletd, cid, "cat", "/proc/1/cmdline").split("\0")
    assert argv[3:7] == ["hello", "$(GREETING)", "$(UNDEFINED)", name]


def test_missing_api_objects_fail_the_kubelets_way(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("needsapi", manifest("env-missing-objects"))
    waiting = wait_waiting(pkletd, "needsapi", "from-configmap", "CreateContainerConfigError")
    assert waiting["message"] == 'configmap "app-config" not found'
    waiting = wait_waiting(pkletd, "needsapi", "from-secret", "CreateContainerConfigError")
    assert waiting["message"] == 'secret "db-credentials" not found'
    cid = wait_running_container(pkletd, "needsapi", "optional-only")
    assert "MAYBE" not in environment(pkletd, cid)
    assert pkletd.pod("needsapi")["phase"] == "Pending"  # type: ignore[index]
