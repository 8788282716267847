"""The pod's namespaces on the real containerd, read from inside the containers: the host's
PID 1 from a hostPID pod and not from the others, another container's process under
shareProcessNamespace, the host's SysV shared memory under hostIPC; and what the node cannot
give (hostUsers: false, AppArmor on a host without it) refused at admission."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator
from typing import Any

import pytest

from tests.harness.node import Pkletd, api_pod, exec_in, pod_manifest, wait_for
from tests.supervisor.pods.pod_helpers import container_ids

pytestmark = pytest.mark.slow

MARKER = "sleep 86421"  # a process only the second container runs


def namespace(agent: Pkletd, container_id: str, kind: str) -> str:
    """The namespace a container's processes live in (``pid:[4026531836]``)."""
    return exec_in(agent, container_id, "readlink", f"/proc/self/ns/{kind}").strip()


def host_namespace(kind: str) -> str:
    return os.readlink(f"/proc/self/ns/{kind}")


def two_containers(name: str, **spec: Any) -> dict[str, Any]:
    pod = pod_manifest(name, containers=2)
    pod["spec"]["containers"][1]["command"] = ["sh", "-c", f"exec {MARKER}"]
    pod["spec"].update(spec)
    return pod


def test_host_pid_sees_the_hosts_processes_and_a_plain_pod_its_own(pkletd: Pkletd) -> None:
    host = pod_manifest("hostpid")
    host["spec"]["hostPID"] = True
    pkletd.put("hostpid", host)
    pkletd.put("ownpid", pod_manifest("ownpid"))
    pkletd.start()
    pkletd.wait_running("hostpid")
    pkletd.wait_running("ownpid")
    (in_host,) = container_ids(pkletd, "hostpid").values()
    (in_own,) = container_ids(pkletd, "ownpid").values()

    with open("/proc/1/cmdline", "rb") as init:
        host_init = init.read().decode()
    assert exec_in(pkletd, in_host, "cat", "/proc/1/cmdline") == host_init
    assert namespace(pkletd, in_host, "pid") == host_namespace("pid")
    exec_in(pkletd, in_host, "test", "-d", f"/proc/{os.getpid()}")  # it sees this test

    own_init = exec_in(pkletd, in_own, "cat", "/proc/1/cmdline")
    assert own_init.split("\0")[:2] == ["sh", "-c"]  # its own command is PID 1
    assert own_init != host_init
    assert namespace(pkletd, in_own, "pid") != host_namespace("pid")


def test_share_process_namespace_shows_the_other_containers_processes(pkletd: Pkletd) -> None:
    pkletd.put("shared", two_containers("shared", shareProcessNamespace=True))
    pkletd.put("apart", two_containers("apart"))
    pkletd.start()
    pkletd.wait_running("shared")
    pkletd.wait_running("apart")

    shared = container_ids(pkletd, "shared")
    assert MARKER in exec_in(pkletd, shared["c0"], "ps", "-o", "args")
    assert namespace(pkletd, shared["c0"], "pid") == namespace(pkletd, shared["c1"], "pid")
    assert namespace(pkletd, shared["c0"], "pid") != host_namespace("pid")
    # PID 1 is the sandbox's, not either container's
    assert exec_in(pkletd, shared["c0"], "cat", "/proc/1/cmdline").split("\0")[:2] != ["sh", "-c"]

    apart = container_ids(pkletd, "apart")
    assert MARKER not in exec_in(pkletd, apart["c0"], "ps", "-o", "args")
    assert namespace(pkletd, apart["c0"], "pid") != namespace(pkletd, apart["c1"], "pid")


@pytest.fixture
def host_segment() -> Iterator[str]:
    """A SysV shared memory segment made on the host (ipcmk); its id."""
    made = subprocess.run(["ipcmk", "-M", "4096"], capture_output=True, text=True, check=True)
    segment = made.stdout.split(":")[-1].strip()
    try:
        yield segment
    finally:
        subprocess.run(["ipcrm", "-m", segment], check=False)


def shm_ids(agent: Pkletd, container_id: str) -> set[str]:
    lines = exec_in(agent, container_id, "cat", "/proc/sysvipc/shm").splitlines()[1:]
    return {line.split()[1] for line in lines}


def test_host_ipc_sees_the_hosts_shared_memory(pkletd: Pkletd, host_segment: str) -> None:
    host = pod_manifest("hostipc")
    host["spec"]["hostIPC"] = True
    pkletd.put("hostipc", host)
    pkletd.put("ownipc", pod_manifest("ownipc"))
    pkletd.start()
    pkletd.wait_running("hostipc")
    pkletd.wait_running("ownipc")
    (in_host,) = container_ids(pkletd, "hostipc").values()
    (in_own,) = container_ids(pkletd, "ownipc").values()

    assert host_segment in shm_ids(pkletd, in_host)
    assert namespace(pkletd, in_host, "ipc") == host_namespace("ipc")
    assert host_segment not in shm_ids(pkletd, in_own)
    assert namespace(pkletd, in_own, "ipc") != host_namespace("ipc")


def rejected(agent: Pkletd, name: str) -> dict[str, Any]:
    found = wait_for(
        f"{name} rejected",
        lambda: (p := api_pod(agent, name)) and p["status"]["phase"] == "Failed" and p,
    )
    status: dict[str, Any] = found["status"]
    return status


def test_what_the_node_cannot_give_is_refused_at_admission(pkletd: Pkletd) -> None:
    nouserns = pod_manifest("nouserns")
    nouserns["spec"]["hostUsers"] = False
    pkletd.put("nouserns", nouserns)
    ipc_sysctl = pod_manifest("ipcsysctl")
    ipc_sysctl["spec"]["hostIPC"] = True
    ipc_sysctl["spec"]["securityContext"] = {
        "sysctls": [{"name": "kernel.shm_rmid_forced", "value": "1"}]
    }
    pkletd.put("ipcsysctl", ipc_sysctl)
    confined = pod_manifest("confined")
    confined["spec"]["securityContext"] = {"appArmorProfile": {"type": "RuntimeDefault"}}
    pkletd.put("confined", confined)
    pkletd.start()

    status = rejected(pkletd, "nouserns")
    assert status["reason"] == "PodFeatureUnsupported"
    assert status["message"] == (
        "Pod was rejected: can't set `spec.hostUsers: false`, runtime does not support user "
        "namespaces"
    )
    status = rejected(pkletd, "ipcsysctl")
    assert status["reason"] == "SysctlForbidden"
    assert status["message"] == (
        'Pod was rejected: forbidden sysctl: "kernel.shm_rmid_forced" not allowed with host '
        "ipc enabled"
    )
    if os.path.exists("/sys/module/apparmor/parameters/enabled"):
        pytest.skip("this host has AppArmor: the refusal is for hosts without it")
    status = rejected(pkletd, "confined")
    assert status["reason"] == "AppArmor"
    assert status["message"] == (
        "Pod was rejected: Cannot enforce AppArmor: AppArmor is not enabled on the host"
    )
    for name in ("nouserns", "ipcsysctl", "confined"):
        assert pkletd.pod(name)["containers"][0]["container_id"] == ""  # type: ignore[index]
    reasons = {e["reason"] for e in pkletd.events()}
    assert {"PodFeatureUnsupported", "SysctlForbidden", "AppArmor"} <= reasons
