"""Figure 12, scale: the figures of a full node at several pod counts, and the cost per pod.

For each size in ``--scale-sizes`` (50 110 250: 110 is the default ``maxPods``, 250
what clusters raise it to), from an empty runtime, the start-up figure's pods (one
busybox sleep loop each, hostNetwork) are started once by the floor and once by a
pkletd with ``maxPods`` set to the size (admission rejects a pod beyond ``maxPods``:
with the size, it takes them all), as one round of ``startup.run_rounds``. Then, on
that pkletd with its pods running:

* start-up p50 and p99, against the floor's for the same pods;
* ``pkletd status`` wall time, median of ``--scale-status-runs`` (10), against
  ``python -c pass`` (``status.wall_times``: the installed wheel's);
* ``/pods`` and ``/stats/summary`` latency, p50 and p99 of ``--scale-requests`` (30)
  rounds after an unmeasured one, against ``/healthz`` in the same rounds (the
  kubelet API figure's client and rounds, ``kubeletapi``);
* the total PSS of pkletd's processes, and each one's (``memory``);
* each pkletd process's own CPU (utime + stime) over ``--scale-window`` (20 s) in which
  nothing is asked of pkletd, in % of one core; the machine's CPU beside it (``CpuMeter``);
* what the runtime holds (containerd, its shims and all under them: PSS and threads),
  and what the machine has left: MemAvailable, tasks (threads) against ``pid_max``, and
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
import statistics
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import Any

from pkletd.supervisor.cli import status_reply

from tests.bench.common import (
    BenchPkletd,
    Context,
    CpuMeter,
    cpu_line,
    descendants,
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
from tests.harness.containerd import PrivateContainerd, find_shims, pid_alive
from tests.harness.node import pod_manifest

Row = dict[str, float]
ENDPOINTS = {HEALTHZ: "healthz", "/pods": "pods", "/stats/summary": "summary"}
# (figure, label, its baseline and the baseline's name, or None), in the order of the slopes
SLOPED: tuple[tuple[str, str, tuple[str, str] | None], ...] = (
    ("startup_p50_s", "start-up p50", ("floor_p50_s", "the floor")),
    ("startup_p99_s", "start-up p99", ("floor_p99_s", "the floor")),
    ("floor_p50_s", "the floor's p50", None),
    ("status_s", "pkletd status", ("python_pass_s", "python -c pass")),
    ("pods_p50_s", "/pods p50", ("healthz_p50_s", "/healthz")),
    ("pods_p99_s", "/pods p99", ("healthz_p99_s", "/healthz")),
    ("summary_p50_s", "/stats/summary p50", ("healthz_p50_s", "/healthz")),
    ("summary_p99_s", "/stats/summary p99", ("healthz_p99_s", "/healthz")),
    ("pss_mb", "PSS of pkletd, MB", None),
    ("runtime_pss_mb", "PSS of the runtime (containerd, shims, pods), MB", None),
    ("runtime_tasks", "tasks of the runtime (threads)", None),
    ("cpu_all", "steady CPU of pkletd, % of a core", None),
)


def inotify_instances() -> int:
    """Open inotify instances on the machine (the limit is per user; everyone here is root)."""
    found = 0
    for fd_dir in Path("/proc").glob("[0-9]*/fd"):
        try:
            found += sum(os.readlink(fd) == "anon_inode:inotify" for fd in fd_dir.iterdir())
        except OSError:
            continue
    return found


def threads(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[17])
    except OSError:
        return 0


def headroom(daemon: PrivateContainerd) -> Row:
    """The whole machine's MemAvailable (MB), tasks (threads) and inotify instances now;
    and the PSS and threads of our runtime: containerd, its shims and all under them."""
    available = re.search(r"MemAvailable:\s+(\d+)", Path("/proc/meminfo").read_text())
    assert available is not None
    tasks = Path("/proc/loadavg").read_text().split()[3].split("/")[1]
    runtime = descendants([daemon.pid() or 0, *(s.pid for s in find_shims(daemon.socket_path))])
    return {
        "mem_available_mb": int(available[1]) / 1024,
        "tasks": float(tasks),
        "inotify": float(inotify_instances()),
        "runtime_pss_mb": sum(pss_kb(pid) for pid in runtime if pid_alive(pid)) / 1024,
        "runtime_tasks": float(sum(threads(pid) for pid in runtime)),
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
    row["status_s"], row["python_pass_s"] = wall_times(ctx, agent, ctx.args.scale_status_runs)
    row["status_request_s"] = request_time(agent, ctx.args.scale_status_runs)
    progress(f"scale {size}: kubelet API, {ctx.args.scale_requests} rounds")
    row |= api_latency(agent, pki.client_cert("bench"), size, ctx.args.scale_requests)
    pss = {t.removeprefix("pkletd: "): pss_kb(p) / 1024 for p, t in agent.process_tree().items()}
    row |= {f"pss_{name}_mb": mb for name, mb in pss.items()} | {"pss_mb": sum(pss.values())}
    progress(f"scale {size}: steady CPU over {ctx.args.scale_window:.0f} s")
    cpu, machine = steady_cpu(ctx, agent)
    row |= cpu | headroom(ctx.daemon)
    print_row(size, row, machine)
    ctx.figures[f"scale_{size}_machine_cpu"] = machine
    return row


def request_time(agent: BenchPkletd, runs: int) -> float:
    """Median of ``runs`` of what ``pkletd status`` asks, made in-process."""
    times = []
    for _ in range(runs):
        t0 = time.perf_counter()
        status_reply(str(agent.run_dir))
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def print_row(size: int, row: Row, machine: dict[str, float]) -> None:
    print(
        f"scale, {size} pods: start-up p50 {row['startup_p50_s']:.2f} s, p99 "
        f"{row['startup_p99_s']:.2f} s vs floor {row['floor_p50_s']:.2f} / "
        f"{row['floor_p99_s']:.2f} s = {ratio(row['startup_p50_s'], row['floor_p50_s']):.2f}x"
        f" / {ratio(row['startup_p99_s'], row['floor_p99_s']):.2f}x; status "
        f"{ms(row['status_s'])} = {ratio(row['status_s'], row['python_pass_s']):.2f}x "
        f"python -c pass (the control request alone, in-process: "
        f"{ms(row['status_request_s'])}); /pods p50 {ms(row['pods_p50_s'])}, p99 "
        f"{ms(row['pods_p99_s'])}; "
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
        f"  runtime (containerd, shims, pods): PSS {row['runtime_pss_mb']:.0f} MB, "
        f"{row['runtime_tasks']:.0f} threads; machine: MemAvailable "
        f"{row['mem_available_mb']:.0f} MB, {row['tasks']:.0f} tasks, "
        f"{row['inotify']:.0f} inotify instances ({limits()})",
        flush=True,
    )


def slopes(rows: dict[int, Row], key: str, base: str | None) -> tuple[list[float], list[float]]:
    """Per 100 pods between consecutive sizes: of ``key``, and of its ratio to ``base``."""
    sizes = sorted(rows)
    pairs = list(zip(sizes, sizes[1:], strict=False))

    def per_100(value: Callable[[Row], float]) -> list[float]:
        return [100 * (value(rows[b]) - value(rows[a])) / (b - a) for a, b in pairs]

    plain = per_100(lambda row: row[key])
    return plain, per_100(lambda row: ratio(row[key], row[base])) if base else []


def shown(key: str, value: float) -> str:
    if key.endswith("_s"):
        return f"{value:+.2f} s" if abs(value) >= 1 else f"{value * 1000:+.1f} ms"
    return f"{value:+.2f}"


def report_slopes(ctx: Context, rows: dict[int, Row]) -> None:
    sizes = sorted(rows)
    segments = " | ".join(f"{a}->{b}" for a, b in zip(sizes, sizes[1:], strict=False))
    print(f"scale, cost per 100 pods ({segments}):")
    cpu_keys = sorted(k for k in rows[sizes[0]] if k.startswith("cpu_") and k != "cpu_all")
    sloped = [
        *SLOPED,
        *((k, f"  steady CPU of {k.removeprefix('cpu_')}, % of a core", None) for k in cpu_keys),
    ]
    found = {}
    for key, label, base in sloped:
        plain, of_ratio = slopes(rows, key, base[0] if base else None)
        line = f"  {label}: " + " | ".join(shown(key, v) for v in plain)
        if base:
            line += f"; its ratio to {base[1]}: " + " | ".join(f"{v:+.2f}x" for v in of_ratio)
        print(line)
        found[key] = {"per_100_pods": plain, "ratio_per_100_pods": of_ratio}
    ctx.figures["scale_slopes"] = found


def section(ctx: Context) -> None:
    sizes = sorted(ctx.args.scale_sizes)
    progress(f"scale: sizes {sizes}; now {headroom(ctx.daemon)}, {limits()}")
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
