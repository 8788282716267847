"""How much of each fault a run makes: the full form and the short one (a tenth)."""

from __future__ import annotations

import math
from dataclasses import dataclass, fields, replace


@dataclass(frozen=True)
class Counts:
    pods: int  # running pods of the mix (tests.soak.podmix)
    worker_kills: int  # SIGKILL of a random worker
    parent_kills: int  # SIGKILL of the supervisor, restarted as systemd would
    containerd_restarts: int
    worker_stops: int  # SIGSTOP of a random worker, past its heartbeat deadline
    socket_faults: int  # bus socket removed, or replaced by a file of garbage
    garbage_floods: int  # garbage bytes and frames sent to the bus socket
    garbage_frames: int  # frames in each flood
    bus_messages: int  # fuzzed messages from a rogue bus peer
    http_requests: int  # fuzzed requests, spread over every port
    manifests: int  # mutated static pod manifests
    disk_fulls: int  # the log and root dirs' filesystem filled up


FULL = Counts(
    pods=90,
    worker_kills=200,
    parent_kills=20,
    containerd_restarts=5,
    worker_stops=10,
    socket_faults=10,
    garbage_floods=10,
    garbage_frames=1000,
    bus_messages=10_000,
    http_requests=10_000,
    manifests=1_000,
    disk_fulls=1,
)


def scaled(fraction: float, pods: int = FULL.pods) -> Counts:
    """A fraction of every count (at least one of each fault), with ``pods`` pods."""
    counts = {f.name: max(1, math.ceil(getattr(FULL, f.name) * fraction)) for f in fields(FULL)}
    return replace(Counts(**counts), pods=pods, disk_fulls=FULL.disk_fulls)


# A tenth of every count, and 20 pods rather than 90, so the run fits in about 3 minutes.
SHORT = scaled(0.1, pods=20)
