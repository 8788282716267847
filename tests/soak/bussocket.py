"""The run dir's bus sockets taken away or filled with garbage.

Socket faults, in turn: ``bus.sock`` removed, ``events.sock`` removed, ``bus.sock``
replaced by a regular file of garbage. The workers already connected keep their
connections; what breaks is the next connection, so after each fault a random worker
is SIGKILLed and must come back (its new process connects through the path), and a
new subscriber to ``events.sock`` must hear the supervisor's ``ParentAlive``. The
supervisor must say what it found in one log line.

Garbage floods: raw bytes over plain unix connections to ``bus.sock`` (no ZMTP
greeting), then ``garbage_frames`` frames from a DEALER (random bytes, bad msgpack,
several parts). The supervisor logs and drops them; meanwhile no worker may miss its
heartbeat deadline.
"""

from __future__ import annotations

import os
import socket
import stat
import time
from pathlib import Path
from random import Random

import msgpack
import zmq

from tests.soak.context import Soak, within
from tests.soak.kills import kill_worker
from tests.soak.report import Row, seconds

LOGGED_S = 5.0
HEARD_S = 5.0
RAW_CONNECTIONS = 10
GONE_LINE = "bus socket gone; bound again"


def _is_socket(path: Path) -> bool:
    try:
        return stat.S_ISSOCK(path.stat().st_mode)
    except FileNotFoundError:
        return False


def _spoil(path: Path, variant: int, rng: Random) -> None:
    path.unlink()
    if variant == 2:
        path.write_bytes(rng.randbytes(4096))


def _spoiled_and_said(soak: Soak, path: Path, variant: int) -> bool:
    """Spoil ``path``; whether the supervisor then logs ``GONE_LINE`` once more."""
    wanted = soak.node.log().count(GONE_LINE) + 1
    _spoil(path, variant, soak.rng)
    return within(lambda: soak.node.log().count(GONE_LINE) == wanted, LOGGED_S)


def hears_parent(run_dir: Path, timeout: float = HEARD_S) -> bool:
    """A new subscriber to events.sock receives ParentAlive (published every second)."""
    ctx = zmq.Context()
    sub = ctx.socket(zmq.SUB)
    try:
        sub.setsockopt(zmq.LINGER, 0)
        sub.setsockopt(zmq.SUBSCRIBE, b"ParentAlive")
        sub.connect(f"ipc://{run_dir / 'events.sock'}")
        return bool(sub.poll(int(timeout * 1000)))
    finally:
        sub.close()
        ctx.term()


def socket_faults(soak: Soak, row: Row) -> None:
    run_dir = soak.node.run_dir
    names = sorted(soak.workers())
    back: list[float] = []
    for i in range(soak.counts.socket_faults):
        if soak.out_of_time():
            break
        path = run_dir / ("events.sock" if i % 3 == 1 else "bus.sock")
        row.check("one log line naming it", _spoiled_and_said(soak, path, i % 3))
        row.check("the socket is back", _is_socket(path))
        back.append(kill_worker(soak, soak.rng.choice(names)))
        row.check("a new subscriber hears the supervisor", hears_parent(run_dir))
    row.note(f"a worker killed after each came back: {seconds(back)}")


def _raw_garbage(path: Path, soak: Soak) -> None:
    for _ in range(RAW_CONNECTIONS):
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
            conn.settimeout(2)
            conn.connect(str(path))
            try:
                conn.sendall(soak.rng.randbytes(soak.rng.randint(1, 8192)))
            except OSError:
                pass  # libzmq hangs up on a bad greeting: that is the point


def _frame(soak: Soak) -> list[bytes]:
    rng = soak.rng
    shape = rng.randrange(4)
    if shape == 0:
        return [rng.randbytes(rng.randint(0, 512))]
    if shape == 1:  # valid msgpack, not an envelope
        return [msgpack.packb([rng.random(), rng.randbytes(8), {"k": rng.randint(-9, 9)}])]
    if shape == 2:  # a truncated envelope
        return [msgpack.packb([4, "Heartbeat", "pleg", 1, 0.0, {"worker": "pleg"}])[:-3]]
    return [rng.randbytes(16) for _ in range(rng.randint(2, 5))]


def floods(soak: Soak, row: Row) -> None:
    path = soak.node.run_dir / "bus.sock"
    before = {n: w["restarts"] for n, w in soak.workers().items()}
    dropped = soak.node.log().count("dropped bad bus message")
    took: list[float] = []
    for _ in range(soak.counts.garbage_floods):
        if soak.out_of_time():
            break
        started = time.monotonic()
        _raw_garbage(path, soak)
        send_garbage_frames(path, soak, soak.counts.garbage_frames)
        took.append(time.monotonic() - started)
    after = {n: w["restarts"] for n, w in soak.workers().items()}
    row.check("no worker missed its heartbeat", after == before)
    logged = soak.node.log().count("dropped bad bus message") - dropped
    row.check("bad frames logged and dropped", logged > 0)
    row.note(
        f"{len(took)} floods of {RAW_CONNECTIONS} raw connections + "
        f"{soak.counts.garbage_frames} frames: {seconds(took)}; {logged} lines logged"
    )


def send_garbage_frames(path: Path, soak: Soak, count: int) -> None:
    """``count`` frames of garbage from a DEALER on ``path``."""
    ctx = zmq.Context()
    dealer = ctx.socket(zmq.DEALER)
    try:
        dealer.setsockopt(zmq.LINGER, 5000)  # deliver what was sent before close
        dealer.setsockopt(zmq.SNDTIMEO, 5000)
        dealer.setsockopt(zmq.IDENTITY, f"garbage/{os.getpid()}".encode())
        dealer.connect(f"ipc://{path}")
        for _ in range(count):
            dealer.send_multipart(_frame(soak))
    finally:
        dealer.close()
        ctx.term()


def run(soak: Soak) -> Row:
    row = Row("bus socket removed or filled with garbage")
    socket_faults(soak, row)
    floods(soak, row)
    row.count = (
        f"{soak.counts.socket_faults} socket faults, {soak.counts.garbage_floods} garbage floods"
    )
    return row
