"""One soak run's parts, and the must-holds checked after every fault.

After each fault ``Soak.settle`` checks, with deadlines: the supervisor alive (not
restarted by anyone but the fault that kills it), every worker running, no
container restarted or sandbox recreated in the stable pods since the fault began (by
the runtime's own IDs, and pkletd's restart counts), and every view of every pod's
status agreeing with the runtime (``observe.converge``), which is how a lost status
update shows.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.containerd import PrivateContainerd
from tests.harness.node import wait_for
from tests.soak.node import SoakNode
from tests.soak.observe import Fingerprint, converge
from tests.soak.plan import Counts
from tests.soak.podmix import PodSet
from tests.soak.report import Row

WORKERS_BACK_S = 60.0  # a worker that died quickly several times waits its back-off


def within(check: Callable[[], object], timeout: float) -> bool:
    """Whether ``check`` comes true within ``timeout``, polled as ``wait_for`` polls."""
    try:
        wait_for("a must-hold", check, timeout)
    except AssertionError:
        return False
    return True


@dataclass
class Soak:
    daemon: PrivateContainerd
    server: ApiServer
    kube: Kube
    node: SoakNode
    counts: Counts
    rng: random.Random
    deadline: float  # time.monotonic() when the run must end
    pods: PodSet
    uids: dict[str, str] = field(default_factory=dict)  # stable pods: status name -> uid

    def out_of_time(self) -> bool:
        return time.monotonic() >= self.deadline

    def fingerprint(self) -> Fingerprint:
        return Fingerprint.of(self.daemon.address, set(self.uids.values()))

    def workers(self) -> dict[str, dict[str, Any]]:
        return self.node.workers()

    def wait_workers_running(self, timeout: float = WORKERS_BACK_S) -> None:
        wait_for("every worker running", self.node.all_running, timeout, every=0.1)

    def settle(self, row: Row, before: Fingerprint) -> None:
        """The must-holds every fault shares; each goes into ``row``."""
        self.check_supervisor(row)
        row.check("every worker back", within(self.node.all_running, WORKERS_BACK_S))
        caused = self.fingerprint().restarts_since(before) + self.restarted_in_status()
        row.check("0 restarts caused", not caused)
        if caused:
            row.note(f"caused: {'; '.join(caused[:5])}")
        self.check_statuses(row)

    def check_supervisor(self, row: Row) -> None:
        """The supervisor runs (a fault that kills it on purpose restarts it itself); one
        that died fails the row, and is started again as systemd would."""
        proc = self.node.proc
        alive = proc is not None and proc.poll() is None
        row.check("0 supervisor crashes", alive)
        if proc is not None and not alive:
            row.note(f"the supervisor exited with status {proc.returncode}")
            self.node.main_pids.append((proc.pid, time.monotonic()))
            self.node.restart_as_systemd()

    def check_statuses(self, row: Row) -> None:
        try:
            took = converge(self.node, self.kube)
        except AssertionError as exc:
            row.check("0 status updates lost", False)
            row.note(str(exc)[-400:])
            return
        row.check("0 status updates lost", True)
        row.note(f"statuses agree {took:.1f} s after")

    def restarted_in_status(self) -> list[str]:
        pods = self.node.pods()
        return [
            f"{name}/{c['name']}: restartCount {c['restart_count']}"
            for name in sorted(self.uids)
            for c in pods.get(name, {}).get("containers", [])
            if c["restart_count"]
        ]
