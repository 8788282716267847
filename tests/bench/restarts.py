"""Figure 2, worker restart, with the pods still running (the last start-up run's).

``http``: ``--http-kills`` SIGKILLs (20). Around each one, from ``HTTP_WINDOW_S``
before the kill to as long after the worker serves again, a thread sends
``GET 127.0.0.1:<healthzPort>/healthz`` in a tight loop, one request after another,
each on a new connection (``tests/harness/requestloop.py``). Printed: the requests,
how many were refused (``ECONNREFUSED``: nothing listened), how many were cut (in
flight in the killed worker: accepted, then reset by its death; a SIGKILL cannot be
hidden from those), the longest wait of one request, and the time to serving again:
from the SIGKILL to the answer of the first request begun after it (a request begun
before it may be answered by the new worker too, from the listen backlog; counting from
the next one adds at most one request's time), split at the moment the kernel has ended
the killed process (its pidfd turns readable: all its threads gone, its memory unmapped;
no sooner can pkletd learn of the death). ``pleg``: SIGKILL, then time until
status shows it running with a new pid, polled every 5 ms: a status request with 100
pods costs the supervisor's single loop thread about 1 ms, so polling every 1 ms slowed
down the very restart being timed (medians ~90 ms against ~60 ms). ``--kills`` (5),
median. Also printed: the fork -> ready times pkletd logs itself (``ready_after_ms``).

pkletd restarts a worker at once only if it ran for ``children.STABLE_S`` (10 s);
a worker killed sooner is a "quick death" and waits an exponential backoff (0.1
s, 0.2 s, ... by design, against crash loops). So each kill is made once the
worker has been up for STABLE_S: that measures the restart path, not the
crash-loop policy. The http and pleg kills are interleaved so their waits
overlap (about STABLE_S per round): 20 http kills take about 4 minutes. The bench
checks that no pod changed meanwhile. Baseline: a cold ``python -c "import
pkletd.workers.http, pkletd.workers.pleg"`` run by subprocess and waited for,
median of 5: what a spawn-based restart would pay before doing anything; and for the
longest wait, the loop's median request while nothing is killed.

``--only restarts`` runs this figure alone on a pkletd with no pod.
"""

from __future__ import annotations

import os
import re
import select
import signal
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pkletd.supervisor.children import STABLE_S

from tests.bench.common import (
    PYTHON,
    BenchPkletd,
    Context,
    ms,
    pod_running,
    poll_until,
    progress,
    ratio,
    timed_runs,
    verdict,
)
from tests.harness.node import Pkletd, wait_for
from tests.harness.requestloop import Attempt, Outcome, RequestLoop, healthz

RESTART_POLL_S = 0.001
# Each status request costs the supervisor's one loop thread ~1 ms with 100 pods:
# polled every 1 ms it would slow down the very restart it times.
RESTART_STATUS_POLL_S = 0.005
TARGET_RESTART_S = 0.1
TARGET_HTTP_RESTART_S = 0.025
HTTP_WINDOW_S = 0.3  # the request loop runs this long before each kill and after


@dataclass(frozen=True, slots=True)
class HttpKill:
    killed_at: float  # time.perf_counter()
    dead: float  # SIGKILL -> the kernel has ended the process (its pidfd is readable)
    serving_again: float  # SIGKILL -> the first request begun after it answered
    attempts: list[Attempt]  # the loop's, around this kill


def wait_stable(agent: Pkletd, name: str) -> dict[str, Any]:
    """Wait until ``name`` runs and has been up STABLE_S: its next death is not a quick one."""

    def stable() -> dict[str, Any] | None:
        worker = agent.workers()[name]
        ok = worker["state"] == "running" and worker["uptime_s"] >= STABLE_S + 0.25
        return worker if ok else None

    return wait_for(f"{name} up for {STABLE_S:.0f}s", stable, timeout=STABLE_S + 30, every=0.1)


def back_with_new_pid(agent: Pkletd, name: str, old: int) -> Callable[[], bool]:
    def check() -> bool:
        worker = agent.workers()[name]
        return bool(worker["state"] == "running" and worker["pid"] not in (0, old))

    return check


def kill_http(agent: Pkletd) -> HttpKill:
    old = wait_stable(agent, "http")["pid"]
    loop = RequestLoop(healthz(agent.healthz_port)).start()
    time.sleep(HTTP_WINDOW_S)  # a measuring window, not a wait for anything
    pidfd = os.pidfd_open(old)
    try:
        t0 = time.perf_counter()
        os.kill(old, signal.SIGKILL)
        select.select([pidfd], [], [], 30.0)  # readable once the process has ended
        dead = time.perf_counter() - t0
    finally:
        os.close(pidfd)
    poll_until("healthz answered again", lambda: bool(loop.answered_since(t0)), RESTART_POLL_S)
    answered = loop.answered_since(t0)
    assert answered is not None
    time.sleep(HTTP_WINDOW_S)
    attempts = loop.stop()
    wait_for("http running again", back_with_new_pid(agent, "http", old), every=0.01)
    return HttpKill(t0, dead, answered.ended - t0, attempts)


def kill_pleg(agent: Pkletd) -> float:
    old = wait_stable(agent, "pleg")["pid"]
    t0 = time.perf_counter()
    os.kill(old, signal.SIGKILL)
    poll_until("pleg running", back_with_new_pid(agent, "pleg", old), RESTART_STATUS_POLL_S)
    return time.perf_counter() - t0


def ready_after(log_text: str, name: str) -> list[float]:
    """Milliseconds from fork to ready of each start of worker ``name``, from the supervisor log."""
    pattern = rf"worker state worker={re.escape(name)} state=running .*ready_after_ms=([0-9.]+)"
    return [float(m) for m in re.findall(pattern, log_text)]


def standalone(ctx: Context) -> None:
    """``--only restarts``: the http and pleg kills on a pkletd of its own, with no pod."""
    agent = ctx.agent = BenchPkletd(ctx.daemon.address, ctx.args.parallelism)
    try:
        agent.start()
        section(ctx)
    finally:
        ctx.drop_agent()


def section(ctx: Context) -> None:
    agent, kills, http_kills = ctx.agent, ctx.args.kills, ctx.args.http_kills
    assert agent is not None
    before = {n: p["containers"][0]["container_id"] for n, p in agent.pods().items()}
    progress(
        f"worker restarts: {http_kills} SIGKILLs of http with healthz in a loop, {kills} of "
        f"pleg, each after {STABLE_S:.0f}s of uptime (about {http_kills * STABLE_S:.0f}s)"
    )
    http: list[HttpKill] = []
    pleg_times: list[float] = []
    for i in range(max(kills, http_kills)):
        if i < http_kills:
            http.append(kill_http(agent))
        if i < kills:
            pleg_times.append(kill_pleg(agent))
    cold = timed_runs([str(PYTHON), "-c", "import pkletd.workers.http, pkletd.workers.pleg"], 5)
    cold_med = statistics.median(cold)
    ready = {name: ready_after(agent.log(), name)[-kills:] for name in ("http", "pleg")}
    report_http(ctx, http, cold_med)
    pleg_med = statistics.median(pleg_times)
    print(
        f"worker restart pleg (SIGKILL -> running, new pid, median of {kills}): "
        f"{ms(pleg_med)} vs cold import {ms(cold_med)} = {ratio(pleg_med, cold_med):.2f}x "
        f"[target < {ms(TARGET_RESTART_S)}: {verdict(pleg_med < TARGET_RESTART_S)}]"
    )
    print(
        "  pkletd's own log, fork -> worker ready, median: "
        + ", ".join(f"{n} {statistics.median(v):.1f} ms" for n, v in ready.items() if v)
    )
    after = {n: p["containers"][0]["container_id"] for n, p in agent.pods().items()}
    if after != before or not all(pod_running(p) for p in agent.pods().values()):
        raise AssertionError("a pod changed while workers were killed")
    ctx.figures.update(
        {
            "restart_kills": kills,
            "restart_pleg_median_s": pleg_med,
            "restart_pleg_max_s": max(pleg_times),
            "restart_cold_import_median_s": cold_med,
            **{
                f"restart_{n}_log_ready_median_s": statistics.median(v) / 1000
                for n, v in ready.items()
                if v
            },
            "restart_pleg_ratio": ratio(pleg_med, cold_med),
        }
    )
    ctx.figures["targets_met"]["restart_pleg"] = pleg_med < TARGET_RESTART_S


def report_http(ctx: Context, kills: list[HttpKill], cold_med: float) -> None:
    attempts = [a for kill in kills for a in kill.attempts]
    counts = {o: sum(1 for a in attempts if a.outcome is o) for o in Outcome}
    longest = max(a.wait for a in attempts)
    quiet = statistics.median(
        a.wait for kill in kills for a in kill.attempts if a.ended < kill.killed_at
    )
    again = [kill.serving_again for kill in kills]
    median = statistics.median(again)
    dead = statistics.median(kill.dead for kill in kills)
    ours = statistics.median(kill.serving_again - kill.dead for kill in kills)
    refused, cut, failed = counts[Outcome.REFUSED], counts[Outcome.CUT], counts[Outcome.FAILED]
    print(
        f"worker restart http, {len(kills)} SIGKILLs, healthz in a tight loop "
        f"({len(attempts)} requests, each on a new connection): refused {refused} "
        f"[target 0: {verdict(refused == 0)}], cut in the killed worker {cut}, failed {failed}; "
        f"longest wait {ms(longest)} vs a request with nothing killed {ms(quiet)} = "
        f"{ratio(longest, quiet):.0f}x"
    )
    print(
        f"worker restart http (SIGKILL -> serving again, median of {len(kills)}, max "
        f"{ms(max(again))}): {ms(median)} vs cold import {ms(cold_med)} = "
        f"{ratio(median, cold_med):.2f}x "
        f"[target <= {ms(TARGET_HTTP_RESTART_S)}: {verdict(median <= TARGET_HTTP_RESTART_S)}]"
    )
    print(
        f"  of which the kernel ending the killed worker (SIGKILL -> its pidfd readable), "
        f"median {ms(dead)}; its end -> serving again, median {ms(ours)}"
    )
    errors = sorted({a.error for a in attempts if a.outcome is Outcome.FAILED})
    if errors:
        print("  failed requests: " + "; ".join(errors[:5]))
    ctx.figures.update(
        {
            "restart_http_kills": len(kills),
            "restart_http_median_s": median,
            "restart_http_max_s": max(again),
            "restart_http_dead_median_s": dead,
            "restart_http_dead_to_serving_median_s": ours,
            "restart_http_ratio": ratio(median, cold_med),
            "restart_http_requests": len(attempts),
            "restart_http_refused": refused,
            "restart_http_cut": cut,
            "restart_http_failed": failed,
            "restart_http_longest_wait_s": longest,
            "restart_http_quiet_request_s": quiet,
        }
    )
    targets = ctx.figures["targets_met"]
    targets["restart_http"] = median <= TARGET_HTTP_RESTART_S
    targets["restart_http_refused"] = refused == 0
