"""Termination messages without a runtime: the file each container instance gets, and what
an exited container's status says (the file's end, or the end of its log under
FallbackToLogsOnError)."""

from __future__ import annotations

import stat
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.ipc.runtime.cri import ContainerID, ContainerInfo, ContainerState, SandboxID
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup import runtimespec, terminationlog

TARGET = "/dev/termination-log"


def pod(**container: Any) -> Any:
    return parse_pod(
        {
            "metadata": {"name": "p", "uid": "uid-1"},
            "spec": {"containers": [{"name": "c", "image": "x", **container}]},
        }
    )


def exited(
    host: Path | None,
    exit_code: int = 1,
    policy: str = "File",
    message: str = "",
    log: Path | None = None,
    reason: str = "Error",
) -> ContainerInfo:
    return ContainerInfo(
        ContainerID("c1"),
        SandboxID("s1"),
        "c",
        0,
        ContainerState.EXITED,
        0,
        "x",
        "x",
        {},
        {
            runtimespec.TERMINATION_MESSAGE_PATH: TARGET,
            runtimespec.TERMINATION_MESSAGE_POLICY: policy,
        },
        exit_code=exit_code,
        reason=reason,
        message=message,
        mounts=((TARGET, str(host)),) if host is not None else (),
        log_path=str(log) if log is not None else "",
    )


def cri_log(path: Path, *lines: tuple[str, str, str]) -> Path:
    path.write_text("".join(f"2026-01-01T00:00:00.0Z {s} {t} {text}\n" for s, t, text in lines))
    return path


def test_each_instance_gets_a_file_mounted_at_its_path(tmp_path: Path) -> None:
    node = NodeInfo("n", (), tmp_path)
    p = pod()
    first = terminationlog.mount(node, p, p.containers[0])
    second = terminationlog.mount(node, p, p.containers[0])
    assert first is not None and second is not None
    assert first.container_path == TARGET and not first.readonly
    host = Path(first.host_path)
    assert host.parent == tmp_path / "pods" / "uid-1" / "containers" / "c"
    assert len(host.name) == 8 and int(host.name, 16) >= 0
    assert stat.S_IMODE(host.stat().st_mode) == 0o666 and host.read_bytes() == b""
    assert second.host_path != first.host_path  # a new file for each instance

    custom = pod(terminationMessagePath="var/msg")
    assert terminationlog.mount(node, custom, custom.containers[0]).container_path == "/var/msg"  # type: ignore[union-attr]
    none = pod(terminationMessagePath="")
    assert terminationlog.mount(node, none, none.containers[0]) is None


def test_the_annotations_carry_the_path_and_policy() -> None:
    p = pod(terminationMessagePath="/tmp/why", terminationMessagePolicy="FallbackToLogsOnError")
    spec = runtimespec.container_spec(p, p.containers[0], 0)
    assert spec.annotations[runtimespec.TERMINATION_MESSAGE_PATH] == "/tmp/why"
    assert spec.annotations[runtimespec.TERMINATION_MESSAGE_POLICY] == "FallbackToLogsOnError"
    with pytest.raises(InvalidPod, match="terminationMessagePolicy: unsupported value 'Logs'"):
        pod(terminationMessagePolicy="Logs")


def test_the_message_is_what_the_container_left(tmp_path: Path) -> None:
    host = tmp_path / "msg"
    host.write_text("bye")
    assert terminationlog.message(exited(host)) == "bye"
    assert terminationlog.message(exited(host, message="OOMKilled")) == "OOMKilled: bye"
    host.write_bytes(b"x" * 5000 + b"end")
    assert terminationlog.message(exited(host)) == ("x" * 5000 + "end")[-4096:]
    assert terminationlog.message(exited(tmp_path / "gone", message="m")) == "m"
    assert terminationlog.message(exited(None, message="m")) == "m"


def test_fallback_to_logs_on_error(tmp_path: Path) -> None:
    host = tmp_path / "msg"
    host.write_text("")
    log = cri_log(
        tmp_path / "0.log",
        ("stdout", "F", "starting"),
        ("stderr", "P", "par"),
        ("stderr", "F", "tial failure"),
    )
    policy = "FallbackToLogsOnError"
    assert terminationlog.message(exited(host, 1, policy, log=log)) == (
        "starting\npartial failure\n"
    )
    assert terminationlog.message(exited(host, 0, policy, log=log)) == ""  # it succeeded
    assert terminationlog.message(exited(host, 1, "File", log=log)) == ""  # not asked
    cannot_run = exited(host, 128, policy, log=log, reason="ContainerCannotRun")
    assert terminationlog.message(cannot_run) == ""
    host.write_text("written")
    assert terminationlog.message(exited(host, 1, policy, log=log)) == "written"  # first


def test_log_tail_keeps_the_last_80_lines_and_2_kib(tmp_path: Path) -> None:
    log = cri_log(tmp_path / "0.log", *[("stdout", "F", f"line {i}") for i in range(200)])
    tail = terminationlog.log_tail(log)
    assert tail.splitlines()[0] == "line 120" and tail.endswith("line 199\n")
    long = cri_log(tmp_path / "1.log", *[("stdout", "F", "y" * 100) for _ in range(80)])
    assert len(terminationlog.log_tail(long)) == 2048
    assert terminationlog.log_tail(tmp_path / "none.log").startswith(
        "Error on reading termination message from logs: "
    )
