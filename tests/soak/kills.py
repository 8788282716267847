"""Signals: SIGKILL of random workers, SIGKILL of the supervisor (restarted as systemd
would), SIGSTOP of random workers past their heartbeat deadline.

Worker kills come at a random pace (``PACE_S``) as soon as the last victim is back, on
any worker, so a worker may die again within ``children.STABLE_S`` and wait its
crash-loop back-off: that is counted, not avoided. A stopped worker is watched until
the supervisor kills it; meanwhile the supervisor is asked for its status every
``POLL_S`` (its answer time is the figure for "nothing else waits") and no other
worker may restart.
"""

from __future__ import annotations

import os
import signal
import time
from typing import Any

from pkletd.supervisor.children import STABLE_S

from tests.harness.containerd import pid_alive
from tests.harness.node import wait_for
from tests.soak.context import Soak
from tests.soak.report import Row, seconds

PACE_S = (0.2, 1.0)
POLL_S = 0.05
BACK_S = 60.0
STATUS_SLOW_S = 1.0  # a status answer slower than this while a worker hangs: it waited
BEAT_S = 1.0  # the last heartbeat came up to one interval before the SIGSTOP
LATE_S = 3.0


def _back_with_new_pid(soak: Soak, name: str, old: int) -> dict[str, Any] | None:
    worker = soak.workers()[name]
    return worker if worker["state"] == "running" and worker["pid"] not in (0, old) else None


def kill_worker(soak: Soak, name: str) -> float:
    """SIGKILL ``name``; seconds until the supervisor reports it running again."""
    old = wait_for(f"{name} running", lambda: _back_with_new_pid(soak, name, 0), BACK_S)["pid"]
    started = time.monotonic()
    os.kill(old, signal.SIGKILL)
    wait_for(f"{name} back", lambda: _back_with_new_pid(soak, name, old), BACK_S, every=POLL_S)
    return time.monotonic() - started


def worker_kills(soak: Soak) -> Row:
    wanted = soak.counts.worker_kills
    row = Row("SIGKILL of a random worker")
    names = sorted(soak.workers())
    taken: list[float] = []
    quick: list[float] = []  # a death within STABLE_S of the start waits a back-off
    while len(taken) < wanted and not soak.out_of_time():
        name = soak.rng.choice(names)
        young = soak.workers()[name]["uptime_s"] < STABLE_S
        taken.append(kill_worker(soak, name))
        if young:
            quick.append(taken[-1])
        time.sleep(soak.rng.uniform(*PACE_S))  # the fault rate, not a synchronisation
    row.count = f"{len(taken)} of {wanted}, over {len(names)} workers"
    row.check(f"{wanted} kills", len(taken) == wanted)
    row.note(f"back (SIGKILL -> running, new pid): {seconds(taken)}")
    row.note(f"of which {len(quick)} killed within {STABLE_S:g} s of their start: {seconds(quick)}")
    return row


def parent_kills(soak: Soak) -> Row:
    wanted = soak.counts.parent_kills
    row = Row("SIGKILL of the supervisor, restarted as systemd would")
    wanted_pods = soak.pods.status_names()
    ready: list[float] = []
    adopted: list[float] = []
    for _ in range(wanted):
        if soak.out_of_time():
            break
        before = soak.fingerprint()
        started = time.monotonic()
        soak.node.kill_main()
        soak.node.restart_as_systemd()
        ready.append(time.monotonic() - started)
        wait_for("every pod known again", lambda: soak.node.pods().keys() >= wanted_pods, 60)
        adopted.append(time.monotonic() - started)
        changed = soak.fingerprint().restarts_since(before)
        row.check("the same container IDs after each", not changed)
    row.count = f"{len(ready)} of {wanted}"
    row.check(f"{wanted} kills", len(ready) == wanted)
    row.note(
        f"SIGKILL -> READY=1 (RestartSec {soak.node.unit.restart_s:g} s included): {seconds(ready)}"
    )
    row.note(f"SIGKILL -> every pod known again: {seconds(adopted)}")
    return row


def _heartbeat_timeout(soak: Soak) -> float:
    return float(soak.node.heartbeat_timeout.removesuffix("s"))


def stop_worker(soak: Soak, name: str) -> tuple[float, list[float]]:
    """SIGSTOP ``name``; seconds until the supervisor killed it, and its status answer
    times meanwhile."""
    old = wait_for(f"{name} running", lambda: _back_with_new_pid(soak, name, 0), BACK_S)["pid"]
    answers: list[float] = []
    started = time.monotonic()
    os.kill(old, signal.SIGSTOP)
    try:
        while pid_alive(old) and time.monotonic() - started < BACK_S:
            asked = time.monotonic()
            soak.workers()
            answers.append(time.monotonic() - asked)
            time.sleep(POLL_S)
        killed = time.monotonic() - started
    finally:
        if pid_alive(old):  # the supervisor did not act: do not leave it stopped
            os.kill(old, signal.SIGKILL)
    wait_for(f"{name} back", lambda: _back_with_new_pid(soak, name, old), BACK_S)
    return killed, answers


def worker_stops(soak: Soak) -> Row:
    wanted = soak.counts.worker_stops
    timeout = _heartbeat_timeout(soak)
    row = Row(f"SIGSTOP of a random worker (heartbeat timeout {timeout:g} s)")
    names = sorted(soak.workers())
    killed: list[float] = []
    answers: list[float] = []
    for _ in range(wanted):
        if soak.out_of_time():
            break
        name = soak.rng.choice(names)
        others = {n: w["restarts"] for n, w in soak.workers().items() if n != name}
        took, times = stop_worker(soak, name)
        killed.append(took)
        answers += times
        row.check("killed at its deadline", timeout - BEAT_S <= took <= timeout + LATE_S)
        after = {n: w["restarts"] for n, w in soak.workers().items() if n != name}
        row.check("no other worker restarted", after == others)
    row.count = f"{len(killed)} of {wanted}"
    row.check(f"{wanted} stops", len(killed) == wanted)
    row.check("status answered at once meanwhile", max(answers, default=0.0) < STATUS_SLOW_S)
    row.note(f"SIGSTOP -> killed: {seconds(killed)}")
    row.note(f"status answers while stopped: {seconds(answers)} over {len(answers)}")
    row.check("logged 'worker hung'", soak.node.log().count("worker hung; killing") >= len(killed))
    return row
