"""The pkletd under soak: a node of the test API server, run as its systemd unit would
run it, with its root, log and pod log dirs on a small filesystem of their own.

The filesystem is a tmpfs of ``FS_MB`` mounted at ``<base>/fs`` (so the disk-full fault
can fill it without touching the machine's disks); the run dir stays outside it, as
``/run/pkletd`` is outside ``/var/lib/kubelet``. Eviction watches memory only
(``EVICTION_HARD``).
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import time

from tests.harness.apiserver import ApiServer
from tests.harness.containerd import unmount_all
from tests.harness.node import Pkletd, wait_for
from tests.soak.service import NotifySocket, Unit

FS_MB = 256
READY_S = 60.0
# The disk-full fault fills the root dir's filesystem on purpose, to see pkletd's own
# handling of ENOSPC; with the kubelet's default nodefs thresholds the eviction manager
# would (rightly) evict API pods meanwhile, which its own tests cover.
EVICTION_HARD = {"memory.available": "100Mi"}


class SoakNode(Pkletd):
    def __init__(self, endpoint: str, server: ApiServer) -> None:
        super().__init__(endpoint)
        self.fs = self.base / "fs"
        self.fs.mkdir()
        subprocess.run(
            ["mount", "-t", "tmpfs", "-o", f"size={FS_MB}m,mode=0755", "soak", str(self.fs)],
            check=True,
            timeout=30,
        )
        self.root_dir = self.fs / "root"
        self.log_dir = self.fs / "log"
        self.pod_logs = self.fs / "pods"
        self.write_config(
            authentication={"x509": {"clientCAFile": str(server.ca_path)}},
            evictionHard=EVICTION_HARD,
        )
        self.extra_args += ["--node-ip", "127.0.0.1"]
        self.join_cluster(server)
        self.unit = Unit.read()
        self.notify = NotifySocket(self.base / "notify.sock")
        self.main_pids: list[tuple[int, float]] = []  # every main pid, with when it died

    def start(self, wait: bool = True) -> SoakNode:
        """Start as systemd starts a Type=notify unit: done once the main pid says READY=1."""
        out = open(self.base / "stderr.log", "ab")  # noqa: SIM115 (lives as long as the process)
        self.proc = subprocess.Popen(
            self.unit.command(self.args()),
            env=self.unit.environment(self.notify.path),
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        out.close()
        self.session = self.proc.pid
        if wait:
            wait_for("READY=1 from the main pid", self._ready, timeout=READY_S, every=0.02)
        return self

    def _ready(self) -> bool:
        assert self.proc is not None
        if self.proc.poll() is not None:
            raise AssertionError(f"pkletd exited with status {self.proc.returncode}")
        return self.notify.ready_at(self.proc.pid) is not None

    @property
    def main_pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def kill_main(self) -> None:
        """SIGKILL the supervisor and reap it."""
        pid = self.main_pid
        self.kill(signal.SIGKILL)
        self.main_pids.append((pid, time.monotonic()))

    def restart_as_systemd(self) -> None:
        """What Restart=always does once the main pid died: KillMode=mixed kills what is left
        in the unit (here: its session), then RestartSec later the unit starts again."""
        for pid in self.processes():
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        wait_for("the unit's processes gone", lambda: not self.processes(), timeout=15)
        time.sleep(self.unit.restart_s)  # systemd's RestartSec, not a synchronisation
        self.start()

    def longest_watchdog_silence(self) -> float:
        """Over every main pid so far, the longest gap between WATCHDOG=1 pings."""
        lives = [*self.main_pids]
        if self.proc is not None and self.proc.poll() is None:
            lives.append((self.proc.pid, time.monotonic()))
        return max((self.notify.longest_silence(pid, until) for pid, until in lives), default=0.0)

    def close(self) -> None:
        self.stop()
        wait_for("no pkletd process left", lambda: not self.processes(), timeout=15)
        self.notify.close()
        if os.environ.get("PKLETD_KEEP_TMP") == "1":  # the logs outlive the filesystem
            shutil.copytree(self.log_dir, self.base / "log", dirs_exist_ok=True)
        unmount_all(self.fs)
        super().close()
