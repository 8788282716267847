"""Figure 3, ``pkletd status --run-dir ...`` wall time, with the start-up figure's pods.

Measured as users run it: pkletd built as a wheel and installed, without its
dependencies (``status`` needs none), into a fresh venv of its own
(``installed_cli``), not the checkout's editable install, whose import hook costs
every python of the venv (``python -c pass`` too) and so flatters the ratio; the
checkout's figure is printed too. 20 runs of each, ``pkletd status`` and ``python
-c pass`` with the same venv's python, in turn (so load drifts touch both alike),
after one unmeasured run of each; medians of the wall time and of the CPU time
(user + system, from ``wait4``), which the machine's load blurs less. Target:
1.5x (issue 21). Also printed: the control request alone, made in-process.
"""

from __future__ import annotations

import functools
import os
import statistics
import subprocess
import time
from pathlib import Path

from tests.bench.common import (
    PKLETD,
    PYTHON,
    REPO,
    BenchPkletd,
    Context,
    ms,
    progress,
    ratio,
    verdict,
)

TARGET_RATIO = 1.5
RUNS = 20
INSTALL_TIMEOUT_S = 600
PIP = PYTHON.parent / "pip"


@functools.cache
def installed_cli(scratch: Path) -> tuple[Path, Path]:
    """(python, pkletd) of a fresh venv holding pkletd's wheel built from the checkout
    (once per bench run)."""
    wheels, venv = scratch / "wheel", scratch / "status-venv"

    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}  # the checkout's

    def run(*cmd: str) -> None:
        subprocess.run(
            cmd, check=True, capture_output=True, cwd=scratch, env=env, timeout=INSTALL_TIMEOUT_S
        )

    run(str(PIP), "wheel", "-q", "--no-deps", "-w", str(wheels), str(REPO))
    run(str(PYTHON), "-m", "venv", "--without-pip", str(venv))
    [wheel] = wheels.glob("pkletd-*.whl")
    run(
        str(PIP), "--python", str(venv / "bin" / "python"), "install", "-q", "--no-deps", str(wheel)
    )
    return venv / "bin" / "python", venv / "bin" / "pkletd"


def run_once(cmd: list[str]) -> tuple[float, float]:
    """(wall s, CPU s) of one run of ``cmd``, which must succeed."""
    t0 = time.perf_counter()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    assert proc.stderr is not None
    err = proc.stderr.read()
    _, code, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - t0
    proc.returncode = os.waitstatus_to_exitcode(code)
    if proc.returncode != 0:
        raise AssertionError(f"{cmd} exited {proc.returncode}: {err.decode()[-2000:]}")
    return wall, usage.ru_utime + usage.ru_stime


def in_turn(status: list[str], bare: list[str], runs: int) -> dict[str, float]:
    """Medians (wall, CPU) of ``runs`` runs of each command, one after the other."""
    times: dict[str, list[float]] = {k: [] for k in ("wall", "cpu", "bare_wall", "bare_cpu")}
    run_once(status), run_once(bare)  # fill the bytecode cache
    for _ in range(runs):
        wall, cpu = run_once(status)
        bare_wall, bare_cpu = run_once(bare)
        for key, value in zip(times, (wall, cpu, bare_wall, bare_cpu), strict=True):
            times[key].append(value)
    return {key: statistics.median(values) for key, values in times.items()}


def measure(agent: BenchPkletd, python: Path, pkletd: Path, runs: int = RUNS) -> dict[str, float]:
    status = [str(pkletd), "status", "--run-dir", str(agent.run_dir)]
    return in_turn(status, [str(python), "-c", "pass"], runs)


def wall_times(ctx: Context, agent: BenchPkletd, runs: int) -> tuple[float, float]:
    """Medians of ``runs`` runs of the installed ``pkletd status`` and of ``python -c pass``."""
    got = measure(agent, *installed_cli(ctx.scratch), runs)
    return got["wall"], got["bare_wall"]


def section(ctx: Context) -> None:
    agent = ctx.agent
    assert agent is not None
    progress("pkletd status: building and installing the wheel in a venv of its own")
    python, pkletd = installed_cli(ctx.scratch)
    progress(f"pkletd status: {RUNS} runs each of it and python -c pass, in turn")
    got = measure(agent, python, pkletd)
    checkout = measure(agent, PYTHON, PKLETD)
    request_times = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        agent.status()
        request_times.append(time.perf_counter() - t0)
    request_med = statistics.median(request_times)
    wall_ratio, cpu_ratio = ratio(got["wall"], got["bare_wall"]), ratio(got["cpu"], got["bare_cpu"])
    print(
        f"pkletd status wall time (installed wheel, median of {RUNS}, {ctx.args.pods} pods): "
        f"{ms(got['wall'])} vs python -c pass {ms(got['bare_wall'])} = {wall_ratio:.2f}x; "
        f"CPU {ms(got['cpu'])} vs {ms(got['bare_cpu'])} = {cpu_ratio:.2f}x "
        f"[target <= {TARGET_RATIO}x: {verdict(wall_ratio <= TARGET_RATIO)}]"
    )
    print(
        f"  from the checkout's editable install: {ms(checkout['wall'])} vs "
        f"{ms(checkout['bare_wall'])} = {ratio(checkout['wall'], checkout['bare_wall']):.2f}x; "
        f"the control request itself (in-process, median of {RUNS}): {ms(request_med)}"
    )
    ctx.figures.update(
        {
            "status_request_median_s": request_med,
            "status_cli_median_s": got["wall"],
            "status_python_pass_median_s": got["bare_wall"],
            "status_cli_cpu_s": got["cpu"],
            "status_python_pass_cpu_s": got["bare_cpu"],
            "status_ratio": wall_ratio,
            "status_cpu_ratio": cpu_ratio,
            "status_checkout_ratio": ratio(checkout["wall"], checkout["bare_wall"]),
        }
    )
    ctx.figures["targets_met"]["status_cli"] = wall_ratio <= TARGET_RATIO
