"""seccompDefault and allowedUnsafeSysctls on the real containerd: a container naming no
seccomp profile runs under the runtime's default, one naming Unconfined does not, and an
allowed unsafe sysctl is set in the pod's IPC namespace while another stays forbidden."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.node import Pkletd, api_pod, exec_in, pod_manifest, wait_for
from tests.supervisor.pods.pod_helpers import container_ids, proc_status

pytestmark = pytest.mark.slow


def with_security(name: str, pod_sc: dict[str, Any]) -> dict[str, Any]:
    pod = pod_manifest(name)
    pod["spec"]["securityContext"] = pod_sc
    return pod


def test_seccomp_default_and_allowed_unsafe_sysctls(pkletd: Pkletd) -> None:
    pkletd.write_config(seccompDefault=True, allowedUnsafeSysctls=["kernel.msg*"])
    pkletd.put("plain", pod_manifest("plain"))
    pkletd.put(
        "unconfined", with_security("unconfined", {"seccompProfile": {"type": "Unconfined"}})
    )
    pkletd.put(
        "tuned", with_security("tuned", {"sysctls": [{"name": "kernel.msgmax", "value": "12345"}]})
    )
    pkletd.put(
        "semaphores",
        with_security("semaphores", {"sysctls": [{"name": "kernel.sem", "value": "1 2 3 4"}]}),
    )
    pkletd.start()
    for name in ("plain", "unconfined", "tuned"):
        pkletd.wait_running(name)

    (plain,) = container_ids(pkletd, "plain").values()
    assert proc_status(pkletd, plain)["Seccomp"] == "2"  # RuntimeDefault: seccompDefault
    (unconfined,) = container_ids(pkletd, "unconfined").values()
    assert proc_status(pkletd, unconfined)["Seccomp"] == "0"
    (tuned,) = container_ids(pkletd, "tuned").values()
    assert exec_in(pkletd, tuned, "cat", "/proc/sys/kernel/msgmax") == "12345\n"

    refused = wait_for(
        "semaphores rejected",
        lambda: (p := api_pod(pkletd, "semaphores")) and p["status"]["phase"] == "Failed" and p,
    )
    assert refused["status"]["reason"] == "SysctlForbidden"
    assert refused["status"]["message"] == (
        'Pod was rejected: forbidden sysctl: "kernel.sem" not allowlisted'
    )
