"""Figure 10, PLEG: a container's exit to the pod's status, on containerd's events against
1 s relisting; and the pleg worker's steady CPU, both ways.

One pkletd, in two modes: ``evented`` (the default: containerd's event stream, a relist
every 5 minutes) and ``relisting`` (``--pleg-runtime-events=false``: a relist every
second, as the kubelet's generic PLEG; the baseline), switched by restarting it (its pods
run on and are adopted again). It runs ``--pleg-pods`` (110, a full node) static
hostNetwork pods of one busybox container (``tests.harness.node.pod_manifest``): ``--pleg-pods``
less ``--pleg-batch`` steady ones (a sleep loop, restartPolicy Always) and a batch of
``--pleg-batch`` (20) exit pods (the same loop, restartPolicy Never, so an exit stays in
the status). The batches alternate between the modes in ABBA order, so that the load of
a shared machine, which drifts, falls alike on both.

CPU: with all 110 pods running, in each mode, the CPU seconds of the pleg worker (utime +
stime of its ``/proc/<pid>/stat``), the supervisor and our containerd (``CpuMeter``: a
relist costs containerd its CRI lists too) over ``--pleg-window`` (30 s) in which nothing
happens.

Exits: ``--pleg-exits`` (200), a batch at a time: the batch's containers are SIGKILLed at
random times spread over ``--pleg-spread`` (4 s; exits are independent events: all at one
instant would measure containerd's exit handling, which is one at a time, instead), pids
from ``ctr task ls``, each kill's time taken just before it. Meanwhile three ways in are
read in turn, one every ``--pleg-poll-ms`` (15) ms, until each shows every one exited:
the CRI itself (ListContainers of the exited ones: the runtime's own view, which no PLEG
can beat), ``pkletd status`` and the read-only port's ``/pods``. An exit's latency is its
kill to the arrival of the first reply that shows it (at most a round of reads late).
``status less CRI`` is, exit by exit, what PLEG, the bus, the parent's sync of the pod
(which, its only container ended under restartPolicy Never, also stops the sandbox) and
the status add to the runtime's own view. The batch is removed, and the next one started, in
its mode, until each mode had ``--pleg-exits``. p50 and p99 of each, evented as a ratio to
relisting. The run checks that PLEG never fell back from events.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import time
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cri_api.v1 import api_pb2

from tests.bench.common import (
    START_DEADLINE_S,
    BenchPkletd,
    Context,
    CpuMeter,
    clean_runtime,
    cpu_line,
    ms,
    own_ticks,
    percentile,
    pod_running,
    progress,
    ratio,
    status_pods,
)
from tests.bench.startup import pod_names, run_pkletd
from tests.harness.containerd import PrivateContainerd, cri_channel, runtime_service
from tests.harness.node import NODE, pod_manifest, wait_for

MODES = {"evented": [], "relisting": ["--pleg-runtime-events=false"]}
WAYS = ("CRI", "status", "/pods")
EXIT_DEADLINE_S = 30.0


@dataclass
class ModeRun:
    """One mode's figures: exit latencies by way in, and CPU seconds over the window."""

    latencies: dict[str, dict[str, float]]  # way in -> exit pod -> seconds
    cpu: dict[str, float]
    pleg_cpu_s: float


def exit_manifest(name: str) -> dict[str, Any]:
    return pod_manifest(name, restart_policy="Never")


def task_pids(daemon: PrivateContainerd) -> dict[str, int]:
    """Container id -> its task's pid, from ``ctr task ls``."""
    listing = subprocess.run(
        ["ctr", "--address", daemon.ctr_address, "-n", "k8s.io", "task", "ls"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    found = {}
    for line in listing.splitlines()[1:]:
        task, pid, *_ = line.split()
        found[task] = int(pid)
    return found


def listed_pods(agent: BenchPkletd) -> dict[str, dict[str, Any]]:
    """The read-only port's /pods, by pod name."""
    url = f"http://127.0.0.1:{agent.read_only_port}/pods"
    with urllib.request.urlopen(url, timeout=30) as reply:
        items = json.load(reply)["items"]
    return {p["metadata"]["name"]: p for p in items}


def api_terminated(pod: dict[str, Any]) -> bool:
    statuses = pod.get("status", {}).get("containerStatuses", [])
    return bool(statuses) and "terminated" in statuses[0].get("state", {})


def status_terminated(pod: dict[str, Any]) -> bool:
    return bool(pod["containers"]) and pod["containers"][0]["state"] == "terminated"


def exited_ids(runtime: Any) -> set[str]:
    """The containers the CRI lists as exited."""
    exited = api_pb2.ContainerStateValue(state=api_pb2.CONTAINER_EXITED)
    request = api_pb2.ListContainersRequest(filter=api_pb2.ContainerFilter(state=exited))
    return {c.id for c in runtime.ListContainers(request, timeout=30).containers}


def ways_in(
    agent: BenchPkletd, runtime: Any, containers: dict[str, str]
) -> dict[str, Callable[[], set[str]]]:
    """For each way in, a read of the exit pods it shows exited."""
    return {
        "CRI": lambda: {n for n, c in containers.items() if c in exited_ids(runtime)},
        "status": lambda: {p["name"] for p in status_pods(agent) if status_terminated(p)},
        "/pods": lambda: {n for n, p in listed_pods(agent).items() if api_terminated(p)},
    }


def start_batch(agent: BenchPkletd, names: list[str], poll_s: float) -> dict[str, str]:
    """Start the exit pods ``names``; once all run, their container ids by the pods' names
    as pkletd shows them (``<name>-<node>``)."""
    for name in names:
        agent.put(name, exit_manifest(name))
    wanted = {f"{n}-{NODE}" for n in names}
    deadline = time.monotonic() + START_DEADLINE_S
    while True:
        pods = {p["name"]: p for p in status_pods(agent) if p["name"] in wanted}
        if len(pods) == len(wanted) and all(pod_running(p) for p in pods.values()):
            return {name: p["containers"][0]["container_id"] for name, p in pods.items()}
        if time.monotonic() > deadline:
            raise AssertionError(f"exit pods not running after {START_DEADLINE_S:.0f}s")
        time.sleep(poll_s)


def kill_schedule(
    daemon: PrivateContainerd, containers: dict[str, str], spread_s: float, seed: int
) -> list[tuple[float, str, int]]:
    """When (seconds from now) to SIGKILL each pod's container, spread at random over
    ``spread_s``: (offset, pod name, task pid), in order."""
    pids = task_pids(daemon)
    rand = random.Random(seed)
    return sorted((rand.uniform(0, spread_s), name, pids[c]) for name, c in containers.items())


def watch_exits(
    reads: dict[str, Callable[[], set[str]]], schedule: list[tuple[float, str, int]], poll_s: float
) -> dict[str, dict[str, float]]:
    """Kill each container when its time comes; meanwhile read each way in, in turn, until
    each shows every killed container exited. For each way, each exit's latency: its kill
    to the arrival of the first reply that shows it."""
    seen: dict[str, dict[str, float]] = {way: {} for way in reads}
    started = time.monotonic()
    deadline = started + EXIT_DEADLINE_S
    pending, killed = list(schedule), {}
    next_poll = started
    while any(len(found) < len(schedule) for found in seen.values()):
        for way, read in reads.items():
            while pending and started + pending[0][0] <= time.monotonic():
                _, name, pid = pending.pop(0)
                killed[name] = time.monotonic()
                os.kill(pid, signal.SIGKILL)
            time.sleep(max(0.0, next_poll - time.monotonic()))
            next_poll = max(next_poll + poll_s, time.monotonic())
            shown = read()
            arrived = time.monotonic()
            for name in shown & killed.keys() - seen[way].keys():
                seen[way][name] = arrived - killed[name]
        if time.monotonic() > deadline:
            raise AssertionError(f"exits not all seen after {EXIT_DEADLINE_S:.0f}s: {seen}")
    return seen


def remove_batch(agent: BenchPkletd, names: list[str]) -> None:
    for name in names:
        agent.remove(name)
    gone = {f"{n}-{NODE}" for n in names}
    wait_for(
        "exit pods removed",
        lambda: not gone & {p["name"] for p in status_pods(agent)},
        timeout=START_DEADLINE_S,
    )


def measure_cpu(ctx: Context, agent: BenchPkletd) -> tuple[dict[str, float], float]:
    """``CpuMeter``'s figures over the window, and the pleg worker's own CPU seconds."""
    pleg_pid = int(agent.workers()["pleg"]["pid"])
    assert agent.proc is not None
    meter = CpuMeter(ctx.daemon, {"pleg": [pleg_pid], "supervisor": [agent.proc.pid]})
    ticks = own_ticks(pleg_pid)
    time.sleep(ctx.args.pleg_window)  # the window itself: nothing is to happen in it
    return meter.read(), (own_ticks(pleg_pid) - ticks) / os.sysconf("SC_CLK_TCK")


def pleg_mode(agent: BenchPkletd) -> str:
    return str(agent.status()["node"]["pleg"]["mode"])


def switch_to(agent: BenchPkletd, mode: str, pods: int) -> None:
    """Restart pkletd in ``mode`` (its pods run on; it adopts them again) and wait until
    PLEG is in that mode and the status shows every pod running."""
    agent.stop()
    agent.extra_args = list(MODES[mode])
    agent.start()

    def ready() -> bool:
        running = sum(pod_running(p) for p in status_pods(agent))
        return pleg_mode(agent) == mode and running == pods

    wait_for(f"pkletd in {mode} mode with its {pods} pods", ready, timeout=START_DEADLINE_S)


def run_batch(ctx: Context, run: ModeRun, batch: list[str], seed: int) -> None:
    """Start the exit pods ``batch``, kill them, follow each exit in, remove them."""
    agent, args = ctx.agent, ctx.args
    assert agent is not None
    poll_s = args.pleg_poll_ms / 1000
    containers = start_batch(agent, batch, poll_s)
    schedule = kill_schedule(ctx.daemon, containers, args.pleg_spread, seed)
    with cri_channel(ctx.daemon.address) as channel:
        reads = ways_in(agent, runtime_service(channel), containers)
        for way, found in watch_exits(reads, schedule, poll_s).items():
            run.latencies[way] |= found
    remove_batch(agent, batch)


def order(batches: int) -> list[str]:
    """Which mode each batch runs in: relisting, evented, evented, relisting, ... (ABBA,
    after the evented CPU window and the relisting one): the machine's load drifts alike
    on both, and pkletd restarts once every two batches."""
    pattern = ["relisting", "evented", "evented", "relisting"]
    return [pattern[i % 4] for i in range(2 * batches)]


def section(ctx: Context) -> None:
    args = ctx.args
    runs = {mode: ModeRun({way: {} for way in WAYS}, {}, 0.0) for mode in MODES}
    agent = ctx.agent = BenchPkletd(ctx.daemon.address, args.parallelism)
    steady = args.pleg_pods - args.pleg_batch
    agent.start()
    wait_for("PLEG evented", lambda: pleg_mode(agent) == "evented")
    progress(f"pleg: starting {steady} pods, and {args.pleg_batch} more for the CPU windows")
    run_pkletd(agent, pod_names(steady, "s"), ctx.daemon, args.poll_ms / 1000)
    start_batch(agent, pod_names(args.pleg_batch, "c"), args.pleg_poll_ms / 1000)
    current = "evented"
    for mode, run in runs.items():
        if mode != current:
            switch_to(agent, mode, args.pleg_pods)
            current = mode
        progress(f"pleg ({mode}): CPU over {args.pleg_window:.0f} s")
        run.cpu, run.pleg_cpu_s = measure_cpu(ctx, agent)
    remove_batch(agent, pod_names(args.pleg_batch, "c"))
    batches = -(-args.pleg_exits // args.pleg_batch)
    progress(f"pleg: {batches} batches of {args.pleg_batch} exits each way")
    for number, mode in enumerate(order(batches)):
        if mode != current:
            switch_to(agent, mode, steady)
            current = mode
        run_batch(ctx, runs[mode], pod_names(args.pleg_batch, f"x{number}-"), number)
    if "falling back" in agent.log("pleg"):
        raise AssertionError(f"PLEG fell back to relisting during the run: see {agent.log_dir}")
    ctx.drop_agent()
    clean_runtime(ctx.daemon.address)
    report(ctx, runs)


def quantiles(values: list[float]) -> tuple[float, float]:
    return percentile(values, 50), percentile(values, 99)


def report(ctx: Context, runs: dict[str, ModeRun]) -> None:
    args = ctx.args
    print(
        f"PLEG, {args.pleg_pods} pods, {args.pleg_exits} container exits each way (SIGKILLs, "
        f"batches of {args.pleg_batch} spread over {args.pleg_spread:g} s), each way polled "
        f"every {args.pleg_poll_ms * len(WAYS):g} ms:"
    )
    figures: dict[str, Any] = {}
    for way in WAYS:
        figures |= way_line(
            f"exit -> {way}", {m: list(r.latencies[way].values()) for m, r in runs.items()}
        )
    over = {
        mode: [run.latencies["status"][n] - run.latencies["CRI"][n] for n in run.latencies["CRI"]]
        for mode, run in runs.items()
    }
    figures |= way_line("status less CRI", over)
    window = args.pleg_window
    for mode, run in runs.items():
        print(
            f"  {mode}: pleg worker {run.pleg_cpu_s:.2f} CPU s over {window:.0f} s "
            f"({run.pleg_cpu_s / window:.1%} of a core) {cpu_line(run.cpu)}"
        )
        figures[f"pleg_cpu_{mode}_s"] = run.pleg_cpu_s
        figures |= {f"pleg_{mode}_{k}": v for k, v in run.cpu.items()}
    evented, relisting = runs["evented"], runs["relisting"]
    cpu_ratio = ratio(evented.pleg_cpu_s, relisting.pleg_cpu_s)
    containerd = ratio(evented.cpu["cpu_containerd_s"], relisting.cpu["cpu_containerd_s"])
    print(
        f"  steady CPU, evented against relisting: pleg worker {cpu_ratio:.2f}x, "
        f"containerd {containerd:.2f}x"
    )
    figures["pleg_cpu_ratio"], figures["pleg_containerd_cpu_ratio"] = cpu_ratio, containerd
    ctx.figures.update(figures)


def way_line(what: str, by_mode: dict[str, list[float]]) -> dict[str, float]:
    """Print one way in's p50 and p99, evented against relisting; return the figures."""
    (e50, e99), (r50, r99) = quantiles(by_mode["evented"]), quantiles(by_mode["relisting"])
    print(
        f"  {what:<16} evented p50 {ms(e50)}, p99 {ms(e99)}; 1 s relisting p50 {ms(r50)}, "
        f"p99 {ms(r99)} = {ratio(e50, r50):.2f}x / {ratio(e99, r99):.2f}x"
    )
    key = "pleg_" + "_".join(what.replace("->", "").replace("/", "").split()).lower()
    return {
        f"{key}_evented_p50_s": e50,
        f"{key}_evented_p99_s": e99,
        f"{key}_relisting_p50_s": r50,
        f"{key}_relisting_p99_s": r99,
        f"{key}_ratio_p50": ratio(e50, r50),
        f"{key}_ratio_p99": ratio(e99, r99),
    }
