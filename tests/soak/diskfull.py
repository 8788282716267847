"""The filesystem of the log and root dirs full, then free again.

The node's root dir, log dir and pod log dir share one small tmpfs (``node.FS_MB``). The
fault fills it with one file until the kernel says ENOSPC, and while it is full:

- a new API pod that needs files written under the root dir (a ConfigMap volume) must
  wait with a clear error: a ``FailedMount`` event saying ``no space left on device``;
- pkletd's processes cannot write their logs: each says so once on stderr (where
  systemd's journal reads it), naming the file, never a traceback per line. The
  supervisor is made to log (``LOUD_FRAMES`` garbage bus frames, one ERROR line each:
  more than the page its log file may still have room in) and its line is checked;
- a worker SIGKILLed meanwhile must come back; the running pods keep running through
  the ``FULL_S`` the filesystem stays full.

Then the file is removed: within ``RECOVER_S`` the new pod must run, and the
supervisor's log must be written again with the line saying how many lines were lost.
"""

from __future__ import annotations

import errno
import re
import time
from pathlib import Path

from tests.soak.bussocket import send_garbage_frames
from tests.soak.context import Soak, within
from tests.soak.kills import kill_worker
from tests.soak.logtail import LogTail
from tests.soak.podmix import api_pod
from tests.soak.report import Row

POD = "soak-diskfull"
FULL_S = 15.0  # how long the filesystem stays full: past the status and probe periods
ERROR_S = 30.0
RECOVER_S = 30.0
CHUNK = b"\0" * (1 << 20)
NO_SPACE = "No space left on device"
LOUD_FRAMES = 200  # garbage frames: as many ERROR lines, more than a page of log
LOST = re.compile(r"log file written again path=\S+/supervisor\.log lost_lines=[1-9]\d*")


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


def _running(soak: Soak) -> bool:
    pod = soak.node.pods().get(POD)
    return pod is not None and all(c["state"] == "running" for c in pod["containers"])


def _while_full(soak: Soak, row: Row, stderr: LogTail) -> None:
    """The new pod's error; a worker killed; the supervisor made to log; then the wait."""
    started = time.monotonic()
    soak.kube.core.create_namespaced_pod("default", api_pod(POD))
    row.check("a clear error for a new pod", within(lambda: _failed_mount(soak), ERROR_S))
    row.note(f"FailedMount after {time.monotonic() - started:.1f} s")
    back = kill_worker(soak, soak.rng.choice(sorted(soak.workers())))
    row.note(f"a worker killed meanwhile came back in {back:.2f} s")
    send_garbage_frames(soak.node.run_dir / "bus.sock", soak, LOUD_FRAMES)
    said = f"cannot write {soak.node.log_dir / 'supervisor.log'}: [Errno 28] {NO_SPACE}"
    row.check("the unwritable log said on stderr", within(lambda: said in stderr.read(), ERROR_S))
    time.sleep(max(0.0, started + FULL_S - time.monotonic()))  # the fault's length
    text = stderr.read()
    quiet = "Traceback" not in text and "Logging error" not in text
    row.check("said once, no traceback", text.count(said) == 1 and quiet)
    row.note(f"{stderr.text.count('cannot write')} stderr lines 'cannot write ...'")


def _once(soak: Soak, row: Row) -> None:
    filler = soak.node.fs / "filler"
    stderr = LogTail(soak.node.base / "stderr.log")
    log = LogTail(soak.node.log_dir / "supervisor.log")
    before = soak.fingerprint()
    row.note(f"filled with {fill(filler) / 2**20:.0f} MiB")
    try:
        _while_full(soak, row, stderr)
        row.check("pods keep running meanwhile", not soak.fingerprint().restarts_since(before))
    finally:
        filler.unlink()
    freed = time.monotonic()
    row.check("the new pod runs once space returns", within(lambda: _running(soak), RECOVER_S))
    row.note(f"space back -> the new pod running: {time.monotonic() - freed:.1f} s")
    written = within(lambda: LOST.search(log.read()), RECOVER_S)
    row.check("the log written again, saying how many lines were lost", written)
    if (lost := LOST.search(log.text)) is not None:
        row.note(f"supervisor.log: {lost[0].split('supervisor.log ')[-1]}")
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
