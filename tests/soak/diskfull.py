"""The filesystem of the log and root dirs full, then free again.

The node's root dir, log dir and pod log dir share one small tmpfs (``node.FS_MB``). The
fault fills it with one file until the kernel says ENOSPC, and while it is full:

- a new API pod that needs files written under the root dir (a ConfigMap volume) must
  wait with a clear error: a ``FailedMount`` event saying ``no space left on device``;
- pkletd's processes cannot write their logs: each must say so once on stderr (where
  systemd's journal reads it), naming the file, not a traceback per line;
- a worker SIGKILLed meanwhile must come back; the running pods keep running through
  the ``FULL_S`` the filesystem stays full.

Then the file is removed: the new pod must run, and the supervisor's log must be
written again, within ``RECOVER_S``.
"""

from __future__ import annotations

import errno
import time
from pathlib import Path

from tests.soak.context import Soak, within
from tests.soak.kills import kill_worker
from tests.soak.podmix import api_pod
from tests.soak.report import Row

POD = "soak-diskfull"
FULL_S = 15.0  # how long the filesystem stays full: past the status and probe periods
ERROR_S = 30.0
RECOVER_S = 30.0
CHUNK = b"\0" * (1 << 20)
NO_SPACE = "No space left on device"


def fill(path: Path) -> int:
    """Write ``path`` until the filesystem is full; the bytes written."""
    written = 0
    with path.open("wb", buffering=0) as f:
        while True:
            try:
                written += f.write(CHUNK)
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                return written


def _failed_mount(soak: Soak) -> bool:
    return any(
        e["reason"] == "FailedMount"
        and NO_SPACE.lower() in e["message"].lower()
        and e["object"].endswith(f"/{POD}")
        for e in soak.node.events()
    )


def _stderr(soak: Soak) -> str:
    return (soak.node.base / "stderr.log").read_text(errors="replace")


def _log_size(soak: Soak) -> int:
    return (soak.node.log_dir / "supervisor.log").stat().st_size


def _running(soak: Soak) -> bool:
    pod = soak.node.pods().get(POD)
    return pod is not None and all(c["state"] == "running" for c in pod["containers"])


def _once(soak: Soak, row: Row) -> None:
    filler = soak.node.fs / "filler"
    stderr_before = len(_stderr(soak))
    before = soak.fingerprint()
    size = fill(filler)
    full_at = _log_size(soak)
    started = time.monotonic()
    try:
        soak.kube.core.create_namespaced_pod("default", api_pod(POD))
        row.check("a clear error for a new pod", within(lambda: _failed_mount(soak), ERROR_S))
        row.note(
            f"filled with {size / 2**20:.0f} MiB; FailedMount after "
            f"{time.monotonic() - started:.1f} s"
        )
        back = kill_worker(soak, soak.rng.choice(sorted(soak.workers())))
        row.note(f"a worker killed meanwhile came back in {back:.2f} s")
        time.sleep(max(0.0, started + FULL_S - time.monotonic()))  # the fault's length
        row.check("pods keep running meanwhile", not soak.fingerprint().restarts_since(before))
        said = _stderr(soak)[stderr_before:]
        row.check("unwritable logs said once per process, on stderr", NO_SPACE in said)
        row.check("no traceback per log line", "Traceback" not in said)
        row.note(f"{said.count(NO_SPACE)} stderr lines about it")
    finally:
        filler.unlink()
    freed = time.monotonic()
    row.check("the new pod runs once space returns", within(lambda: _running(soak), RECOVER_S))
    row.check("logs written again", within(lambda: _log_size(soak) > full_at, RECOVER_S))
    row.note(f"space back -> the new pod running: {time.monotonic() - freed:.1f} s")
    soak.kube.core.delete_namespaced_pod(POD, "default", grace_period_seconds=1)
    row.check("the new pod deleted", within(lambda: POD not in soak.node.pods(), RECOVER_S))


def run(soak: Soak) -> Row:
    row = Row("disk full under the log and root dirs")
    done = 0
    while done < soak.counts.disk_fulls and not soak.out_of_time():
        _once(soak, row)
        done += 1
    row.count = f"{done} of {soak.counts.disk_fulls}"
    row.check(f"{soak.counts.disk_fulls} done", done == soak.counts.disk_fulls)
    return row
