"""A rogue peer on the bus: ``bus_messages`` fuzzed messages, and the supervisor lives.

Peers are DEALERs on ``bus.sock``, a new one every ``PER_PEER`` messages, each with an
identity that is random bytes, a worker's name with a made-up pid (some written in
non-ASCII digits), or a running worker's own identity (which the ROUTER refuses while
the worker holds it). Messages, in equal shares (``SHAPES``):

- ``bytes``: random bytes;
- ``msgpack``: a random msgpack value (nested maps, lists, ints, floats, bytes...);
- ``envelope``: a six-element envelope with one header field wrong (schema version,
  kind, sender, seq, time, body);
- ``mutated``: a registered kind whose body conforms to its dataclass, then loses a
  field, gains one, or has one of the wrong type;
- ``conforming``: a registered kind with a body of random values of the right types,
  which decodes: what stops it is the supervisor's check of who sent it.

Must hold: the supervisor never exits (its pid is the same throughout), no worker is
restarted, every worker runs at the end, and every line the supervisor logged meanwhile
is one of its own (a timestamp first, no NUL): a sender's newlines must not forge lines.
"""

from __future__ import annotations

import dataclasses
import enum
import random
import time
import types
import typing
from collections import Counter
from collections.abc import Callable
from typing import Any

import msgpack
import zmq
from pkletd.ipc.bus.messages import MESSAGES, SCHEMA_VERSION

from tests.soak.context import Soak
from tests.soak.logtail import LogTail
from tests.soak.report import Row

PER_PEER = 50
SEND_TIMEOUT_MS = 5000
UNICODE_DIGITS = "²³¹٣٤۵߁०১੩૪୫௬౭೮൯๑໒༣၄႕០᠑᥆᧑᪒᭓᮴᱕᱖"


def random_text(rng: random.Random) -> str:
    alphabet = rng.choice(
        ["abcdefghijklmnopqrstuvwxyz-./", UNICODE_DIGITS, "\x00\n\t \"'{}", "é漢🙂"]
    )
    return "".join(rng.choice(alphabet) for _ in range(rng.choice([0, 1, 5, 40, 300])))


def random_value(rng: random.Random, depth: int = 0) -> Any:
    choices: list[Callable[[], Any]] = [
        lambda: rng.randint(-(2**63), 2**64 - 1),
        lambda: rng.choice([0.0, -1.5, float("nan"), float("inf"), 1e308]),
        lambda: random_text(rng),
        lambda: rng.randbytes(rng.randint(0, 64)),
        lambda: rng.choice([None, True, False]),
    ]
    if depth < 4:
        choices.append(lambda: [random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))])
        choices.append(
            lambda: {_key(rng): random_value(rng, depth + 1) for _ in range(rng.randint(0, 4))}
        )
    return rng.choice(choices)()


def _key(rng: random.Random) -> Any:
    return rng.choice([random_text(rng), rng.randint(-5, 5), rng.randbytes(3)])


def conforming(hint: Any, rng: random.Random, depth: int = 0) -> Any:
    """A random value the codec accepts for a field typed ``hint``."""
    origin = typing.get_origin(hint)
    if isinstance(hint, typing.NewType):
        return conforming(hint.__supertype__, rng, depth)
    if isinstance(hint, type) and issubclass(hint, enum.StrEnum):
        return rng.choice(list(hint)).value
    simple: dict[Any, Callable[[], Any]] = {
        Any: lambda: random_value(rng, 3),
        bool: lambda: rng.choice([True, False]),
        int: lambda: rng.randint(-(2**31), 2**31),
        float: lambda: rng.uniform(-1e6, 1e6),
        str: lambda: random_text(rng),
        bytes: lambda: rng.randbytes(rng.randint(0, 32)),
        type(None): lambda: None,
    }
    if hint in simple:
        return simple[hint]()
    if typing.is_typeddict(hint):
        return {k: conforming(h, rng, depth + 1) for k, h in typing.get_type_hints(hint).items()}
    args = typing.get_args(hint)
    if origin is typing.Literal or origin in (typing.Union, types.UnionType):
        return (
            rng.choice(args)
            if origin is typing.Literal
            else conforming(rng.choice(args), rng, depth)
        )
    count = rng.randint(0, 3) if depth < 3 else 0
    if origin is list:
        return [conforming(args[0], rng, depth + 1) for _ in range(count)]
    if origin is dict:
        return {
            conforming(args[0], rng, depth + 1): conforming(args[1], rng, depth + 1)
            for _ in range(count)
        }
    raise TypeError(f"no generator for {hint!r}")


def _body(kind: str, rng: random.Random) -> dict[str, Any]:
    cls = MESSAGES[kind]
    hints = typing.get_type_hints(cls)
    return {f.name: conforming(hints[f.name], rng) for f in dataclasses.fields(cls)}


def _mutated(body: dict[str, Any], rng: random.Random) -> dict[str, Any]:
    body = dict(body)
    how = rng.randrange(3)
    if how == 0 and body:
        body.pop(rng.choice(sorted(body)))
    elif how == 1:
        body[random_text(rng) or "extra"] = random_value(rng)
    elif body:
        body[rng.choice(sorted(body))] = random_value(rng)
    return body


def _envelope(kind: str, body: Any, sender: str) -> list[Any]:
    return [SCHEMA_VERSION, kind, sender, 1, time.monotonic(), body]


def _bad_envelope(rng: random.Random, sender: str) -> list[Any]:
    frame = _envelope(rng.choice(sorted(MESSAGES)), {}, sender)
    slot = rng.randrange(7)
    if slot == 6:
        return frame[: rng.randrange(6)] + [random_value(rng)] * rng.randint(0, 3)
    frame[slot] = random_value(rng)
    return frame


SHAPES = ("bytes", "msgpack", "envelope", "mutated", "conforming")


def message(shape: str, rng: random.Random, sender: str) -> bytes:
    if shape == "bytes":
        return rng.randbytes(rng.randint(0, 2048))
    kind = rng.choice(sorted(MESSAGES))
    if shape == "msgpack":
        frame: Any = random_value(rng)
    elif shape == "envelope":
        frame = _bad_envelope(rng, sender)
    elif shape == "mutated":
        frame = _envelope(kind, _mutated(_body(kind, rng), rng), sender)
    else:
        frame = _envelope(kind, _body(kind, rng), sender)
    return msgpack.packb(frame, use_bin_type=rng.random() < 0.8)  # type: ignore[no-any-return]


def identity(rng: random.Random, workers: dict[str, dict[str, Any]]) -> tuple[bytes, str]:
    """A peer's identity and the sender name its envelopes carry."""
    name = rng.choice(sorted(workers))
    how = rng.randrange(4)
    if how == 0:
        return bytes([rng.randint(1, 255)]) + rng.randbytes(rng.randint(0, 60)), name
    if how == 1:
        return f"{name}/{rng.randint(1, 2**22)}".encode(), name
    if how == 2:
        digits = "".join(rng.choice(UNICODE_DIGITS) for _ in range(rng.randint(1, 6)))
        return f"{name}/{digits}".encode(), name
    return f"{name}/{workers[name]['pid']}".encode(), name  # taken: the ROUTER refuses it


def _peer(ctx: zmq.Context[zmq.Socket[bytes]], path: str, ident: bytes) -> zmq.Socket[bytes]:
    dealer = ctx.socket(zmq.DEALER)
    dealer.setsockopt(zmq.LINGER, 2000)  # deliver what was sent before close
    dealer.setsockopt(zmq.SNDTIMEO, SEND_TIMEOUT_MS)
    dealer.setsockopt(zmq.IDENTITY, ident)
    dealer.connect(path)
    return dealer


def run(soak: Soak) -> Row:
    wanted = soak.counts.bus_messages
    row = Row("fuzzed bus messages from a rogue peer")
    parent = soak.node.main_pid
    workers = soak.workers()
    before = {n: w["restarts"] for n, w in workers.items()}
    log = LogTail(soak.node.log_dir / "supervisor.log")
    shapes: Counter[str] = Counter()
    ctx = zmq.Context()
    started = time.monotonic()
    try:
        dealer = None
        while sum(shapes.values()) < wanted and not soak.out_of_time():
            if sum(shapes.values()) % PER_PEER == 0:
                if dealer is not None:
                    dealer.close()
                ident, sender = identity(soak.rng, workers)
                dealer = _peer(ctx, f"ipc://{soak.node.run_dir / 'bus.sock'}", ident)
            shape = SHAPES[sum(shapes.values()) % len(SHAPES)]
            assert dealer is not None
            dealer.send(message(shape, soak.rng, sender))
            shapes[shape] += 1
        if dealer is not None:
            dealer.close()
    finally:
        ctx.term()
    took = time.monotonic() - started
    sent = sum(shapes.values())
    row.count = f"{sent} of {wanted} ({', '.join(f'{s} {n}' for s, n in sorted(shapes.items()))})"
    row.check(f"{wanted} sent", sent == wanted)
    soak.wait_workers_running()
    row.check(
        "0 supervisor crashes",
        soak.node.proc is not None
        and soak.node.proc.poll() is None
        and soak.node.main_pid == parent,
    )
    after = {n: w["restarts"] for n, w in soak.workers().items()}
    row.check("no worker restarted", after == before)
    forged = log.forged()
    row.check("no forged log line", not forged)
    if forged:
        row.note(f"forged: {forged[:3]}")
    row.note(f"sent in {took:.1f} s; {log.text.count('dropped')} 'dropped ...' log lines")
    return row
