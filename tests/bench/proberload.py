"""Figure 6, prober load: many probes at periodSeconds 1, the prober's CPU and lateness.

``--probe-pods`` (110: exactly ``maxPods``, the default; the bench checks that
pkletd admitted them all) static pods on the pod network (CNI bridge, one IP per
pod), each one busybox ``httpd -f -p 8080`` container with an exec liveness
probe (``true``) and an HTTP readiness probe (``GET /healthz`` on port 8080),
both ``periodSeconds: 1``. The bench waits until every pod is Ready, then checks
that each pod's IP (``/pods``) is its CRI sandbox's, that they are distinct, and
that nothing answers on 127.0.0.1:8080: a pod on the pod network is reachable
only at its IP, so its Ready means the HTTP probes went to the pod IP.

Then, over a ``--probe-window`` (30 s) window between two fresh readings of
``/metrics/probes`` (``tests.bench.probestats.fresh_metrics``):

* prober CPU: utime + stime of the ``pkletd: prober`` process
  (``/proc/<pid>/stat``), as % of one core. Baseline: the CPU the same probe
  runs cost a minimal Python loop in the bench process itself
  (``probestats.baseline_loop``), over a window of the same length right after,
  with pkletd stopped (its pods keep running), so the two never compete. The
  baseline's CPU per run times the prober's number of runs in its window is
  the comparison (the same runs, at the bare loop's cost). Target: within 1.10x
  (issue 21); whether it is under 15% of one core is printed too.
* lateness p99, from the ``pkletd_prober_lateness_seconds`` histogram's change
  over the window (method in ``tests.bench.probestats``), against the bare
  loop's, which runs on the prober's schedule and counts its lateness in the
  same buckets. Target: under 100 ms; where the runtime keeps the bare loop
  from that too, within 1.10x of the bare loop's (of its mean lateness when
  both p99s are past the 2.5 s cap). The prober measures lateness when its loop
  hands a run to the pool: a probe whose last run is still going is handed on
  as soon as that ends, late by that much.
* as the runtime may not manage every run (below), also printed: the CPU% the
  prober and the baseline would use at the expected rate (their CPU per run
  times 2 x pods per second).
* probe runs per second (the change of the histogram's count) against the
  bare loop's and the expected 2 x pods per second; a probe "kept every period"
  if it ran at least floor(window) - 1 times in the window (one run of slack for
  the edges). Target: every period the bare loop keeps (no more probes missing a
  period than the bare loop's, and at least 1/1.10 of its runs). Also counted:
  failed runs, and pods that were not Ready or restarted during the window
  (status polled every second).
* the runtime's cost of an exec probe: containerd's and the shims' CPU (runc
  exec) over the baseline window per ExecSync, and the cores that the pods'
  exec probes need at one a second: no prober keeps its periods if that is
  more than the machine has.

If a target is missed the bench prints where the prober's time went, from /proc
(per-thread CPU, run-queue wait from ``schedstat``, context switches), the
histogram and the machine's CPU, with suggestions; pkletd is not changed.
"""

from __future__ import annotations

import ipaddress
import json
import math
import os
import time
import urllib.request
from typing import Any

from cri_api.v1 import api_pb2
from pkletd.workers.prober import THREADS

from tests.bench import probestats as ps
from tests.bench.common import (
    START_DEADLINE_S,
    BenchPkletd,
    Context,
    CpuMeter,
    clean_runtime,
    cpu_line,
    ms,
    own_ticks,
    pod_running,
    progress,
    ratio,
    status_pods,
    verdict,
)
from tests.bench.proberwhy import explain
from tests.bench.startup import pod_names
from tests.harness.containerd import POD_SUBNET, cri_channel, runtime_service
from tests.harness.node import NODE, pod_manifest, wait_for

PORT = 8080
PATH = "/healthz"
HTTPD = f"mkdir -p /www && echo ok > /www{PATH} && exec httpd -f -p {PORT} -h /www"
PERIOD_S = 1
KINDS = ("Liveness", "Readiness")  # exec, httpGet
TARGET_CPU_PCT = 15.0
TARGET_LATENESS_S = 0.1
TARGET_RATIO = 1.10  # against the bare loop (issue 21)


def kept_up(got: dict[str, Any], base: dict[str, float]) -> bool:
    """Lateness p99 under the target, or, where the runtime keeps the bare loop from it
    too, within ``TARGET_RATIO`` of the bare loop's (its mean, when both p99s are past
    the histogram's 2.5 s cap)."""
    if not got["p99_capped"] and got["p99"] < TARGET_LATENESS_S:
        return True
    if base["late_p99_capped"]:
        return bool(got["mean"] <= TARGET_RATIO * base["late_mean_s"])
    floor = base["late_p99_s"]
    return (
        not got["p99_capped"] and floor >= TARGET_LATENESS_S and got["p99"] <= TARGET_RATIO * floor
    )


def at_least(value: float, capped: bool) -> str:
    return (">= " if capped else "") + ms(value)


def probed_manifest(name: str) -> dict[str, Any]:
    """Pod ``name`` on the pod network: httpd, exec liveness ``true``, HTTP readiness."""
    manifest = pod_manifest(name, HTTPD, host_network=False)
    container = manifest["spec"]["containers"][0]
    container["ports"] = [{"name": "http", "containerPort": PORT}]
    container["livenessProbe"] = {"exec": {"command": ["true"]}, "periodSeconds": PERIOD_S}
    container["readinessProbe"] = {
        "httpGet": {"path": PATH, "port": PORT},
        "periodSeconds": PERIOD_S,
    }
    return manifest


def ready(pod: dict[str, Any]) -> bool:
    return pod_running(pod) and all(c["ready"] for c in pod["containers"])


def start_ready(agent: BenchPkletd, names: list[str]) -> float:
    """Write the manifests; wait until every pod is Ready (none rejected); seconds taken."""
    full = {f"{n}-{NODE}" for n in names}
    t0 = time.perf_counter()
    for name in names:
        agent.put(name, json.dumps(probed_manifest(name)))

    def all_ready() -> bool:
        pods = {p["name"]: p for p in status_pods(agent) if p["name"] in full}
        failed = sorted(n for n, p in pods.items() if p["phase"] == "Failed")
        if failed:
            events = [e for e in agent.status().get("events", []) if e["reason"] != "Pulled"]
            raise AssertionError(f"{len(failed)} pods Failed ({failed[:3]}...): {events[-3:]}")
        return len(pods) == len(full) and all(ready(p) for p in pods.values())

    wait_for(f"{len(names)} probed pods Ready", all_ready, timeout=START_DEADLINE_S, every=0.5)
    return time.perf_counter() - t0


def http_ok(host: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(f"http://{host}:{PORT}{PATH}", timeout=timeout) as reply:
            return bool(reply.status == 200)
    except OSError:
        return False


def pod_targets(agent: BenchPkletd, names: list[str]) -> list[tuple[str, str]]:
    """(container id, pod IP) per pod, checked: the CRI sandbox's IP, distinct, answering."""
    url = f"http://127.0.0.1:{agent.read_only_port}/pods"
    with urllib.request.urlopen(url, timeout=10) as reply:
        items = {p["metadata"]["name"]: p for p in json.load(reply)["items"]}
    with cri_channel(agent.endpoint) as channel:
        rt = runtime_service(channel)
        sandboxes = rt.ListPodSandbox(api_pb2.ListPodSandboxRequest(), timeout=30).items
        cri_ips = {
            s.metadata.name: rt.PodSandboxStatus(
                api_pb2.PodSandboxStatusRequest(pod_sandbox_id=s.id), timeout=30
            ).status.network.ip
            for s in sandboxes
        }
    subnet = ipaddress.ip_network(POD_SUBNET)
    targets = []
    for name in names:
        full = f"{name}-{NODE}"
        ip = items[full]["status"].get("podIP", "")
        if not ip or ip != cri_ips.get(full) or ipaddress.ip_address(ip) not in subnet:
            raise AssertionError(f"pod {name}: podIP {ip!r}, CRI sandbox IP {cri_ips.get(full)!r}")
        pod = items[full]
        container_id = pod["status"]["containerStatuses"][0]["containerID"].split("://")[-1]
        targets.append((container_id, ip))
    if len({ip for _, ip in targets}) != len(targets):
        raise AssertionError("pod IPs are not distinct")
    if http_ok("127.0.0.1", 0.5):
        raise AssertionError(f"127.0.0.1:{PORT} answers: cannot tell probes went to pod IPs")
    if not all(http_ok(ip) for _, ip in targets):
        raise AssertionError("a pod's httpd does not answer at its IP")
    return targets


def measure(agent: BenchPkletd, ctx: Context, names: list[str]) -> dict[str, Any]:
    """The prober over ``--probe-window`` seconds, between two fresh metrics readings."""
    processes = agent.process_tree()
    [prober] = [pid for pid, title in processes.items() if title == "pkletd: prober"]
    named = {title.removeprefix("pkletd: "): [pid] for pid, title in processes.items()}
    full = {f"{n}-{NODE}" for n in names}
    not_ready: set[str] = set()
    restarted: set[str] = set()
    restarts_at_start: dict[str, int] = {}
    start = ps.fresh_metrics(agent.read_only_port)
    ticks, threads = own_ticks(prober), ps.thread_stats(prober)
    meter = CpuMeter(ctx.daemon, named)
    end_at = start.at + ctx.args.probe_window
    while time.perf_counter() < end_at:  # watch Ready and restarts, once a second
        for pod in status_pods(agent):
            if pod["name"] in full:
                if not ready(pod):
                    not_ready.add(pod["name"])
                restarts = sum(c["restart_count"] for c in pod["containers"])
                if restarts_at_start.setdefault(pod["name"], restarts) != restarts:
                    restarted.add(pod["name"])
        time.sleep(max(0.0, min(1.0, end_at - time.perf_counter())))
    end = ps.fresh_metrics(agent.read_only_port)
    ticks, threads = own_ticks(prober) - ticks, ps.thread_deltas(threads, ps.thread_stats(prober))
    cpu = meter.read()
    window = end.at - start.at
    cpu_s = ticks / os.sysconf("SC_CLK_TCK")
    per_probe: dict[tuple[str, str], float] = {}
    failed = 0.0
    for key, value in end.totals.items():
        delta = value - start.totals.get(key, 0.0)
        per_probe[key[:2]] = per_probe.get(key[:2], 0.0) + delta
        failed += delta if key[2] == "failed" else 0.0
    by_type = {kind: sum(n for k, n in per_probe.items() if k[1] == kind) for kind in KINDS}
    floor_runs = math.floor(window / PERIOD_S) - 1
    p99, capped = ps.quantile(0.99, start.buckets, end.buckets)
    p50, p50_capped = ps.quantile(0.5, start.buckets, end.buckets)
    return {
        "window_s": window,
        "cpu_s": cpu_s,
        "cpu_pct": 100 * cpu_s / window,
        "runs": end.count - start.count,
        "runs_expected": 2 * len(names) * window / PERIOD_S,
        "probes": len(per_probe),
        **{f"{kind.lower()}_runs": n for kind, n in by_type.items()},
        "missed": sum(1 for n in per_probe.values() if n < floor_runs)
        + max(0, 2 * len(names) - len(per_probe)),
        "failed": failed,
        "p99": p99,
        "p99_capped": capped,
        "p50": p50,
        "p50_capped": p50_capped,
        "mean": ratio(end.lateness_sum - start.lateness_sum, end.count - start.count),
        "over_100ms": ps.share_over(0.1, start.buckets, end.buckets),
        "over_1s": ps.share_over(1.0, start.buckets, end.buckets),
        "not_ready": len(not_ready),
        "restarted": len(restarted),
        "threads": threads,
        "prober_pid": prober,
        "machine": cpu,
    }


def section(ctx: Context) -> None:
    args, address = ctx.args, ctx.daemon.address
    names = pod_names(args.probe_pods, "q")
    progress(f"prober load: {len(names)} pod-network pods, exec + HTTP probes every second")
    agent = ctx.agent = BenchPkletd(address, args.parallelism)
    agent.start()
    took = start_ready(agent, names)
    targets = pod_targets(agent, names)
    progress(f"prober load: all Ready after {took:.1f} s; measuring {args.probe_window:.0f} s")
    got = measure(agent, ctx, names)
    ctx.drop_agent()  # the pods keep running, for the baseline
    progress(f"prober load: baseline loop, {args.probe_window:.0f} s, pkletd stopped")
    meter = CpuMeter(ctx.daemon, {})
    base = ps.baseline_loop(address, targets, PATH, PORT, args.probe_window, THREADS)
    base_runtime = meter.read()
    clean_runtime(address)
    report(ctx, names, took, got, base, base_runtime)


def report(
    ctx: Context,
    names: list[str],
    took: float,
    got: dict[str, Any],
    base: dict[str, float],
    base_runtime: dict[str, float],
) -> None:
    count, window = len(names), got["window_s"]
    base_per_run = ratio(base["cpu_s"], base["runs"])
    base_pct = 100 * base_per_run * got["runs"] / window  # the prober's runs, at its cost
    runtime_s = base_runtime["cpu_containerd_s"] + base_runtime["cpu_shims_s"]
    per_exec = ratio(runtime_s, base["exec_runs"])  # the HTTP runs cost the runtime nothing
    cores_needed = per_exec * count / PERIOD_S
    projected = 100 * ratio(got["cpu_s"], got["runs"]) * got["runs_expected"] / window
    cpu_ratio = ratio(got["cpu_pct"], base_pct)
    cpu_ok = cpu_ratio <= TARGET_RATIO
    late_ok = kept_up(got, base)
    kept = got["missed"] <= base["missed"] and got["runs"] >= base["runs"] / TARGET_RATIO
    p99, base_p99 = (
        at_least(got["p99"], got["p99_capped"]),
        at_least(base["late_p99_s"], base["late_p99_capped"]),
    )
    print(
        f"prober load ({count} pod-network pods, exec liveness + HTTP readiness on the pod IP, "
        f"period {PERIOD_S} s; {window:.1f} s window): prober CPU {got['cpu_pct']:.1f}% of one "
        f"core vs {base_pct:.1f}% for a minimal Python loop doing as many runs = "
        f"{cpu_ratio:.2f}x [target <= {TARGET_RATIO:.2f}x: {verdict(cpu_ok)}; "
        f"under {TARGET_CPU_PCT:.0f}% of one core: "
        f"{verdict(got['cpu_pct'] < TARGET_CPU_PCT)}]"
    )
    print(
        f"prober lateness p99 (histogram delta, interpolated within the bucket): {p99} vs "
        f"{base_p99} for the bare loop on the same schedule = "
        f"{ratio(got['p99'], base['late_p99_s']):.2f}x, mean {ms(got['mean'])} vs "
        f"{ms(base['late_mean_s'])} [target < {ms(TARGET_LATENESS_S)}, or where the bare "
        f"loop misses that too, <= {TARGET_RATIO:.2f}x its (the means past the cap): "
        f"{verdict(late_ok)}]"
    )
    print(
        f"prober runs: {got['runs'] / window:.1f}/s vs {base['runs'] / base['elapsed_s']:.1f}/s "
        f"for the bare loop ({got['runs_expected'] / window:.0f}/s expected); "
        f"{got['missed']} of {2 * count} probes missed a period against the bare loop's "
        f"{base['missed']:.0f} (exec liveness {got['liveness_runs'] / window:.1f}"
        f"/s, HTTP readiness {got['readiness_runs'] / window:.1f}/s), {got['failed']:.0f} runs "
        "failed; during the window "
        f"{got['not_ready']} pods were seen not Ready, {got['restarted']} restarted "
        f"[target: every period the bare loop keeps: {verdict(kept)}]"
    )
    p50 = at_least(got["p50"], got["p50_capped"])
    print(
        f"  lateness p50 {p50}, mean {ms(got['mean'])}, "
        f"{got['over_100ms']:.1%} over 100 ms, {got['over_1s']:.1%} over 1 s; "
        f"prober CPU per run {ms(ratio(got['cpu_s'], got['runs']))} vs baseline "
        f"{ms(base_per_run)}; at the expected {got['runs_expected'] / window:.0f} runs/s: "
        f"prober {projected:.1f}% vs baseline "
        f"{100 * base_per_run * got['runs_expected'] / window:.1f}% of one core"
    )
    supervisor_s = got["machine"].get("cpu_supervisor_s", math.nan)
    print(
        f"  window {cpu_line(got['machine'])}; the supervisor, which takes every ProbeResult: "
        f"{ms(ratio(supervisor_s, got['runs']))} CPU per run"
    )
    print(
        f"  baseline loop: {base['runs'] / base['elapsed_s']:.1f} runs/s ({base['missed']:.0f} "
        f"probes missed a period), {base['failed']:.0f} failed, {base['cpu_s']:.2f} CPU s in "
        f"{base['elapsed_s']:.1f} s = {100 * base['cpu_s'] / base['elapsed_s']:.1f}%; ExecSync p50 "
        f"{ms(base['exec_p50_s'])} p99 {ms(base['exec_p99_s'])}, GET p50 "
        f"{ms(base['http_p50_s'])} p99 {ms(base['http_p99_s'])}; launch lateness p99 "
        f"{base_p99} {cpu_line(base_runtime)}"
    )
    print(
        f"  the runtime: {ms(per_exec)} CPU (containerd + shims) per ExecSync in the baseline "
        f"window: {count} exec probes a second need {cores_needed:.1f} cores; this machine "
        f"has {os.cpu_count()}"
    )
    print(
        f"  all {count} pods admitted (maxPods 110) and Ready {took:.1f} s after the manifests; "
        f"{count} distinct pod IPs in {POD_SUBNET}, each its CRI sandbox's; nothing on "
        f"127.0.0.1:{PORT}: the HTTP probes went to the pod IPs"
    )
    if not (cpu_ok and late_ok and kept):
        for line in explain(got, base, cores_needed, TARGET_CPU_PCT, TARGET_LATENESS_S):
            print(f"  {line}")
    threads = got.pop("threads")
    machine = got.pop("machine")
    ctx.figures.update(
        {
            "probe_pods": count,
            "probe_ready_after_s": took,
            **{f"probe_{k}": v for k, v in got.items() if k != "prober_pid"},
            **{f"probe_window_{k}": v for k, v in machine.items()},
            "probe_cpu_baseline_pct": base_pct,
            "probe_cpu_projected_pct": projected,
            "probe_runtime_cpu_per_exec_s": per_exec,
            "probe_runtime_cores_needed": cores_needed,
            "probe_cpu_ratio": ratio(got["cpu_pct"], base_pct),
            **{f"probe_baseline_{k}": v for k, v in base.items()},
            **{f"probe_baseline_window_{k}": v for k, v in base_runtime.items()},
            "probe_main_thread_cpu_s": threads.get(got["prober_pid"], {}).get("cpu_s", math.nan),
            "probe_threads": len(threads),
        }
    )
    targets = ctx.figures["targets_met"]
    targets["prober_cpu"] = cpu_ok
    targets["prober_lateness_p99"] = late_ok
    targets["prober_every_period"] = kept
