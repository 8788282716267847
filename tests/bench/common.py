"""What every figure uses: statistics, CPU and process accounting, the bench's pkletd, cleanup.

``CpuMeter`` splits the CPU seconds of a window between named processes (pkletd),
our containerd's daemon, its shims with all under them (runc, the pods), the bench
itself, and everything else ("others": other sessions on the machine, kernel
threads), and reports how busy the machine was and how much the hypervisor stole.
Start-up is CPU-bound here: whatever else burns CPU, pkletd itself or another
session's tests, slows the runtime's own calls. A run with many CPU seconds of
"others" is not a fair one.

Every python the bench starts (pkletd included) caches its bytecode in a
private temporary dir (``bytecode_cache``: PYTHONPYCACHEPREFIX,
PYTHONDONTWRITEBYTECODE unset), as an installed pkletd has its ``.pyc`` files;
each timed command is run once, unmeasured, first (``timed_runs``). The
repository gets no ``__pycache__``.
"""

from __future__ import annotations

import argparse
import contextlib
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cri_api.v1 import api_pb2

from tests.harness.containerd import (
    PrivateContainerd,
    cri_channel,
    find_shims,
    pid_alive,
    remove_all_pods,
    remove_pod_cgroups,
    runtime_service,
)
from tests.harness.node import Pkletd, wait_for

REPO = Path(__file__).resolve().parents[2]
PYTHON = REPO / ".venv" / "bin" / "python"
PKLETD = REPO / ".venv" / "bin" / "pkletd"
PARALLELISM = 10
CRI_TIMEOUT = 120.0
START_DEADLINE_S = 300.0


def progress(message: str) -> None:
    print(f"bench: {message}", file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- stats


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile (numpy's default), q in 0..100."""
    ordered = sorted(values)
    if not ordered:
        return math.nan
    rank = (len(ordered) - 1) * q / 100
    lo, hi = math.floor(rank), math.ceil(rank)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (rank - lo)


def ratio(a: float, b: float) -> float:
    return a / b if b > 0 else math.inf


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def verdict(ok: bool) -> str:
    return "ok" if ok else "MISSED"


# --------------------------------------------------------------------------- CPU and processes


def _ticks(pid: int) -> int:
    """CPU ticks of ``pid`` (all its threads) and of its children it has reaped."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0
    return sum(int(v) for v in fields[11:15])  # utime stime cutime cstime


def own_ticks(pid: int) -> int:
    """CPU ticks of ``pid`` itself, all its threads: utime + stime (no reaped children)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])


def machine_ticks() -> tuple[int, int, int]:
    """(busy, steal, total) CPU ticks of the whole machine; busy is neither idle nor steal."""
    values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:9]]
    steal = values[7]
    return sum(values) - values[3] - values[4] - steal, steal, sum(values)


def process_table() -> dict[int, tuple[int, str]]:
    """Every process: pid -> (parent pid, title)."""
    table = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
                raw = (entry / "cmdline").read_bytes()
            except OSError:
                continue
            title = raw.split(b"\0")[0].decode(errors="replace")
            table[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), title)
    return table


def descendants(roots: list[int], table: dict[int, tuple[int, str]] | None = None) -> list[int]:
    """``roots`` and every process under them."""
    table = process_table() if table is None else table
    children: dict[int, list[int]] = {}
    for pid, (ppid, _) in table.items():
        children.setdefault(ppid, []).append(pid)
    found, stack = [], list(roots)
    while stack:
        pid = stack.pop()
        found.append(pid)
        stack.extend(children.get(pid, []))
    return found


class CpuMeter:
    """CPU seconds over a window: named processes, the runtime, this bench, everyone else.

    ``runtime`` is our containerd's shims with all under them (runc, the pods'
    processes); short-lived runc processes count through the shim's reaped-child
    time. What the machine was busy with beyond all that is ``others``: other
    sessions on the machine, and kernel threads.
    """

    def __init__(self, daemon: PrivateContainerd, named: dict[str, list[int]]) -> None:
        self._named = {**named, "containerd": [daemon.pid() or 0]}
        self._socket = daemon.socket_path
        self._start = {name: self._sum(pids) for name, pids in self._named.items()}
        self._runtime_start = self._runtime()
        self._bench_start = self._bench()
        self._machine_start = machine_ticks()

    @staticmethod
    def _sum(pids: list[int]) -> int:
        return sum(_ticks(pid) for pid in pids)

    @staticmethod
    def _bench() -> float:
        times = os.times()
        return times.user + times.system + times.children_user + times.children_system

    def _runtime(self) -> dict[int, int]:
        shims = [shim.pid for shim in find_shims(self._socket)]
        return {pid: _ticks(pid) for pid in descendants(shims)}

    def read(self) -> dict[str, float]:
        hz = os.sysconf("SC_CLK_TCK")
        found = {
            f"cpu_{name}_s": (self._sum(pids) - self._start[name]) / hz
            for name, pids in self._named.items()
        }
        runtime = self._runtime()
        found["cpu_shims_s"] = (
            sum(t - self._runtime_start.get(pid, 0) for pid, t in runtime.items()) / hz
        )
        found["cpu_bench_s"] = self._bench() - self._bench_start
        busy, steal, total = (
            b - a for a, b in zip(self._machine_start, machine_ticks(), strict=True)
        )
        found["cpu_others_s"] = max(0.0, busy / hz - sum(found.values()))
        found["machine_busy"] = busy / max(1, total)
        found["machine_steal"] = steal / max(1, total)
        return found


def cpu_line(extra: dict[str, float]) -> str:
    """``CpuMeter.read()``'s figures as one parenthesised phrase."""
    cpu = ", ".join(
        f"{k.removeprefix('cpu_').removesuffix('_s')} {v:.1f}"
        for k, v in extra.items()
        if k.startswith("cpu_")
    )
    busy = extra.get("machine_busy", math.nan)
    steal = extra.get("machine_steal", math.nan)
    return f"(CPU s: {cpu}; machine {busy:.0%} busy, {steal:.0%} stolen)"


# --------------------------------------------------------------------------- pkletd


class BenchPkletd(Pkletd):
    """``tests.harness.node.Pkletd`` with an explicit pod-sync parallelism."""

    def __init__(self, endpoint: str, parallelism: int) -> None:
        super().__init__(endpoint)
        self.parallelism = parallelism

    def args(self) -> list[str]:
        return [*super().args(), "--pod-sync-parallelism", str(self.parallelism)]

    def alive(self) -> None:
        """Fail at once if pkletd exited (rather than wait for a deadline)."""
        code = self.proc.poll() if self.proc is not None else None
        if code is not None:
            raise AssertionError(f"pkletd exited with status {code}; see {self.log_dir}")

    def start(self, wait: bool = True) -> BenchPkletd:
        super().start(wait=False)
        if wait:
            wait_for("all workers running", lambda: self.alive() or self.all_running())
        return self

    def wait_pod_running(self, name: str, timeout: float) -> None:
        def check() -> bool:
            self.alive()
            pod = self.pod(name)
            return pod is not None and pod_running(pod)

        wait_for(f"pod {name} running", check, timeout)

    def process_tree(self) -> dict[int, str]:
        """This instance's ``pkletd: *`` processes: the supervisor and its descendants."""
        if self.proc is None:
            return {}
        return own_processes(self.proc.pid)

    def shutdown(self, keep: bool) -> None:
        self.stop()
        wait_for("this pkletd's processes gone", lambda: not self.process_tree(), timeout=30)
        if keep:
            progress(f"pkletd dirs kept under {self.base}")
        else:
            shutil.rmtree(self.base, ignore_errors=True)


@dataclass
class Context:
    """One bench run: its containerd, options, figures so far, and the pkletd running now."""

    daemon: PrivateContainerd
    args: argparse.Namespace
    figures: dict[str, Any]
    scratch: Path  # temporary dir for the floor's pod logs
    keep: bool  # keep pkletd's dirs (logs)
    agent: BenchPkletd | None = None

    def drop_agent(self) -> None:
        """Stop the current pkletd (its pods stay, running: the caller removes them)."""
        if self.agent is not None:
            agent, self.agent = self.agent, None
            agent.shutdown(self.keep)


def own_processes(root: int) -> dict[int, str]:
    """``pkletd: *`` processes among ``root`` and its descendants, pid -> title."""
    table = process_table()
    titles = {pid: table.get(pid, (0, ""))[1] for pid in descendants([root], table)}
    return {p: t for p, t in titles.items() if t.startswith("pkletd: ") and pid_alive(p)}


def pod_running(pod: dict[str, Any]) -> bool:
    containers = pod["containers"]
    return (
        pod["phase"] == "Running"
        and bool(containers)
        and all(c["state"] == "running" for c in containers)
    )


def status_pods(agent: BenchPkletd) -> list[dict[str, Any]]:
    """The pods in pkletd's status; fails at once if pkletd died or could not answer."""
    agent.alive()
    reply = agent.status()
    if not reply.get("ok") or "pods" not in reply:
        exited = agent.proc.poll() if agent.proc is not None else None
        raise AssertionError(f"pkletd status failed (exit status {exited}): {reply}")
    pods: list[dict[str, Any]] = reply["pods"]
    return pods


# --------------------------------------------------------------------------- runtime cleanup


def clean_runtime(address: str, parallelism: int = PARALLELISM) -> None:
    """Remove every container and sandbox, in parallel; then check with the harness."""
    started = time.monotonic()

    def quietly(call: Callable[..., Any], request: Any) -> None:
        with contextlib.suppress(Exception):  # remove_all_pods below retries and reports
            call(request, timeout=CRI_TIMEOUT)

    with cri_channel(address) as channel:
        rt = runtime_service(channel)

        def drop_container(cid: str) -> None:
            quietly(rt.StopContainer, api_pb2.StopContainerRequest(container_id=cid, timeout=0))
            quietly(rt.RemoveContainer, api_pb2.RemoveContainerRequest(container_id=cid))

        def drop_sandbox(sid: str) -> None:
            quietly(rt.StopPodSandbox, api_pb2.StopPodSandboxRequest(pod_sandbox_id=sid))
            quietly(rt.RemovePodSandbox, api_pb2.RemovePodSandboxRequest(pod_sandbox_id=sid))

        with ThreadPoolExecutor(parallelism) as pool:
            ids = [
                c.id
                for c in rt.ListContainers(api_pb2.ListContainersRequest(), timeout=30).containers
            ]
            list(pool.map(drop_container, ids))
            sandboxes = rt.ListPodSandbox(api_pb2.ListPodSandboxRequest(), timeout=30).items
            ids = [s.id for s in sandboxes]
            list(pool.map(drop_sandbox, ids))
    remove_all_pods(address)
    remove_pod_cgroups(s.metadata.uid for s in sandboxes)
    if ids:
        progress(f"runtime cleaned: {len(ids)} pods in {time.monotonic() - started:.1f} s")


# --------------------------------------------------------------------------- timing helpers


def poll_until(what: str, check: Callable[[], bool], every: float, timeout: float = 30.0) -> None:
    deadline = time.perf_counter() + timeout
    while not check():
        if time.perf_counter() >= deadline:
            raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")
        time.sleep(every)


def timed_runs(cmd: list[str], runs: int) -> list[float]:
    """Wall times of ``runs`` runs of ``cmd``, after one unmeasured run (fills the pyc cache)."""
    times = []
    for _ in range(runs + 1):
        t0 = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, timeout=60)
        times.append(time.perf_counter() - t0)
        if proc.returncode != 0:
            raise AssertionError(f"{cmd} exited {proc.returncode}: {proc.stderr.decode()[-2000:]}")
    return times[1:]


@contextlib.contextmanager
def bytecode_cache() -> Iterator[None]:
    """Let every python the bench starts cache bytecode, in a private dir.

    As an installed pkletd would have its ``.pyc`` files, whatever the caller's
    PYTHONDONTWRITEBYTECODE says; and the repository gets no ``__pycache__``.
    """
    saved = {k: os.environ.get(k) for k in ("PYTHONDONTWRITEBYTECODE", "PYTHONPYCACHEPREFIX")}
    cache = Path(tempfile.mkdtemp(prefix="pk-bench-pyc-", dir="/tmp"))
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    os.environ["PYTHONPYCACHEPREFIX"] = str(cache)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        shutil.rmtree(cache, ignore_errors=True)
