"""What the parent warms up before it forks the fork server: a worker's first log lines and
bus messages run on the shared, already specialised code and caches, so they copy little
of the shared heap (cold, the first line alone copied ~1 MB)."""

from __future__ import annotations

import gc
import logging
import select
from pathlib import Path

from pkletd.ipc.bus import codec
from pkletd.ipc.bus.messages import Heartbeat
from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor.forkserver import Exited, ForkServer, Spawned

DEADLINE_S = 30.0
BOUND_KB = 600  # warmed: ~200 kB; not warmed: ~1000 kB


def private_kb() -> int:
    fields = dict(
        line.split(":", 1) for line in Path("/proc/self/smaps_rollup").read_text().splitlines()[1:]
    )
    return sum(int(fields[key].split()[0]) for key in ("Private_Clean", "Private_Dirty"))


def first_lines_and_messages(report: Path) -> int:
    """Log and decode as a starting worker does; write the private kB it cost."""
    gc.enable()
    before = private_kb()
    log = logging.getLogger("pkletd.workers.test")
    for seq in range(3):
        log.info("a line seq=%d", seq)
        codec.decode(codec.encode(Heartbeat("pleg"), "pleg", seq, 0.0))
    report.write_text(str(private_kb() - before))
    return 0


def test_a_workers_first_lines_and_messages_copy_little(tmp_path: Path) -> None:
    report = tmp_path / "copied-kb"
    server = ForkServer({WorkerName.PLEG: lambda: first_lines_and_messages(report)}, tmp_path)
    server.start()
    try:
        server.spawn(WorkerName.PLEG)
        readable, _, _ = select.select([server.fileno()], [], [], DEADLINE_S)
        spawned = server.read() if readable else None
        assert isinstance(spawned, Spawned)
        readable, _, _ = select.select([server.fileno()], [], [], DEADLINE_S)
        assert readable and server.read() == Exited(spawned.pid, 0)
    finally:
        server.close()
        gc.unfreeze()  # the pytest process froze its heap to fork the server
    assert int(report.read_text()) < BOUND_KB
    assert "a line seq=2" in (tmp_path / "pleg.log").read_text()
