"""Figure 3, ``pkletd status --run-dir ...`` wall time, with the start-up figure's pods.

20 runs, median; baseline: ``python -c pass`` with the venv's python, 20 runs,
median. Also printed: the control request alone, made in-process.
"""

from __future__ import annotations

import statistics
import time

from tests.bench.common import (
    PKLETD,
    PYTHON,
    BenchPkletd,
    Context,
    ms,
    progress,
    ratio,
    timed_runs,
    verdict,
)

TARGET_STATUS_S = 0.1


def wall_times(agent: BenchPkletd, runs: int) -> tuple[float, float]:
    """Medians of ``runs`` runs of ``pkletd status`` and of ``python -c pass``."""
    progress(f"pkletd status: {runs} runs, and python -c pass: {runs} runs")
    status_times = timed_runs([str(PKLETD), "status", "--run-dir", str(agent.run_dir)], runs)
    bare_times = timed_runs([str(PYTHON), "-c", "pass"], runs)
    return statistics.median(status_times), statistics.median(bare_times)


def section(ctx: Context) -> None:
    agent = ctx.agent
    assert agent is not None
    status_med, bare_med = wall_times(agent, 20)
    request_times = []
    for _ in range(20):
        t0 = time.perf_counter()
        agent.status()
        request_times.append(time.perf_counter() - t0)
    request_med = statistics.median(request_times)
    print(
        f"pkletd status wall time (median of 20, {ctx.args.pods} pods): {ms(status_med)} vs "
        f"python -c pass {ms(bare_med)} = {ratio(status_med, bare_med):.2f}x "
        f"[target < {ms(TARGET_STATUS_S)}: {verdict(status_med < TARGET_STATUS_S)}]"
    )
    print(f"  of which the control request itself (in-process, median of 20): {ms(request_med)}")
    ctx.figures.update(
        {
            "status_request_median_s": request_med,
            "status_cli_median_s": status_med,
            "status_python_pass_median_s": bare_med,
            "status_ratio": ratio(status_med, bare_med),
        }
    )
    ctx.figures["targets_met"]["status_cli"] = status_med < TARGET_STATUS_S
