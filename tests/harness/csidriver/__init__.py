"""A host-path CSI driver for the tests, run as its own process as a real driver pod with
its node-driver-registrar would run: ``python -m tests.harness.csidriver`` (flags in
``config.py``, behaviour in ``hostpath.py``, sockets in ``server.py``, its record of
calls in ``calls.py``).

``CsiDriverProcess`` starts it and waits until both its sockets serve, reads the calls it
recorded, stops it (SIGTERM: it removes its sockets), kills it (SIGKILL: the sockets stay,
as a crashed driver's do) and starts it again::

    config = DriverConfig.for_kubelet(root_dir, "hostpath.csi.pkletd.test", "node-a",
                                      data_dir=tmp / "data", calls=tmp / "calls.jsonl")
    with CsiDriverProcess(config) as driver:
        ...
        driver.wait_for_call("NodePublishVolume")
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.harness.csidriver import calls
from tests.harness.csidriver.config import DriverConfig

REPO = Path(__file__).resolve().parents[3]
START_S = 15.0
STOP_S = 10.0
POLL_S = 0.05

__all__ = ["CsiDriverProcess", "DriverConfig"]

Call = dict[str, Any]


class CsiDriverProcess:
    """One driver process at a time for ``config``; its stderr goes to ``log``."""

    def __init__(self, config: DriverConfig, log: Path | None = None) -> None:
        self.config = config
        self.log = log or config.calls.with_suffix(".log")
        self._process: subprocess.Popen[bytes] | None = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def pid(self) -> int:
        assert self._process is not None, "the driver was never started"
        return self._process.pid

    def start(self, timeout: float = START_S) -> None:
        """Start the driver and return once both its sockets serve."""
        assert not self.running, "the driver is running"
        with self.log.open("ab") as log:
            self._process = subprocess.Popen(
                [sys.executable, "-m", "tests.harness.csidriver", *self.config.argv()],
                cwd=REPO,
                env={**os.environ, "PYTHONPATH": str(REPO)},
                stdout=subprocess.PIPE,
                stderr=log,
            )
        try:
            self._await_ready(self._process, timeout)
        except BaseException:
            self.kill()
            raise

    def _await_ready(self, process: subprocess.Popen[bytes], timeout: float) -> None:
        assert process.stdout is not None
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            readable, _, _ = select.select([process.stdout], [], [], left)
            if not readable:
                break
            line = process.stdout.readline()
            if line.strip() == b"ready":
                return
            if not line:  # exited
                raise RuntimeError(f"csi driver exited {process.wait()}: {self._log_tail()}")
        raise TimeoutError(f"csi driver not ready after {timeout}s: {self._log_tail()}")

    def _log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-2000:]

    def _end(self, signum: int, timeout: float) -> int | None:
        process, self._process = self._process, None
        if process is None:
            return None
        if process.poll() is None:
            process.send_signal(signum)
        try:
            return process.wait(timeout)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
            raise
        finally:
            if process.stdout is not None:
                process.stdout.close()

    def stop(self, timeout: float = STOP_S) -> int | None:
        """SIGTERM: the driver removes its sockets and exits; its exit status."""
        return self._end(signal.SIGTERM, timeout)

    def kill(self) -> None:
        """SIGKILL, as a crashed driver: its sockets are left behind."""
        self._end(signal.SIGKILL, STOP_S)

    def restart(self, timeout: float = START_S) -> None:
        """Kill the driver (if it runs) and start it again."""
        self.kill()
        self.start(timeout)

    def calls(self, method: str | None = None) -> list[Call]:
        """The calls recorded so far (across restarts), of ``method`` if given."""
        found = calls.read(self.config.calls)
        return [c for c in found if method is None or c["method"] == method]

    def registration_status(self) -> list[tuple[bool, str]]:
        """Every NotifyRegistrationStatus the driver got: (registered, error)."""
        return [(c["registered"], c["error"]) for c in self.calls("NotifyRegistrationStatus")]

    def wait_for_call(
        self,
        method: str,
        where: Callable[[Call], bool] = lambda call: True,
        timeout: float = 30.0,
    ) -> Call:
        """The first call of ``method`` that ``where`` accepts, once there is one."""
        deadline = time.monotonic() + timeout
        while True:
            found = [c for c in self.calls(method) if where(c)]
            if found:
                return found[0]
            if time.monotonic() >= deadline:
                raise TimeoutError(f"no {method} call after {timeout}s: {self.calls()}")
            time.sleep(POLL_S)

    def __enter__(self) -> CsiDriverProcess:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()
