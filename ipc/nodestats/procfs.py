"""The node-wide facts the stats read from ``/proc`` (and a few files beside it).

Every function takes the proc root, so tests give them a directory of their own.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

PROC = Path("/proc")
IGNORED_INTERFACES = ("lo", "veth", "docker")  # cAdvisor leaves these out of the node's


@dataclass(frozen=True, slots=True)
class Interface:
    """One line of ``/proc/<pid>/net/dev``."""

    name: str
    rx_bytes: int
    rx_packets: int
    rx_errors: int
    rx_dropped: int
    tx_bytes: int
    tx_packets: int
    tx_errors: int
    tx_dropped: int


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:
        return ""


def parse_net_dev(text: str) -> list[Interface]:
    """``/proc/net/dev``: two header lines, then ``name: rx(8 fields) tx(8 fields)``."""
    found = []
    for line in text.splitlines()[2:]:
        name, _, counters = line.partition(":")
        fields = counters.split()
        if len(fields) < 16:
            continue
        n = [int(f) for f in fields]
        found.append(Interface(name.strip(), n[0], n[1], n[2], n[3], n[8], n[9], n[10], n[11]))
    return found


def net_dev(proc: Path = PROC, pid: int | str = "self") -> list[Interface]:
    """The interfaces of ``pid``'s network namespace, but loopback."""
    return [i for i in parse_net_dev(_read(proc / str(pid) / "net" / "dev")) if i.name != "lo"]


def host_interfaces(proc: Path = PROC) -> list[Interface]:
    """The host's interfaces as cAdvisor counts them for the node (no lo, veth, docker)."""
    return [
        i
        for i in parse_net_dev(_read(proc / "net" / "dev"))
        if not i.name.startswith(IGNORED_INTERFACES)
    ]


def meminfo(proc: Path = PROC) -> dict[str, int]:
    """``/proc/meminfo`` in bytes."""
    found = {}
    for line in _read(proc / "meminfo").splitlines():
        key, _, rest = line.partition(":")
        words = rest.split()
        if words and words[0].isdigit():
            found[key] = int(words[0]) * (1024 if words[1:] == ["kB"] else 1)
    return found


def boot_time(proc: Path = PROC) -> float | None:
    for line in _read(proc / "stat").splitlines():
        if line.startswith("btime "):
            return float(line.split()[1])
    return None


def cpu_ns(proc: Path = PROC, user_hz: int = 100) -> int | None:
    """The busy time of every CPU since boot (``/proc/stat``), for a node without a root
    cgroup counter (cgroup v2 before ``cpu.stat`` at the root)."""
    for line in _read(proc / "stat").splitlines():
        if line.startswith("cpu "):
            ticks = [int(v) for v in line.split()[1:]]
            busy = sum(ticks[:8]) - ticks[3] - (ticks[4] if len(ticks) > 4 else 0)
            return busy * (1_000_000_000 // user_hz)
    return None


def task_count(proc: Path = PROC) -> int | None:
    """Tasks on the node (``/proc/loadavg``'s ``running/total``), the kubelet's curproc."""
    fields = _read(proc / "loadavg").split()
    if len(fields) < 4 or "/" not in fields[3]:
        return None
    return int(fields[3].split("/")[1])


def pid_max(proc: Path = PROC) -> int | None:
    """The kubelet's maxpid: the lower of ``pid_max`` and ``threads-max``."""
    values = []
    for name in ("pid_max", "threads-max"):
        text = _read(proc / "sys" / "kernel" / name).strip()
        if text.isdigit():
            values.append(int(text))
    return min(values) if values else None


def process_cgroup(proc: Path = PROC, pid: int | str = "self") -> str | None:
    """The cgroup of a process: the memory hierarchy's on v1, the unified one on v2."""
    unified = None
    for line in _read(proc / str(pid) / "cgroup").splitlines():
        _, controllers, path = line.split(":", 2)
        if "memory" in controllers.split(","):
            return path
        if controllers == "":
            unified = path
    return unified


def machine_ids(root: Path = Path("/")) -> dict[str, str]:
    """cAdvisor's machine labels: boot_id, machine_id, system_uuid ("" when unreadable)."""
    files = {
        "boot_id": root / "proc/sys/kernel/random/boot_id",
        "machine_id": root / "etc/machine-id",
        "system_uuid": root / "sys/class/dmi/id/product_uuid",
    }
    return {label: _read(path).strip() for label, path in files.items()}
