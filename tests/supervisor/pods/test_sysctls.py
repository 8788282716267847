"""The sysctl allowlist without a runtime: the safe set by kernel, allowedUnsafeSysctls,
the host's network and IPC namespaces, and the configuration's refusals."""

from __future__ import annotations

import argparse
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import parse_pod
from pkletd.supervisor import config
from pkletd.supervisor.config import ConfigError
from pkletd.supervisor.pods import admission, sysctls
from pkletd.supervisor.pods.events import Reason
from pkletd.supervisor.pods.sysctls import Allowlist

KERNEL = (6, 1)


def pod(*names: str, **spec: Any) -> Any:
    return parse_pod(
        {
            "metadata": {"name": "web", "uid": "u-1"},
            "spec": {
                "securityContext": {"sysctls": [{"name": n, "value": "1"} for n in names]},
                "containers": [{"name": "c", "image": "x"}],
                **spec,
            },
        }
    )


def forbidden(p: Any, unsafe: tuple[str, ...] = (), kernel: tuple[int, ...] = KERNEL) -> Any:
    return sysctls.forbidden(p, Allowlist.of(unsafe, kernel))


@pytest.mark.parametrize(
    ("sysctl", "spec", "kernel", "message"),
    [
        ("net.ipv4.ip_local_port_range", {}, KERNEL, None),
        ("net/ipv4/ip_local_port_range", {}, KERNEL, None),  # slashes normalised
        ("kernel.shm_rmid_forced", {"hostNetwork": True}, KERNEL, None),  # ipc, not net
        (
            "kernel.shm_rmid_forced",
            {"hostIPC": True},
            KERNEL,
            '"kernel.shm_rmid_forced" not allowed with host ipc enabled',
        ),
        ("net.ipv4.tcp_syncookies", {"hostIPC": True}, KERNEL, None),  # net, not ipc
        (
            "net.ipv4.tcp_keepalive_time",
            {},
            (4, 4),
            '"net.ipv4.tcp_keepalive_time" not allowlisted',
        ),
        ("net.ipv4.tcp_keepalive_time", {}, (4, 5), None),
        ("kernel.msgmax", {}, KERNEL, '"kernel.msgmax" not allowlisted'),
        ("net.core.somaxconn", {}, KERNEL, '"net.core.somaxconn" not allowlisted'),
        (
            "net.ipv4.tcp_syncookies",
            {"hostNetwork": True},
            KERNEL,
            '"net.ipv4.tcp_syncookies" not allowed with host net enabled',
        ),
    ],
)
def test_safe_sysctls(
    sysctl: str, spec: dict[str, Any], kernel: tuple[int, ...], message: str | None
) -> None:
    found = forbidden(pod(sysctl, **spec), kernel=kernel)
    assert found == (None if message is None else f"forbidden sysctl: {message}")


@pytest.mark.parametrize(
    ("sysctl", "unsafe", "spec", "message"),
    [
        ("kernel.msgmax", ("kernel.msgmax",), {}, None),
        ("kernel.msgmax", ("kernel.msg*",), {}, None),
        ("kernel/msgmax", ("kernel/msg*",), {}, None),  # both normalised
        ("kernel.msgmnb", ("kernel.msgmax",), {}, '"kernel.msgmnb" not allowlisted'),
        ("net.core.somaxconn", ("net.*",), {}, None),
        (
            "net.core.somaxconn",
            ("net.*",),
            {"hostNetwork": True},
            '"net.core.somaxconn" not allowed with host net enabled',
        ),
        (
            "fs.mqueue.msg_max",
            ("fs.mqueue.*",),
            {"hostIPC": True},
            '"fs.mqueue.msg_max" not allowed with host ipc enabled',
        ),
        ("kernel.sem", ("kernel.sem",), {}, None),
    ],
)
def test_allowed_unsafe_sysctls(
    sysctl: str, unsafe: tuple[str, ...], spec: dict[str, Any], message: str | None
) -> None:
    found = forbidden(pod(sysctl, **spec), unsafe)
    assert found == (None if message is None else f"forbidden sysctl: {message}")


def test_the_first_refused_sysctl_is_the_reason() -> None:
    p = pod("net.ipv4.tcp_syncookies", "kernel.msgmax", "net.core.somaxconn")
    assert forbidden(p) == 'forbidden sysctl: "kernel.msgmax" not allowlisted'


def test_admission_refuses_with_sysctl_forbidden() -> None:
    node = admission.Node(
        "n",
        10,
        {"cpu": 1000, "memory": 2**30, "ephemeral-storage": 2**30},
        allowed_sysctls=Allowlist.of(("kernel.msg*",), KERNEL),
    )
    assert admission.admit(pod("kernel.msgmax"), [], node) is None
    refused = admission.admit(pod("kernel.msgmax", hostIPC=True), [], node)
    assert refused == admission.Rejection(
        Reason.SYSCTL_FORBIDDEN,
        'forbidden sysctl: "kernel.msgmax" not allowed with host ipc enabled',
    )


def load(*argv: str) -> config.KubeletConfig:
    parser = argparse.ArgumentParser()
    config.add_flags(parser)
    return config.load(parser.parse_args(argv)).config


def test_configuration_file_and_flag(tmp_path: Any) -> None:
    path = tmp_path / "kubelet.yaml"
    path.write_text(
        "apiVersion: kubelet.config.k8s.io/v1beta1\nkind: KubeletConfiguration\n"
        "allowedUnsafeSysctls: [kernel.msg*, net/core/somaxconn]\nseccompDefault: true\n"
    )
    loaded = load("--config", str(path))
    assert loaded.allowed_unsafe_sysctls == ("kernel.msg*", "net.core.somaxconn")
    assert loaded.seccomp_default is True
    flagged = load(
        "--config", str(path), "--allowed-unsafe-sysctls", "kernel.sem, fs.mqueue.*",
        "--seccomp-default", "false",
    )  # fmt: skip
    assert flagged.allowed_unsafe_sysctls == ("kernel.sem", "fs.mqueue.*")
    assert flagged.seccomp_default is False
    assert load().allowed_unsafe_sysctls == () and load().seccomp_default is False


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (
            "kernel.hostname",
            '--allowed-unsafe-sysctls: the sysctl "kernel.hostname" are not known to be namespaced',
        ),
        (
            "vm.*",
            '--allowed-unsafe-sysctls: the sysctls "vm.*" are not known to be namespaced',
        ),
        ("Net.Core", '--allowed-unsafe-sysctls: sysctl "Net.Core" must have at most 253 '),
    ],
)
def test_a_sysctl_the_kernel_does_not_namespace_stops_the_start(value: str, message: str) -> None:
    with pytest.raises(ConfigError) as error:
        load("--allowed-unsafe-sysctls", value)
    assert str(error.value).startswith(message)
