"""What a test may not leave behind: a process, a socket, a pod sandbox.

``Holdings.now(address)`` takes stock of this pytest process's live child
processes and open socket fds, and of the sandboxes of the test containerd at
``address`` (when the test uses it); ``left_since`` says what a test added and
did not take away, after letting things that are on their way out finish (a
killed child being reaped, a closed connection's fd). The autouse fixture in
``conftest.py`` fails the test with that list.
"""

from __future__ import annotations

import os
import time
from dataclasses import dataclass
from pathlib import Path

from tests.harness.containerd import list_pod_sandboxes

SETTLE_S = 5.0
POLL_S = 0.05


@dataclass(frozen=True)
class Holdings:
    processes: frozenset[str]  # "<pid> <command>"
    sockets: frozenset[str]  # "fd <n>: socket:[inode]"
    sandboxes: frozenset[str]  # "<namespace>/<name> <id>"

    @classmethod
    def now(cls, containerd_address: str | None) -> Holdings:
        return cls(_children(), _sockets(), _sandboxes(containerd_address))

    def added_to(self, before: Holdings) -> list[str]:
        return sorted(
            [f"process {p}" for p in self.processes - before.processes]
            + [f"socket {s}" for s in self.sockets - before.sockets]
            + [f"sandbox {s}" for s in self.sandboxes - before.sandboxes]
        )


def left_since(
    before: Holdings, containerd_address: str | None, settle_s: float = SETTLE_S
) -> list[str]:
    """What was added since ``before`` and is still there after ``settle_s``."""
    deadline = time.monotonic() + settle_s
    while True:
        left = Holdings.now(containerd_address).added_to(before)
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(POLL_S)


def _children() -> frozenset[str]:
    me = str(os.getpid())
    found = set()
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text()
        except OSError:
            continue  # gone meanwhile
        command, _, rest = text.rpartition(")")
        state, ppid = rest.split()[:2]
        if ppid == me and state != "Z":
            found.add(f"{stat.parent.name} {command.partition('(')[2]}")
    return frozenset(found)


def _sockets() -> frozenset[str]:
    found = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        if target.startswith("socket:"):
            found.add(f"fd {fd.name}: {target}")
    return frozenset(found)


def _sandboxes(address: str | None) -> frozenset[str]:
    if address is None:
        return frozenset()
    return frozenset(
        f"{s.metadata.namespace}/{s.metadata.name} {s.id[:13]}" for s in list_pod_sandboxes(address)
    )
