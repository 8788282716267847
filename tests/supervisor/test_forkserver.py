"""The real fork server: a worker starts with the heap it shares frozen, so no collection
of its own copies the shared pages."""

from __future__ import annotations

import gc
import select
from pathlib import Path

from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor.forkserver import Exited, ForkServer, Spawned

DEADLINE_S = 30.0


def frozen_before_it_ran() -> int:
    """The worker's exit code: 0 when the objects it was forked with are frozen."""
    return 0 if gc.get_freeze_count() > 0 else 3


def next_report(server: ForkServer) -> Spawned | Exited | None:
    readable, _, _ = select.select([server.fileno()], [], [], DEADLINE_S)
    assert readable, "no report from the fork server within the deadline"
    return server.read()


def test_a_worker_starts_with_the_shared_heap_frozen(tmp_path: Path) -> None:
    server = ForkServer({WorkerName.PLEG: frozen_before_it_ran}, tmp_path)
    server.start()
    try:
        server.spawn(WorkerName.PLEG)
        spawned = next_report(server)
        assert isinstance(spawned, Spawned)
        exited = next_report(server)
        assert exited == Exited(spawned.pid, 0)
    finally:
        server.close()
        gc.unfreeze()  # the pytest process froze its heap to fork the server
