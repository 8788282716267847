"""Where the prober's time went, when the prober-load figure misses a target.

No profiler (py-spy is not installed, and pkletd is not changed for the bench):
the explanation is built from /proc (per-thread CPU, ``schedstat``'s run-queue
wait, context switches of the prober's threads, measured over the window), the
lateness histogram and runs by probe type, the CPU of the other processes over
the same window, and the baseline loop's own timings. The suggestions are
heuristics from those figures.
"""

from __future__ import annotations

import os
from collections import defaultdict
from typing import Any

from pkletd.workers.prober import THREADS

from tests.bench.common import ms, ratio


def explain(
    got: dict[str, Any],
    base: dict[str, float],
    cores_needed: float,
    target_cpu: float,
    target_late: float,
) -> list[str]:
    window = got["window_s"]
    threads: dict[int, dict[str, Any]] = got["threads"]
    main = threads.get(got["prober_pid"], defaultdict(float))
    others = [t for tid, t in threads.items() if tid != got["prober_pid"]]
    by_name: dict[str, float] = defaultdict(float)
    for t in others:
        by_name[t["name"]] += t["cpu_s"]
    user = sum(t["user_s"] for t in threads.values())
    system = sum(t["system_s"] for t in threads.values())
    other_cpu = sum(t["cpu_s"] for t in others)
    other_wait = sum(t["runqueue_wait_s"] for t in others)
    machine = got["machine"]
    lines = [
        f"where the prober's time went ({window:.1f} s window, /proc): {got['cpu_s']:.2f} CPU s "
        f"(user {user:.2f}, system {system:.2f}); loop thread {main['cpu_s']:.2f} s on a CPU, "
        f"{main['runqueue_wait_s']:.2f} s runnable but waiting for one, "
        f"{main['voluntary']} voluntary / {main['involuntary']} involuntary switches; "
        f"{len(others)} other threads {other_cpu:.2f} s on a CPU, {other_wait:.2f} s waiting "
        "(by name: "
        + ", ".join(f"{n!r} {s:.2f} s" for n, s in sorted(by_name.items(), key=lambda i: -i[1]))
        + "); the pool threads keep the process title as their name",
        f"  machine: {machine['machine_busy']:.0%} busy, {machine['machine_steal']:.0%} stolen; "
        f"of it containerd {machine['cpu_containerd_s']:.1f} s, shims (runc exec) "
        f"{machine['cpu_shims_s']:.1f} s, pkletd's supervisor {machine['cpu_supervisor_s']:.1f} s"
        f" (it takes every ProbeResult), other sessions {machine['cpu_others_s']:.1f} s",
    ]
    per_run, base_run = ratio(got["cpu_s"], got["runs"]), ratio(base["cpu_s"], base["runs"])
    if got["cpu_pct"] >= target_cpu:
        lines.append(
            f"  CPU: {ms(per_run)} per run against {ms(base_run)} for the bare loop; the "
            "difference is pkletd's own work per run"
        )
        if main["cpu_s"] > 0.4 * got["cpu_s"]:
            lines.append(
                "  suggestion: the loop thread dominates: profile its turns (heap pops, "
                "launches, the results read back from the pools and reported on change)"
            )
        else:
            lines.append(
                "  suggestion: the pool threads dominate: each run is a gRPC ExecSync or a new "
                "HTTP connection (connect + request + close); keep-alive connections per pod, "
                "or the HTTP probes on an event loop, would cut the per-run cost"
            )
    expected = got["runs_expected"] / 2
    slow_http = got["readiness_runs"] < 0.95 * expected
    if got["missed"] or got["p99"] >= target_late or got["p99_capped"]:
        if cores_needed > 0.5 * (os.cpu_count() or 1):
            lines.append(
                f"  the runtime: the exec probes alone need {cores_needed:.1f} cores of runc exec "
                f"work (containerd + shims, measured in the baseline window), on a machine of "
                f"{os.cpu_count()} cores shared with other sessions: ExecSync p50 "
                f"{ms(base['exec_p50_s'])} there. No prober keeps 1 s periods for that many exec "
                f"probes here (the bare loop managed {base['runs'] / base['elapsed_s']:.0f} runs/s"
                f", {base['missed']:.0f} probes missing a period); this part is the runtime's floor"
            )
        if slow_http:
            lines.append(
                f"  the HTTP probes (GET p50 {ms(base['http_p50_s'])}) ran "
                f"{got['readiness_runs'] / window:.1f}/s of {expected / window:.1f}/s due, on "
                f"their own pool of {THREADS} threads (exec has another): what held them back "
                "is CPU, the prober's threads waiting for one (above)"
            )
        starved = main["runqueue_wait_s"] / window
        lines.append(
            "  lateness: the histogram measures when the loop hands a run to the pool; a probe "
            "whose previous run is still in flight is launched only once it finished, so here "
            f"lateness ~ queueing + run time - period. The loop thread itself waited "
            f"{starved:.0%} of the window for a CPU"
            + (
                ": CPU starvation adds to it; a higher priority (nice) for the prober would help"
                if starved > 0.05
                else ""
            )
        )
    return lines
