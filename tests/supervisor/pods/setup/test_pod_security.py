"""Security contexts on the real containerd: users and groups, fsGroup, capabilities,
no_new_privs, seccomp, read-only root, runAsNonRoot refusals, sysctls, privileged."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.node import NODE, Pkletd, api_pod, exec_in, pod_manifest, wait_for
from tests.supervisor.pods.pod_helpers import container_ids, manifest, proc_status, wait_waiting

pytestmark = pytest.mark.slow

CAP_NET_BIND_SERVICE = 1 << 10


def refused(agent: Pkletd, container_id: str, *command: str) -> str:
    with pytest.raises(AssertionError) as failure:
        exec_in(agent, container_id, *command)
    return str(failure.value)


def mount_points(agent: Pkletd, container_id: str) -> set[str]:
    text = exec_in(agent, container_id, "cat", "/proc/1/mountinfo")
    return {line.split()[4] for line in text.splitlines()}


def test_users_groups_capabilities_and_read_only_root(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("secured", manifest("security-context"))
    pkletd.wait_running("secured")
    ids = container_ids(pkletd, "secured")
    app = ids["app"]

    ident = exec_in(pkletd, app, "id").split()
    assert ident[:2] == ["uid=1000", "gid=3000"]
    groups = {int(g.split("(")[0]) for g in ident[2].removeprefix("groups=").split(",")}
    assert {2000, 4000} <= groups  # fsGroup and supplementalGroups

    # fsGroup on the emptyDir: its group, setgid, and new files inherit the group.
    assert exec_in(pkletd, app, "stat", "-c", "%g %A", "/scratch") == "2000 drwxrwsrwx\n"
    exec_in(pkletd, app, "touch", "/scratch/new")
    assert exec_in(pkletd, app, "stat", "-c", "%u %g", "/scratch/new") == "1000 2000\n"

    status = proc_status(pkletd, app)
    assert int(status["CapBnd"], 16) == CAP_NET_BIND_SERVICE  # drop ALL, add one
    assert int(status["CapEff"], 16) == 0  # a non-root user keeps none across exec (no ambient)
    assert status["NoNewPrivs"] == "1"  # allowPrivilegeEscalation: false
    assert status["Seccomp"] == "2"  # RuntimeDefault from the pod

    assert "Read-only file system" in refused(pkletd, app, "touch", "/rootfs-file")

    # The container's own fields win over the pod's.
    override = ids["override"]
    assert exec_in(pkletd, override, "id", "-u") == "1500\n"
    status = proc_status(pkletd, override)
    assert status["Seccomp"] == "0"  # Unconfined
    assert status["NoNewPrivs"] == "0"

    # As root the added capability is effective.
    status = proc_status(pkletd, ids["rootcaps"])
    assert int(status["CapEff"], 16) == int(status["CapBnd"], 16) == CAP_NET_BIND_SERVICE
    exec_in(pkletd, ids["rootcaps"], "touch", "/rootfs-file")  # its root file system is writable

    # The safe sysctl is set in the pod's network namespace.
    port_range = exec_in(pkletd, app, "cat", "/proc/sys/net/ipv4/ip_local_port_range")
    assert port_range.split() == ["20000", "20999"]


def test_defaults_without_a_security_context(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("plain", pod_manifest("plain"))
    pkletd.wait_running("plain")
    (cid,) = container_ids(pkletd, "plain").values()
    assert exec_in(pkletd, cid, "id", "-u") == "0\n"
    status = proc_status(pkletd, cid)
    assert status["Seccomp"] == "0"  # seccompDefault off: Unconfined, as the kubelet
    assert status["NoNewPrivs"] == "0"
    assert exec_in(pkletd, cid, "cat", "/proc/1/comm") == "sh\n"  # its own PID namespace
    # procMount Default: the runtime's masked and read-only paths.
    assert {"/proc/keys", "/proc/acpi", "/proc/timer_list"} <= mount_points(pkletd, cid)
    assert "Read-only file system" in refused(
        pkletd, cid, "sh", "-c", "echo 1 > /proc/sys/kernel/domainname"
    )


def non_root_pod(name: str, pod_sc: dict[str, Any], container_sc: dict[str, Any]) -> Any:
    pod = pod_manifest(name)
    pod["spec"]["securityContext"] = pod_sc
    pod["spec"]["containers"][0]["securityContext"] = container_sc
    return pod


def test_run_as_non_root_refusals(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("rootimage", non_root_pod("rootimage", {"runAsNonRoot": True}, {}))
    pkletd.put("rootuser", non_root_pod("rootuser", {"runAsNonRoot": True}, {"runAsUser": 0}))
    pkletd.put("nonroot", non_root_pod("nonroot", {"runAsNonRoot": True}, {"runAsUser": 1234}))

    uid = pkletd.wait_phase("rootimage", "Pending")["uid"]
    waiting = wait_waiting(pkletd, "rootimage", "c0", "CreateContainerConfigError")
    assert waiting["message"] == (
        "container has runAsNonRoot and image will run as root "
        f'(pod: "rootimage-{NODE}_default({uid})", container: c0)'
    )
    uid = pkletd.wait_phase("rootuser", "Pending")["uid"]
    waiting = wait_waiting(pkletd, "rootuser", "c0", "CreateContainerConfigError")
    assert waiting["message"] == (
        f"container's runAsUser breaks non-root policy "
        f'(pod: "rootuser-{NODE}_default({uid})", container: c0)'
    )
    pkletd.wait_running("nonroot")
    (cid,) = container_ids(pkletd, "nonroot").values()
    assert exec_in(pkletd, cid, "id", "-u") == "1234\n"


def test_unsafe_sysctl_is_forbidden(pkletd: Pkletd) -> None:
    pkletd.start()
    unsafe = pod_manifest("unsafe", host_network=False)
    unsafe["spec"]["securityContext"] = {"sysctls": [{"name": "kernel.msgmax", "value": "1"}]}
    hostnet = pod_manifest("hostnet", host_network=True)
    hostnet["spec"]["securityContext"] = {
        "sysctls": [{"name": "net.ipv4.tcp_syncookies", "value": "1"}]
    }
    pkletd.put("unsafe", unsafe)
    pkletd.put("hostnet", hostnet)
    for name, message in [
        ("unsafe", 'forbidden sysctl: "kernel.msgmax" not allowlisted'),
        (
            "hostnet",
            'forbidden sysctl: "net.ipv4.tcp_syncookies" not allowed with host net enabled',
        ),
    ]:
        # Rejected at admission, as the kubelet does: Failed, never run.
        status = wait_for(
            f"{name} rejected",
            lambda n=name: (p := api_pod(pkletd, n)) and p["status"]["phase"] == "Failed" and p,
        )["status"]
        assert status["reason"] == "SysctlForbidden"
        assert message in status["message"]
        assert pkletd.pod(name)["containers"][0]["container_id"] == ""  # type: ignore[index]


def test_privileged_container(pkletd: Pkletd) -> None:
    pkletd.start()
    pod = pod_manifest("privileged", containers=2)
    pod["spec"]["containers"][0]["securityContext"] = {"privileged": True}
    pkletd.put("privileged", pod)
    pkletd.wait_running("privileged")
    ids = container_ids(pkletd, "privileged")
    full = proc_status(pkletd, ids["c0"])
    plain = proc_status(pkletd, ids["c1"])
    assert full["CapEff"] == full["CapBnd"]
    assert int(full["CapEff"], 16) > int(plain["CapEff"], 16)
    assert "/proc/keys" not in mount_points(pkletd, ids["c0"])  # nothing masked
    assert "/proc/keys" in mount_points(pkletd, ids["c1"])
