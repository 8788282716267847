"""`pkletd status` imports what asking the control socket and printing need, and no more:
no other module of pkletd, none of the heavy clients, not even ``typing``, ``socket`` or
``re`` (``json``, ``argparse`` and ``pathlib`` each import it); the supervisor's control
server answers it in marshal. A pkletd older than the command answers in JSON: still
shown."""

from __future__ import annotations

import json
import select
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from pkletd.supervisor import cli
from pkletd.supervisor.cli import CONTROL_SOCKET
from pkletd.supervisor.control import ControlServer

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
before = set(sys.modules)  # what the interpreter and site imported: python -c pass's
from pkletd.supervisor import cli
code = cli.main(["status", "--run-dir", sys.argv[1]])
print(code, " ".join(sorted(set(sys.modules) - before)))
"""


def answer_once_in_json(run_dir: Path) -> threading.Thread:
    """A pkletd from before the marshal reply: one JSON line, whatever was asked."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(run_dir / CONTROL_SOCKET))
    listener.listen(1)

    def answer() -> None:
        with listener:
            conn, _ = listener.accept()
            with conn:
                conn.recv(65536)
                conn.sendall((json.dumps(STATUS) + "\n").encode())

    server = threading.Thread(target=answer, daemon=True)
    server.start()
    return server


def answer_once_as_the_supervisor(control: ControlServer) -> threading.Thread:
    """The supervisor's own control server; its loop's answer is ``STATUS``."""

    def answer() -> None:
        while not (pending := control.pending()):
            select.select([control.fileno()], [], [], 10)  # the loop's own wait
        for request in pending:
            request.reply.put(STATUS)

    server = threading.Thread(target=answer, daemon=True)
    server.start()
    return server


def status_in_a_new_python(run_dir: Path) -> tuple[str, set[str]]:
    found = subprocess.run(
        [sys.executable, "-c", RUN_STATUS, str(run_dir)],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = found.stdout.splitlines()
    code, modules = lines[-1].split(" ", 1)
    assert code == "0"
    return found.stdout, set(modules.split())


def test_status_imports_only_the_cli_of_pkletd_and_nothing_heavy(tmp_path: Path) -> None:
    control = ControlServer(tmp_path)
    try:
        server = answer_once_as_the_supervisor(control)
        out, imported = status_in_a_new_python(tmp_path)
        server.join(timeout=10)
    finally:
        control.close()
    assert "web" in out and "pleg" in out  # it asked and printed
    assert {m for m in imported if m.startswith("pkletd")} <= {
        "pkletd",  # imported by site already, in an editable install
        "pkletd.supervisor",
        "pkletd.supervisor.cli",
    }
    assert not {m.split(".")[0] for m in imported} & set(HEAVY)
    # Cheaper, but each a tenth of `python -c pass`: the annotations need typing only for
    # mypy; socket's enums and selectors cost more than the request (_socket does it).
    assert not imported & {"typing", "socket"}
    # re alone costs half of `python -c pass`; json, argparse and pathlib import it.
    assert not imported & {"re", "json", "argparse", "pathlib"}


def test_status_from_a_pkletd_that_answers_in_json_is_shown(tmp_path: Path) -> None:
    server = answer_once_in_json(tmp_path)
    out, _ = status_in_a_new_python(tmp_path)
    server.join(timeout=10)
    assert "default/web" in out and "pleg" in out


@pytest.mark.parametrize("args", [["status", "--run-dir"], ["status", "--bogus"]])
def test_a_bad_status_command_line_is_refused_with_exit_2(
    args: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        cli.main(args)
    assert exited.value.code == 2
    assert "usage: pkletd" in capsys.readouterr().err
