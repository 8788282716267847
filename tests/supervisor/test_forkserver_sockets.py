"""Listening sockets handed to the fork server: the parent's copies are closed, the fork
server keeps the port bound (connections complete into the backlog with no worker running),
the worker they are for inherits them and every other worker has them closed."""

from __future__ import annotations

import select
import socket
import time
from pathlib import Path

from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor.forkserver import Exited, ForkServer, Spawned
from pkletd.workers.http import Api, Listen, listening


def exit_codes(server: ForkServer, count: int, timeout: float = 10.0) -> dict[WorkerName, int]:
    """The exit codes of the next ``count`` workers to exit, by name."""
    names: dict[int, WorkerName] = {}
    codes: dict[WorkerName, int] = {}
    deadline = time.monotonic() + timeout
    while len(codes) < count:
        left = deadline - time.monotonic()
        assert left > 0, f"workers not all exited: {codes}"
        if not select.select([server.fileno()], [], [], left)[0]:
            continue
        report = server.read()
        if isinstance(report, Spawned):
            names[report.pid] = report.name
        elif isinstance(report, Exited):
            codes[names[report.pid]] = report.code
    return codes


def test_handed_sockets_stay_bound_and_reach_only_their_worker(tmp_path: Path) -> None:
    (sock,) = listening.bind(Listen("127.0.0.1", 0, Api.HEALTHZ))
    port = sock.getsockname()[1]

    def http_entry() -> int:  # inherited, still the listening socket on the port
        return 0 if sock.fileno() >= 0 and sock.getsockname()[1] == port else 1

    def pleg_entry() -> int:  # closed in any other worker
        return 0 if sock.fileno() == -1 else 1

    entries = {WorkerName.HTTP: http_entry, WorkerName.PLEG: pleg_entry}
    server = ForkServer(entries, tmp_path, {WorkerName.HTTP: (sock,)})
    server.start()
    try:
        assert sock.fileno() == -1  # the parent's copy
        with socket.create_connection(("127.0.0.1", port), timeout=5):
            pass  # completed by the kernel into the backlog: no worker runs
        server.spawn(WorkerName.HTTP)
        server.spawn(WorkerName.PLEG)
        assert exit_codes(server, 2) == {WorkerName.HTTP: 0, WorkerName.PLEG: 0}
    finally:
        server.close()
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
        refused = False
    except ConnectionRefusedError:
        refused = True
    assert refused  # the port went with the fork server
