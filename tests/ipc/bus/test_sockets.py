"""The bus sockets themselves: a socket file removed or replaced is bound again, and the
connections made before go on; a worker that takes no broadcasts is sent none."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path

import zmq
from pkletd.ipc.bus.codec import Envelope
from pkletd.ipc.bus.messages import Heartbeat
from pkletd.ipc.bus.sockets import ParentBus, WorkerBus

DEADLINE_S = 5.0


def first(receive: Callable[[], Envelope], poke: Callable[[], None] = lambda: None) -> Envelope:
    """The first message ``receive`` gets within the deadline (``poke`` before each try)."""
    deadline = time.monotonic() + DEADLINE_S
    while time.monotonic() < deadline:
        poke()
        try:
            return receive()
        except zmq.Again:
            time.sleep(0.01)
    raise AssertionError("nothing received")


def test_socket_files_removed_or_replaced_are_bound_again(tmp_path: Path) -> None:
    parent = ParentBus(tmp_path)
    early = WorkerBus(tmp_path, "pleg")
    late = None
    try:
        (tmp_path / "bus.sock").unlink()
        (tmp_path / "events.sock").unlink()
        (tmp_path / "events.sock").write_bytes(b"\x00garbage")
        lost = parent.rebind_lost()
        assert [(x.path.name, x.found, x.error) for x in lost] == [
            ("bus.sock", "nothing", ""),
            ("events.sock", "a regular file", ""),
        ]
        assert parent.rebind_lost() == []  # ours again
        assert (tmp_path / "bus.sock").stat().st_mode & 0o777 == 0o600

        late = WorkerBus(tmp_path, "prober")  # connects through the new files
        late.send(Heartbeat("prober"))
        early.send(Heartbeat("pleg"))  # the connection made before goes on
        senders = {first(lambda: parent.receive()[1]).sender for _ in range(2)}
        assert senders == {"pleg", "prober"}
        heard = first(late.receive_broadcast, poke=lambda: parent.publish(Heartbeat("x")))
        assert heard.message == Heartbeat("x")
    finally:
        for bus in (early, late, parent):
            if bus is not None:
                bus.close()


def test_a_worker_that_takes_no_broadcasts_is_sent_none(tmp_path: Path) -> None:
    parent = ParentBus(tmp_path)
    deaf = WorkerBus(tmp_path, "log-rotator", broadcasts=False)
    hearing = WorkerBus(tmp_path, "pleg")
    try:
        heard = first(hearing.receive_broadcast, poke=lambda: parent.publish(Heartbeat("x")))
        assert heard.message == Heartbeat("x")
        parent.publish(Heartbeat("after"))
        while heard.message != Heartbeat("after"):  # the pokes' "x"s first
            heard = first(hearing.receive_broadcast)
        # every broadcast reached the one that hears by now; the other got none of them
        assert deaf.sub.poll(0) == 0
        deaf.send(Heartbeat("log-rotator"))  # its own messages still go to the parent
        assert first(lambda: parent.receive()[1]).sender == "log-rotator"
    finally:
        for bus in (deaf, hearing, parent):
            bus.close()
