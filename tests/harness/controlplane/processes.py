"""One control-plane process: started detached with its log file and pid file, stopped by pid.

A component is a daemon: started through a shell that exits at once, it is no child of
the process that started it, so it outlives ``make cluster`` and is not a test's leaked
child when a test restarts it. Any process can stop it (``make stop``): its pid file
names the pid, which counts only while its command line still names the component's own
directory.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Sequence
from pathlib import Path

STOP_TIMEOUT = 20.0


class ComponentError(RuntimeError):
    pass


def tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"


class Component:
    """``name`` runs ``argv``; ``marker`` is a string its command line holds (its own
    directory) so that a reused pid is never taken for it."""

    def __init__(self, name: str, argv: Sequence[str], base_dir: Path, marker: str) -> None:
        self.name = name
        self.argv = list(argv)
        self.marker = marker
        self.log_path = base_dir / "logs" / f"{name}.log"
        self.pid_path = base_dir / "run" / f"{name}.pid"

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self.pid_path.parent.mkdir(parents=True, exist_ok=True)
        launched = subprocess.run(
            ["sh", "-c", 'exec "$@" </dev/null >>"$LOG" 2>&1 & echo $!', "sh", *self.argv],
            env={**os.environ, "LOG": str(self.log_path)},
            capture_output=True,
            text=True,
            check=True,
            start_new_session=True,
        )
        self.pid_path.write_text(launched.stdout)

    def pid(self) -> int | None:
        """The running process's pid, None once it is gone (or a zombie)."""
        try:
            pid = int(self.pid_path.read_text())
        except (OSError, ValueError):
            return None
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            return None
        return pid if self.marker.encode() in cmdline else None

    def failure(self, message: str) -> ComponentError:
        return ComponentError(f"{self.name}: {message}\nlast lines of {self.log_path}:\n"
                              f"{tail(self.log_path)}")  # fmt: skip

    def stop(self, timeout: float = STOP_TIMEOUT) -> None:
        """SIGTERM, then SIGKILL after ``timeout``; returns once the process is gone."""
        pid = self.pid()
        if pid is None:
            return
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + timeout
            while time.monotonic() < deadline:
                if self.pid() is None:
                    self.pid_path.unlink(missing_ok=True)
                    return
                time.sleep(0.05)
        raise self.failure(f"pid {pid} still running after SIGKILL")
