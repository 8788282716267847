"""Figure 12, scale: the figures of a full node at several pod counts, and the cost per pod.

For each size in ``--scale-sizes`` (50 110 250: 110 is the default ``maxPods``, 250
what clusters raise it to), from an empty runtime, the start-up figure's pods (one
busybox sleep loop each, hostNetwork) are started once by the floor and once by a
pkletd with ``maxPods`` set to the size (admission rejects a pod beyond ``maxPods``:
with the size, it takes them all), as one round of ``startup.run_rounds``. Then, on
that pkletd with its pods running:

* start-up p50 and p99, against the floor's for the same pods;
* ``pkletd status`` wall time, median of ``--scale-status-runs`` (10), against
  ``python -c pass`` (``status.wall_times``);
* ``/pods`` and ``/stats/summary`` latency, p50 and p99 of ``--scale-requests`` (30)
  rounds after an unmeasured one, against ``/healthz`` in the same rounds (the
  kubelet API figure's client and rounds, ``kubeletapi``);
* the total PSS of pkletd's processes, and each one's (``memory``);
* each pkletd process's own CPU (utime + stime) over ``--scale-window`` (20 s) in which
  nothing is asked of pkletd, in % of one core; the machine's CPU beside it (``CpuMeter``);
* what the machine has left: MemAvailable, tasks (threads) against ``pid_max``, and
  inotify instances against the per-user limit.

Then, for each figure, the slope per 100 pods between consecutive sizes (50 -> 110,
110 -> 250) and, where it has a baseline, the slope of its ratio to the baseline: a
later segment steeper than an earlier one is a cost growing faster than the pod count.
The pods use the node's network, so the CNI range (and its host-local IPAM, shared by
every harness containerd on the machine) sets no limit.
"""

from __future__ import annotations

import json
import os
import re
import time
from functools import partial
from pathlib import Path
from typing import Any

from tests.bench.common import (
    BenchPkletd,
    Context,
    CpuMeter,
    cpu_line,
    ms,
    own_ticks,
    percentile,
    progress,
    ratio,
)
from tests.bench.kubeletapi import HEALTHZ, KubeletClient, api_config, timed_rounds
from tests.bench.memory import pss_kb
from tests.bench.startup import floor_builder, pod_names, run_rounds, warm_up
from tests.bench.status import wall_times
from tests.harness.apiserver.certs import Pki
from tests.harness.node import pod_manifest

Row = dict[str, float]
ENDPOINTS = {HEALTHZ: "healthz", "/pods": "pods", "/stats/summary": "summary"}
# (figure, its baseline or None, label), in the order of the slope lines
SLOPED = (
    ("startup_p50_s", "floor_p50_s", "start-up p50 (ratio: to the floor)"),
    ("startup_p99_s", "floor_p99_s", "start-up p99 (ratio: to the floor)"),
    ("floor_p50_s", None, "the floor's p50"),
    ("status_s", "python_pass_s", "pkletd status (ratio: to python -c pass)"),
    ("pods_p50_s", "healthz_p50_s", "/pods p50 (ratio: to /healthz)"),
    ("pods_p99_s", "healthz_p99_s", "/pods p99 (ratio: to /healthz)"),
    ("summary_p50_s", "healthz_p50_s", "/stats/summary p50 (ratio: to /healthz)"),
    ("summary_p99_s", "healthz_p99_s", "/stats/summary p99 (ratio: to /healthz)"),
    ("pss_mb", None, "PSS of pkletd, MB"),
    ("cpu_all", None, "steady CPU of pkletd, % of a core"),
)
MACHINE = ("mem_available_mb", "tasks", "inotify")


def inotify_instances() -> int:
    """Open inotify instances on the machine (the limit is per user; everyone here is root)."""
    found = 0
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            found += sum(os.readlink(fd) == "anon_inode:inotify" for fd in fd_dir.iterdir())
        except OSError:
            continue
    return found


def headroom() -> Row:
    """MemAvailable (MB), tasks (threads) and inotify instances of the whole machine now."""
    available = re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text())
    assert available is not None
    tasks = Path("/proc/loadavg").read_text().split()[3].split("/")[1]
    return {
        "mem_available_mb": int(available[1]) / 1024,
        "tasks": float(tasks),
        "inotify": float(inotify_instances()),
    }


def limits() -> str:
    pid_max = Path("/proc/sys/kernel/pid_max").read_text().strip()
    inotify = Path("/proc/sys/fs/inotify/max_user_instances").read_text().strip()
    return f"pid_max {pid_max}, inotify instances per user {inotify}"


def api_latency(agent: BenchPkletd, cert: tuple[Path, Path], size: int, rounds: int) -> Row:
    """p50 and p99 of ``/healthz``, ``/pods`` and ``/stats/summary``, one after another."""
    client = KubeletClient(agent.port, cert)
    try:
        listed = len(json.loads(client.get("/pods"))["items"])
        if listed != size:
            raise AssertionError(f"/pods lists {listed} pods, want {size}")
        calls = {path: partial(client.get, path) for path in ENDPOINTS}
        timed_rounds(calls, 1)  # unmeasured: warm caches
        times = timed_rounds(calls, rounds)
    finally:
        client.close()
    return {
        f"{ENDPOINTS[path]}_p{q}_s": percentile(values, q)
        for path, values in times.items()
        for q in (50, 99)
    }


def steady_cpu(ctx: Context, agent: BenchPkletd) -> tuple[Row, dict[str, float]]:
    """Each pkletd process's CPU over the window, % of a core; and ``CpuMeter``'s figures."""
    processes = agent.process_tree()
    meter = CpuMeter(ctx.daemon, {})
    before = {pid: own_ticks(pid) for pid in processes}
    time.sleep(ctx.args.scale_window)  # the window itself: nothing is asked of pkletd
    after = {pid: own_ticks(pid) for pid in processes}
    if agent.process_tree() != processes:
        raise AssertionError("a pkletd process was replaced during the CPU window")
    per_core = 100 / os.sysconf("SC_CLK_TCK") / ctx.args.scale_window
    found = {
        f"cpu_{title.removeprefix('pkletd: ')}": (after[pid] - before[pid]) * per_core
        for pid, title in processes.items()
    }
    return found | {"cpu_all": sum(found.values())}, meter.read()


def measure_size(ctx: Context, size: int, build: Any, pki: Pki) -> Row:
    """One size: start-up against the floor, then the figures of the running pods."""
    config = {"maxPods": size, **api_config(pki.ca_cert_path)}
    floors, runs = run_rounds(
        ctx, f"scale {size}", pod_names(size, "s"), build, pod_manifest, 1, config=config
    )
    [floor], [(run, _)] = floors, runs
    agent = ctx.agent
    assert agent is not None
    row = {
        "startup_p50_s": run.p50,
        "startup_p99_s": run.p99,
        "floor_p50_s": floor.p50,
        "floor_p99_s": floor.p99,
    }
    row["status_s"], row["python_pass_s"] = wall_times(agent, ctx.args.scale_status_runs)
    progress(f"scale {size}: kubelet API, {ctx.args.scale_requests} rounds")
    row |= api_latency(agent, pki.client_cert("bench"), size, ctx.args.scale_requests)
    pss = {t.removeprefix("pkletd: "): pss_kb(p) / 1024 for p, t in agent.process_tree().items()}
    row |= {f"pss_{name}_mb": mb for name, mb in pss.items()} | {"pss_mb": sum(pss.values())}
    progress(f"scale {size}: steady CPU over {ctx.args.scale_window:.0f} s")
    cpu, machine = steady_cpu(ctx, agent)
    row |= cpu | headroom()
    print_row(size, row, machine)
    ctx.figures[f"scale_{size}_machine_cpu"] = machine
    return row


def print_row(size: int, row: Row, machine: dict[str, float]) -> None:
    print(
        f"scale, {size} pods: start-up p50 {row['startup_p50_s']:.2f} s, p99 "
        f"{row['startup_p99_s']:.2f} s vs floor {row['floor_p50_s']:.2f} / "
        f"{row['floor_p99_s']:.2f} s = {ratio(row['startup_p50_s'], row['floor_p50_s']):.2f}x"
        f" / {ratio(row['startup_p99_s'], row['floor_p99_s']):.2f}x; status "
        f"{ms(row['status_s'])} = {ratio(row['status_s'], row['python_pass_s']):.2f}x "
        f"python -c pass; /pods p50 {ms(row['pods_p50_s'])}, p99 {ms(row['pods_p99_s'])}; "
        f"/stats/summary p50 {ms(row['summary_p50_s'])}, p99 {ms(row['summary_p99_s'])} "
        f"(/healthz p50 {ms(row['healthz_p50_s'])}); PSS {row['pss_mb']:.1f} MB",
        flush=True,
    )
    names = sorted(k.removeprefix("cpu_") for k in row if k.startswith("cpu_") and k != "cpu_all")
    print(
        f"  steady CPU, % of a core / PSS MB: all {row['cpu_all']:.2f} / {row['pss_mb']:.1f}, "
        + ", ".join(f"{n} {row[f'cpu_{n}']:.2f} / {row[f'pss_{n}_mb']:.1f}" for n in names)
        + f" {cpu_line(machine)}"
    )
    print(
        f"  machine: MemAvailable {row['mem_available_mb']:.0f} MB, {row['tasks']:.0f} tasks, "
        f"{row['inotify']:.0f} inotify instances ({limits()})",
        flush=True,
    )


def slopes(rows: dict[int, Row], key: str, base: str | None) -> tuple[list[float], list[float]]:
    """Per 100 pods between consecutive sizes: of ``key``, and of its ratio to ``base``."""
    sizes = sorted(rows)
    pairs = list(zip(sizes, sizes[1:], strict=False))

    def value(size: int, of_ratio: bool) -> float:
        row = rows[size]
        return ratio(row[key], row[base]) if of_ratio and base else row[key]

    def per_100(of_ratio: bool) -> list[float]:
        return [100 * (value(b, of_ratio) - value(a, of_ratio)) / (b - a) for a, b in pairs]

    return per_100(False), per_100(True) if base else []


def shown(key: str, value: float) -> str:
    if key.endswith("_s"):
        return f"{value * 1000:+.1f} ms"
    return f"{value:+.2f}"


def report_slopes(ctx: Context, rows: dict[int, Row]) -> None:
    sizes = sorted(rows)
    segments = " | ".join(f"{a}->{b}" for a, b in zip(sizes, sizes[1:], strict=False))
    print(f"scale, cost per 100 pods ({segments}):")
    cpu_keys = sorted(k for k in rows[sizes[0]] if k.startswith("cpu_") and k != "cpu_all")
    sloped = [
        *SLOPED,
        *((k, None, f"  steady CPU of {k.removeprefix('cpu_')}, % of a core") for k in cpu_keys),
        *((k, None, f"machine: {k}") for k in MACHINE),
    ]
    found = {}
    for key, base, label in sloped:
        plain, of_ratio = slopes(rows, key, base)
        line = f"  {label}: " + " | ".join(shown(key, v) for v in plain)
        if of_ratio:
            line += "; ratio " + " | ".join(f"{v:+.2f}x" for v in of_ratio)
        print(line)
        found[key] = {"per_100_pods": plain, "ratio_per_100_pods": of_ratio}
    ctx.figures["scale_slopes"] = found


def section(ctx: Context) -> None:
    sizes = sorted(ctx.args.scale_sizes)
    progress(f"scale: sizes {sizes}; machine now {headroom()}, {limits()}")
    build, _ = floor_builder(ctx.daemon.address, ctx.args, ctx.keep, pod_manifest)
    warm_up(ctx, build)
    pki = Pki(ctx.scratch / "scale-pki")
    rows: dict[int, Row] = {}
    try:
        for size in sizes:  # the next size's run_rounds stops this size's pkletd
            rows[size] = measure_size(ctx, size, build, pki)
            ctx.figures[f"scale_{size}"] = rows[size]
    finally:
        ctx.drop_agent()
    if len(rows) > 1:
        report_slopes(ctx, rows)
