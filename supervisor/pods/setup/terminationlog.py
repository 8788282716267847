"""A container's termination message, as the kubelet makes and reads it.

``mount``: each container instance gets an empty file, mode 0666, under
``<root-dir>/pods/<uid>/containers/<name>/<8 hex digits>``, mounted read-write at its
``terminationMessagePath`` (``kuberuntime_container.go makeMounts``); none when the path
is empty. The path and ``terminationMessagePolicy`` travel as the container's CRI
annotations, so a restarted parent reads them back.

``message``: when the container has exited, the last 4 KiB of that file (found through
the mounts the runtime reports) follow the runtime's own message after ": "
(``toKubeContainerStatus``). Under ``FallbackToLogsOnError``, a container that failed
(exit code not 0) and wrote nothing there gets the end of its log instead: its last 80
lines, at most the last 2 KiB.
"""

from __future__ import annotations

import logging
import os
import secrets
from pathlib import Path

from pkletd.ipc.apimodel.podspec import Container, Pod
from pkletd.ipc.runtime.cri import ContainerInfo, MountSpec
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.setup.runtimespec import (
    TERMINATION_MESSAGE_PATH,
    TERMINATION_MESSAGE_POLICY,
)

log = logging.getLogger(__name__)

MAX_MESSAGE = 4 * 1024  # kubecontainer.MaxContainerTerminationMessageLength
MAX_LOG_BYTES = 2 * 1024  # ...MaxContainerTerminationMessageLogLength
MAX_LOG_LINES = 80  # ...MaxContainerTerminationMessageLogLines
LOG_WINDOW = 64 * 1024  # the end of a log file read for those lines


def mount(node: NodeInfo, pod: Pod, container: Container) -> MountSpec | None:
    """A new file for this instance's message, mounted at its path; None without a path
    (or if the file cannot be made: the container runs without, as under the kubelet)."""
    if not container.termination_message_path:
        return None
    directory = node.pods_dir / pod.uid / "containers" / container.name
    path = directory / secrets.token_hex(4)
    try:
        directory.mkdir(mode=0o750, parents=True, exist_ok=True)
        path.touch()
        path.chmod(0o666)
    except OSError as exc:
        log.error("termination log not made pod=%s path=%s error=%s", pod.full_name, path, exc)
        return None
    target = container.termination_message_path
    return MountSpec(target if target.startswith("/") else "/" + target, str(path))


def message(status: ContainerInfo) -> str:
    """An exited container's message: the runtime's, then what the container left."""
    path = status.annotations.get(TERMINATION_MESSAGE_PATH, "")
    policy = status.annotations.get(TERMINATION_MESSAGE_POLICY, "File")
    failed = status.exit_code != 0 and status.reason != "ContainerCannotRun"
    left, from_logs = _written(status, path, policy == "FallbackToLogsOnError" and failed)
    if from_logs and status.log_path:
        left = log_tail(Path(status.log_path))
    if not left:
        return status.message
    return f"{status.message}: {left}" if status.message else left


def _written(status: ContainerInfo, path: str, fallback: bool) -> tuple[str, bool]:
    """What the container wrote at ``path``, and whether its log is to be read instead."""
    if not path:
        return "", fallback
    target = path if path.startswith("/") else "/" + path
    host = next((h for c, h in status.mounts if c == target), None)
    if host is None:
        return "", fallback
    try:
        with open(host, "rb") as file:
            file.seek(max(0, os.fstat(file.fileno()).st_size - MAX_MESSAGE))
            data = file.read(MAX_MESSAGE)
    except FileNotFoundError:
        return "", fallback
    except OSError as exc:
        return f"Error on reading termination log {host}: {exc}", False
    return data.decode(errors="replace"), fallback and not data


def log_tail(path: Path) -> str:
    """The last lines of a CRI log file's content (both streams), as ``kubectl logs
    --tail=80`` shows them, cut to their last 2 KiB."""
    try:
        with open(path, "rb") as file:
            size = os.fstat(file.fileno()).st_size
            file.seek(max(0, size - LOG_WINDOW))
            raw = file.read(LOG_WINDOW)
    except OSError as exc:
        return f"Error on reading termination message from logs: {exc}"
    records = raw.split(b"\n")
    if size > LOG_WINDOW:
        records = records[1:]  # the first may be cut
    lines: list[bytes] = []
    partial = b""
    for record in records:
        fields = record.split(b" ", 3)
        if len(fields) < 4:
            continue
        partial += fields[3]
        if fields[2] != b"P":  # F: the line ends here
            lines.append(partial + b"\n")
            partial = b""
    if partial:
        lines.append(partial)  # the last line, not ended yet
    text = b"".join(lines[-MAX_LOG_LINES:])[-MAX_LOG_BYTES:]
    return text.decode(errors="replace")
