"""`pkletd status` imports what asking the control socket and printing need, and no more:
no other module of pkletd, none of the heavy clients, not even ``typing`` or ``socket``."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
import threading
from pathlib import Path

from pkletd.supervisor.cli import CONTROL_SOCKET

# What `pkletd start` and the workers need; each costs `pkletd status` milliseconds to
# tens of milliseconds against the ~20 ms of `python -c pass`.
HEAVY = ("zmq", "grpc", "kubernetes", "msgpack", "yaml", "google", "aiohttp", "cryptography")
STATUS = {
    "ok": True,
    "node": {"name": "n1", "joined": False},
    "workers": [
        {
            "name": "pleg",
            "pid": 7,
            "state": "running",
            "restarts": 0,
            "uptime_s": 3.0,
            "last_exit": "",
        }
    ],
    "pods": [
        {
            "namespace": "default",
            "name": "web",
            "phase": "Running",
            "containers": [{"name": "c", "state": "running", "restart_count": 0}],
        }
    ],
}
RUN_STATUS = """
import sys
from pkletd.supervisor import cli
code = cli.main(["status", "--run-dir", sys.argv[1]])
print(code, " ".join(sorted(sys.modules)))
"""


def answer_once(listener: socket.socket) -> None:
    conn, _ = listener.accept()
    with conn:
        conn.recv(65536)
        conn.sendall((json.dumps(STATUS) + "\n").encode())


def test_status_imports_only_the_cli_of_pkletd_and_nothing_heavy(tmp_path: Path) -> None:
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(tmp_path / CONTROL_SOCKET))
    listener.listen(1)
    server = threading.Thread(target=answer_once, args=(listener,), daemon=True)
    server.start()
    try:
        found = subprocess.run(
            [sys.executable, "-c", RUN_STATUS, str(tmp_path)],
            capture_output=True,
            text=True,
            check=True,
            timeout=60,
        )
    finally:
        server.join(timeout=10)
        listener.close()
    lines = found.stdout.splitlines()
    code, modules = lines[-1].split(" ", 1)
    assert code == "0"
    assert "web" in found.stdout and "pleg" in found.stdout  # it asked and printed
    imported = set(modules.split())
    assert {m for m in imported if m.startswith("pkletd")} == {
        "pkletd",
        "pkletd.supervisor",
        "pkletd.supervisor.cli",
    }
    assert not {m.split(".")[0] for m in imported} & set(HEAVY)
    # Cheaper, but each a tenth of `python -c pass`: the annotations need typing only for
    # mypy; socket's enums and selectors cost more than the request (_socket does it).
    assert not imported & {"typing", "socket"}
