"""The CRI container config of an ephemeral container with a target: PID namespace TARGET
with the target's id, where the pod would give the container its own."""

from __future__ import annotations

from pkletd.ipc.runtime import cri
from pkletd.ipc.runtime.cri import ContainerSpec


def pid_of(spec: ContainerSpec) -> tuple[int, str]:
    options = cri._container_config(spec).linux.security_context.namespace_options
    return options.pid, options.target_id


def test_a_target_makes_the_pid_namespace_the_targets() -> None:
    spec = ContainerSpec("debugger", 0, "busybox", "debugger/0.log", target_id="c0ffee")
    assert pid_of(spec) == (cri.pb.TARGET, "c0ffee")


def test_without_a_target_the_container_has_its_own() -> None:
    assert pid_of(ContainerSpec("app", 0, "busybox", "app/0.log")) == (cri.pb.CONTAINER, "")


def test_a_pod_wide_pid_mode_wins_over_the_target() -> None:
    for mode in (cri.pb.POD, cri.pb.NODE):  # shareProcessNamespace, hostPID
        options = cri.pb.NamespaceOption(pid=mode)
        cri._target_pid(options, "c0ffee")
        assert (options.pid, options.target_id) == (mode, "")
