"""Figure 2, worker restart, with the pods still running (the last start-up run's).

``http``: SIGKILL, then time until ``GET 127.0.0.1:<healthzPort>/healthz``
answers ``ok`` (polled every 1 ms, once the killed pid is gone, so the dying
process cannot answer). ``pleg``: SIGKILL, then time until status shows it
running with a new pid, polled every 5 ms: a status request with 100 pods costs
the supervisor's single loop thread about 1 ms, so polling every 1 ms slowed
down the very restart being timed (medians ~90 ms against ~60 ms). ``--kills``
each, median. Also printed: the fork -> ready times pkletd logs itself
(``ready_after_ms``).

pkletd restarts a worker at once only if it ran for ``children.STABLE_S`` (10 s);
a worker killed sooner is a "quick death" and waits an exponential backoff (0.1
s, 0.2 s, ... by design, against crash loops). So each kill is made once the
worker has been up for STABLE_S: that measures the restart path, not the
crash-loop policy. The http and pleg kills are interleaved so their waits
overlap (about STABLE_S per round). These waits are most of this figure's time:
``--kills`` defaults to 5 (it was 10) to keep the whole bench within about 8
minutes now that it also has the pod-mix and prober figures. The bench checks
that no pod changed meanwhile. Baseline: a cold ``python -c "import
pkletd.workers.http, pkletd.workers.pleg"`` run by subprocess and waited for,
median of 5: what a spawn-based restart would pay before doing anything.
"""

from __future__ import annotations

import http.client
import os
import re
import signal
import statistics
import time
from collections.abc import Callable
from typing import Any

from pkletd.supervisor.children import STABLE_S

from tests.bench.common import (
    PYTHON,
    Context,
    ms,
    pod_running,
    poll_until,
    progress,
    ratio,
    timed_runs,
    verdict,
)
from tests.harness.containerd import pid_alive
from tests.harness.node import Pkletd, wait_for

RESTART_POLL_S = 0.001
# Each status request costs the supervisor's one loop thread ~1 ms with 100 pods:
# polled every 1 ms it would slow down the very restart it times.
RESTART_STATUS_POLL_S = 0.005
TARGET_RESTART_S = 0.1


def healthz_ok(port: int) -> bool:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=1.0)
    try:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        return response.status == 200 and response.read() == b"ok"
    except OSError:
        return False
    finally:
        conn.close()


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


def kill_http(agent: Pkletd) -> float:
    old = wait_stable(agent, "http")["pid"]
    t0 = time.perf_counter()
    os.kill(old, signal.SIGKILL)
    poll_until("killed http gone", lambda: not pid_alive(old), RESTART_POLL_S / 10)
    poll_until("healthz ok", lambda: healthz_ok(agent.healthz_port), RESTART_POLL_S)
    took = time.perf_counter() - t0
    wait_for("http running again", back_with_new_pid(agent, "http", old), every=0.01)
    return took


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


def section(ctx: Context) -> None:
    agent, kills = ctx.agent, ctx.args.kills
    assert agent is not None
    before = {n: p["containers"][0]["container_id"] for n, p in agent.pods().items()}
    progress(
        f"worker restarts: {kills} SIGKILLs each of http and pleg, "
        f"each after {STABLE_S:.0f}s of uptime (about {kills * STABLE_S:.0f}s)"
    )
    http_times, pleg_times = [], []
    for _ in range(kills):
        http_times.append(kill_http(agent))
        pleg_times.append(kill_pleg(agent))
    cold = timed_runs([str(PYTHON), "-c", "import pkletd.workers.http, pkletd.workers.pleg"], 5)
    http_med, pleg_med, cold_med = (statistics.median(t) for t in (http_times, pleg_times, cold))
    ready = {name: ready_after(agent.log(), name)[-kills:] for name in ("http", "pleg")}
    print(
        f"worker restart http (SIGKILL -> healthz ok, median of {kills}): "
        f"{ms(http_med)} vs cold import {ms(cold_med)} = {ratio(http_med, cold_med):.2f}x "
        f"[target < {ms(TARGET_RESTART_S)}: {verdict(http_med < TARGET_RESTART_S)}]"
    )
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
            "restart_http_median_s": http_med,
            "restart_pleg_median_s": pleg_med,
            "restart_http_max_s": max(http_times),
            "restart_pleg_max_s": max(pleg_times),
            "restart_cold_import_median_s": cold_med,
            **{
                f"restart_{n}_log_ready_median_s": statistics.median(v) / 1000
                for n, v in ready.items()
                if v
            },
            "restart_http_ratio": ratio(http_med, cold_med),
            "restart_pleg_ratio": ratio(pleg_med, cold_med),
        }
    )
    targets = ctx.figures["targets_met"]
    targets["restart_http"] = http_med < TARGET_RESTART_S
    targets["restart_pleg"] = pleg_med < TARGET_RESTART_S
