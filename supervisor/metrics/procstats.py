"""What one process costs, as ``/proc`` says it: CPU time (user and system, ``stat``)
and memory (``smaps_rollup``): resident (RSS) and proportional (PSS, each shared page
divided among the processes that map it: what a worker forked from the pre-imported
fork server really adds)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
TICKS_PER_S = os.sysconf("SC_CLK_TCK")
KIB = 1024


@dataclass(frozen=True, slots=True)
class ProcessStats:
    cpu_seconds: float
    rss_bytes: int
    pss_bytes: int


def read(pid: int) -> ProcessStats | None:
    """The process's stats; None if it is gone (or its files cannot be read)."""
    try:
        stat = (PROC / str(pid) / "stat").read_text()
        rollup = (PROC / str(pid) / "smaps_rollup").read_text()
    except OSError:
        return None
    # After "(comm)", which may hold spaces, the fields go on from the state (the 3rd):
    # utime and stime are the 14th and 15th.
    fields = stat.rpartition(")")[2].split()
    cpu = (int(fields[11]) + int(fields[12])) / TICKS_PER_S
    sizes = _kib(rollup)
    return ProcessStats(cpu, sizes.get("Rss", 0) * KIB, sizes.get("Pss", 0) * KIB)


def _kib(text: str) -> dict[str, int]:
    """``Name:   123 kB`` lines, by name."""
    found = {}
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        value = rest.split()
        if len(value) == 2 and value[1] == "kB" and value[0].isdigit():
            found[name] = int(value[0])
    return found
