"""What the prober-load figure reads: ``/metrics/probes``, per-thread /proc stats, a baseline.

Lateness p99 comes from the ``pkletd_prober_lateness_seconds`` histogram: the
difference of its cumulative bucket counts between the window's two readings,
then linear interpolation inside the bucket that holds the 99th-percentile rank,
with 0 as the lower edge of the first bucket (what Prometheus'
``histogram_quantile`` does). A rank in the ``+Inf`` bucket gives the highest
finite bound (2.5 s), flagged as "at least". With buckets 50, 100, 250 ms, a p99
reported between 100 and 250 ms only says the true one is in that bucket.

The baseline (``baseline_loop``) does the same probe runs as the prober from
this bench process: per pod per second one CRI ExecSync of ``true`` and one HTTP
GET of the readiness path on the pod IP, launched on the prober's schedule
(``Schedule``: evenly phased; a run still going at its due time starts again as
soon as it ends, late by that much) from one loop thread onto pools of the
prober's size (16), results counted and dropped. Its lateness goes into the
prober's buckets and its p99 comes from the same interpolation, so the two p99s,
the missed periods and the runs compare like for like: where the runtime cannot
keep every period, the bare loop shows the floor. Its CPU is the bench
process's (``os.times``) over the window.
"""

from __future__ import annotations

import bisect
import heapq
import http.client
import itertools
import math
import os
import queue
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cri_api.v1 import api_pb2
from pkletd.workers.prober import LATENESS_BUCKETS
from prometheus_client.parser import text_string_to_metric_families

from tests.bench.common import CRI_TIMEOUT, percentile
from tests.harness.containerd import cri_channel, runtime_service

LATENESS = "pkletd_prober_lateness_seconds"


@dataclass
class ProbeMetrics:
    """One reading of ``/metrics/probes``."""

    at: float  # perf_counter when it arrived
    buckets: dict[float, float]  # upper bound -> cumulative count
    lateness_sum: float
    totals: dict[tuple[str, str, str], float]  # (pod, probe_type, result) -> count

    @property
    def count(self) -> float:
        return self.buckets.get(math.inf, 0.0)


def read_metrics(port: int) -> ProbeMetrics:
    url = f"http://127.0.0.1:{port}/metrics/probes"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    at = time.perf_counter()
    buckets: dict[float, float] = {}
    lateness_sum = 0.0
    totals: dict[tuple[str, str, str], float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == f"{LATENESS}_bucket":
                buckets[float(sample.labels["le"])] = sample.value
            elif sample.name == f"{LATENESS}_sum":
                lateness_sum = sample.value
            elif sample.name == "prober_probe_total":
                labels = sample.labels
                totals[(labels["pod"], labels["probe_type"], labels["result"])] = sample.value
    return ProbeMetrics(at, buckets, lateness_sum, totals)


def fresh_metrics(port: int, timeout: float = 5.0) -> ProbeMetrics:
    """A reading taken just after the prober's once-a-second update reached the http worker.

    Polls every 10 ms until the lateness count changes, so the reading is at most
    ~10 ms (plus the bus hop) older than the prober's counters.
    """
    first = read_metrics(port)
    deadline = time.perf_counter() + timeout
    while time.perf_counter() < deadline:
        time.sleep(0.01)
        now = read_metrics(port)
        if now.count != first.count:
            return now
    raise AssertionError(f"/metrics/probes did not change within {timeout:.0f}s")


def quantile(q: float, start: dict[float, float], end: dict[float, float]) -> tuple[float, bool]:
    """The q-quantile (0..1) of the runs between two cumulative histograms; (value, capped)."""
    bounds = sorted(end)
    counts = [end[b] - start.get(b, 0.0) for b in bounds]  # cumulative, over the window
    total = counts[-1] if counts else 0.0
    if total <= 0:
        return math.nan, False
    rank = q * total
    lower, below = 0.0, 0.0
    for bound, cumulative in zip(bounds, counts, strict=True):
        if cumulative >= rank:
            if math.isinf(bound):
                return lower, True  # beyond the highest finite bound
            inside = cumulative - below
            return lower + (bound - lower) * ((rank - below) / inside if inside else 1.0), False
        lower, below = bound, cumulative
    return lower, True


def share_over(limit: float, start: dict[float, float], end: dict[float, float]) -> float:
    """The share of the window's runs later than ``limit`` (a bucket bound)."""
    total = end[math.inf] - start.get(math.inf, 0.0)
    within = end[limit] - start.get(limit, 0.0)
    return 1 - within / total if total > 0 else math.nan


# --------------------------------------------------------------------------- /proc


@dataclass(frozen=True)
class ThreadStat:
    name: str
    utime: int  # ticks
    stime: int
    run_ns: int  # schedstat: on a CPU
    wait_ns: int  # schedstat: runnable, waiting for a CPU
    voluntary: int
    involuntary: int


def thread_stats(pid: int) -> dict[int, ThreadStat]:
    """Every thread of ``pid``: tid -> its CPU, scheduler and context-switch counters."""
    found = {}
    for task in Path(f"/proc/{pid}/task").iterdir():
        try:
            stat = (task / "stat").read_text()
            sched = (task / "schedstat").read_text().split()
            status = (task / "status").read_text()
        except OSError:
            continue  # the thread ended
        fields = stat.rsplit(")", 1)[1].split()
        switches = {
            k: int(v)
            for k, v in (line.split(":") for line in status.splitlines() if "ctxt_switches" in line)
        }
        found[int(task.name)] = ThreadStat(
            stat[stat.index("(") + 1 : stat.rindex(")")],
            int(fields[11]),
            int(fields[12]),
            int(sched[0]),
            int(sched[1]),
            switches["voluntary_ctxt_switches"],
            switches["nonvoluntary_ctxt_switches"],
        )
    return found


def thread_deltas(
    start: dict[int, ThreadStat], end: dict[int, ThreadStat]
) -> dict[int, dict[str, Any]]:
    """Per thread alive at the end: the window's CPU s, run-queue wait s, switches."""
    hz = os.sysconf("SC_CLK_TCK")
    zero = ThreadStat("", 0, 0, 0, 0, 0, 0)
    out = {}
    for tid, b in end.items():
        a = start.get(tid, zero)
        out[tid] = {
            "name": b.name,
            "user_s": (b.utime - a.utime) / hz,
            "system_s": (b.stime - a.stime) / hz,
            "cpu_s": (b.run_ns - a.run_ns) / 1e9,
            "runqueue_wait_s": (b.wait_ns - a.wait_ns) / 1e9,
            "voluntary": b.voluntary - a.voluntary,
            "involuntary": b.involuntary - a.involuntary,
        }
    return out


# --------------------------------------------------------------------------- baseline


def baseline_loop(
    address: str,
    targets: list[tuple[str, str]],
    path: str,
    port: int,
    window_s: float,
    threads: int,
) -> dict[str, float]:
    """Per target (container id, pod IP) and second: ExecSync ``true`` and GET ``path``,
    each kind on a pool of ``threads``, on the prober's schedule (``Schedule``)."""
    with cri_channel(address) as channel:
        rt = runtime_service(channel)
        rt.Version(api_pb2.VersionRequest(), timeout=10)  # connect before the window

        def exec_true(container_id: str) -> bool:
            request = api_pb2.ExecSyncRequest(container_id=container_id, cmd=["true"], timeout=1)
            try:
                return bool(rt.ExecSync(request, timeout=CRI_TIMEOUT).exit_code == 0)
            except Exception:
                return False

        def get(ip: str) -> bool:
            conn = http.client.HTTPConnection(ip, port, timeout=1)
            try:
                conn.request("GET", path, headers={"User-Agent": "kube-probe/1.31"})
                reply = conn.getresponse()
                reply.read()
                return 200 <= reply.status < 400
            except (OSError, http.client.HTTPException):
                return False
            finally:
                conn.close()

        took: tuple[list[float], list[float]] = ([], [])  # exec, http
        outcomes: list[bool] = []  # list.append is atomic: no lock needed
        done: queue.SimpleQueue[int] = queue.SimpleQueue()

        def run(job: int) -> None:
            container_id, ip = targets[job // 2]
            a = time.perf_counter()
            ok = exec_true(container_id) if job % 2 == 0 else get(ip)
            took[job % 2].append(time.perf_counter() - a)
            outcomes.append(ok)
            done.put(job)

        with (  # as the prober: a pool for exec, one for the network probes
            ThreadPoolExecutor(threads, thread_name_prefix="baseline-exec") as execs,
            ThreadPoolExecutor(threads, thread_name_prefix="baseline-http") as gets,
        ):
            before = os.times()
            t0 = time.perf_counter()
            schedule = Schedule(t0, 2 * len(targets))
            end = t0 + window_s
            while (now := time.perf_counter()) < end:
                job = schedule.take(now)
                if job is not None:
                    (gets if job % 2 else execs).submit(run, job)
                    continue
                try:  # the schedule's own wait: until the next due run or a run's end
                    schedule.finished(done.get(timeout=min(schedule.next_due(end), end) - now))
                except queue.Empty:
                    pass
        after = os.times()
        elapsed = time.perf_counter() - t0
    cpu = (after.user - before.user) + (after.system - before.system)
    return {
        "cpu_s": cpu,
        "elapsed_s": elapsed,
        "runs": float(len(outcomes)),
        "failed": float(outcomes.count(False)),
        "missed": float(sum(1 for n in schedule.runs if n < math.floor(window_s) - 1)),
        "exec_runs": float(len(took[0])),
        "late_p99_s": schedule.quantile(0.99)[0],
        "late_p99_capped": float(schedule.quantile(0.99)[1]),
        "late_mean_s": sum(schedule.late) / len(schedule.late) if schedule.late else math.nan,
        "exec_p50_s": percentile(took[0], 50),
        "exec_p99_s": percentile(took[0], 99),
        "http_p50_s": percentile(took[1], 50),
        "http_p99_s": percentile(took[1], 99),
    }


class Schedule:
    """The prober's schedule for ``jobs`` runs of period 1 s, evenly phased from ``t0``.

    As ``pkletd.workers.prober``: a run is due one period after its last due time;
    a run still going at its due time starts as soon as it ends (its lateness is
    how long after its due time that is, as a Go ticker's one buffered tick makes
    the kubelet's prober worker do), and its next due time skips the periods it
    missed. Lateness is counted in the prober's histogram buckets, so both p99s
    come from the same interpolation.
    """

    def __init__(self, t0: float, jobs: int) -> None:
        self._due = [t0 + j / jobs for j in range(jobs)]
        self._heap = [(at, j) for j, at in enumerate(self._due)]
        self.runs = [0] * jobs
        self.late: list[float] = []

    def take(self, now: float) -> int | None:
        """The next run due by ``now`` (taken off the schedule until it ends), or None."""
        if not self._heap or self._heap[0][0] > now:
            return None
        at, job = heapq.heappop(self._heap)
        late = now - at
        self.late.append(late)
        self.runs[job] += 1
        self._due[job] = at + max(1, int(late) + 1)
        return job

    def finished(self, job: int) -> None:
        heapq.heappush(self._heap, (self._due[job], job))

    def next_due(self, otherwise: float) -> float:
        return self._heap[0][0] if self._heap else otherwise

    def quantile(self, q: float) -> tuple[float, bool]:
        """As ``quantile`` over the prober's histogram: (value, capped)."""
        per_bucket = [0] * (len(LATENESS_BUCKETS) + 1)
        for late in self.late:
            per_bucket[bisect.bisect_left(LATENESS_BUCKETS, late)] += 1
        cumulative = map(float, itertools.accumulate(per_bucket))
        return quantile(q, {}, dict(zip((*LATENESS_BUCKETS, math.inf), cumulative, strict=True)))
