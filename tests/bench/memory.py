"""Figure 4, memory, with the start-up figure's pods running.

Total PSS (``Pss:`` of ``/proc/PID/smaps_rollup``) of this bench's ``pkletd: *``
processes (the supervisor and its descendants only: other pkletd instances may
be running on the machine), and each process's PSS and private memory
(``Private_Clean`` + ``Private_Dirty``: what it alone maps, mostly the pages it copied
from the fork server by writing to them; the sum of PSS is the shared pages counted
once plus every process's private ones). Baseline: PSS of one python process that
imported zmq, msgpack, grpc, yaml and the CRI stubs, then waits on stdin.
"""

from __future__ import annotations

import contextlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

from tests.bench.common import PYTHON, Context, ratio, verdict

TARGET_PSS_MB = 100.0  # issue 21: ten processes in 100 MB


def rollup_kb(pid: int, key: str) -> int:
    """One figure (``Pss``, ``Rss``...) of ``/proc/<pid>/smaps_rollup``, in kB."""
    for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
        if line.startswith(f"{key}:"):
            return int(line.split()[1])
    raise LookupError(f"no {key} in /proc/{pid}/smaps_rollup")


def pss_kb(pid: int) -> int:
    return rollup_kb(pid, "Pss")


def private_kb(pid: int) -> int:
    return rollup_kb(pid, "Private_Clean") + rollup_kb(pid, "Private_Dirty")


@contextlib.contextmanager
def heavy_python() -> Iterator[int]:
    """A python that imported what pkletd imports, waiting on stdin; yields its pid."""
    imports = "import sys, zmq, msgpack, grpc, yaml\nimport cri_api.v1.api_pb2_grpc\n"
    subprocess.run([str(PYTHON), "-c", imports], check=True, timeout=60)  # fill the pyc cache
    code = imports + "print('ready', flush=True)\nsys.stdin.read()\n"
    proc = subprocess.Popen(
        [str(PYTHON), "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE
    )
    try:
        assert proc.stdout is not None
        if proc.stdout.readline().strip() != b"ready":
            raise AssertionError("baseline python did not start")
        yield proc.pid
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def section(ctx: Context) -> None:
    agent = ctx.agent
    assert agent is not None
    processes = agent.process_tree()
    per_process = {title: pss_kb(pid) / 1024 for pid, title in processes.items()}
    private = {title: private_kb(pid) / 1024 for pid, title in processes.items()}
    total_mb = sum(per_process.values())
    with heavy_python() as pid:
        baseline_mb = pss_kb(pid) / 1024
    print(
        f"memory: PSS of {len(processes)} pkletd processes with {ctx.args.pods} pods: "
        f"{total_mb:.1f} MB vs one python with the same imports {baseline_mb:.1f} MB = "
        f"{ratio(total_mb, baseline_mb):.2f}x "
        f"[target < {TARGET_PSS_MB:.0f} MB: {verdict(total_mb < TARGET_PSS_MB)}]"
    )
    print(
        f"  per process, PSS / private MB (private in all: {sum(private.values()):.1f} MB): "
        + ", ".join(
            f"{t.removeprefix('pkletd: ')} {mb:.1f} / {private[t]:.1f}"
            for t, mb in sorted(per_process.items())
        )
    )
    ctx.figures.update(
        {
            "memory_pkletd_pss_mb": total_mb,
            "memory_baseline_pss_mb": baseline_mb,
            "memory_ratio": ratio(total_mb, baseline_mb),
            "memory_pkletd_processes": len(processes),
            **{f"memory_pss_mb_{t.removeprefix('pkletd: ')}": v for t, v in per_process.items()},
            **{f"memory_private_mb_{t.removeprefix('pkletd: ')}": v for t, v in private.items()},
        }
    )
    ctx.figures["targets_met"]["memory"] = total_mb < TARGET_PSS_MB
