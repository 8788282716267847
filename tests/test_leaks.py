"""The leak check every test runs under: it sees a child process and a socket left
open, and nothing once they are gone."""

from __future__ import annotations

import socket
import subprocess

from tests import leaks


def test_a_left_process_and_socket_are_reported_then_not() -> None:
    before = leaks.Holdings.now(None)
    child = subprocess.Popen(["sleep", "60"])
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    try:
        left = leaks.left_since(before, None, settle_s=0.2)
        assert any(item.startswith(f"process {child.pid} sleep") for item in left), left
        assert any(item.startswith("socket fd ") for item in left), left
    finally:
        child.kill()
        child.wait()
        listener.close()
    assert leaks.left_since(before, None, settle_s=0.2) == []
