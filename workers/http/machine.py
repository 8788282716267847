"""``/spec/``: the machine, as cAdvisor's ``MachineInfo`` JSON shapes it (the fields the
kubelet's consumers read: cores, memory, and the machine, system and boot ids)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path
from typing import Any

PROC = Path("/proc")
MACHINE_ID_FILES = (Path("/etc/machine-id"), Path("/var/lib/dbus/machine-id"))
PRODUCT_UUID = Path("/sys/class/dmi/id/product_uuid")
CPU_MAX_FREQ = Path("/sys/devices/system/cpu/cpu0/cpufreq/cpuinfo_max_freq")


def _read(path: Path) -> str:
    try:
        return path.read_text().strip()
    except OSError:
        return ""


def _meminfo_bytes(text: str, key: str) -> int:
    for line in text.splitlines():
        name, _, rest = line.partition(":")
        if name == key:
            parts = rest.split()
            return int(parts[0]) * (1024 if parts[1:] == ["kB"] else 1) if parts else 0
    return 0


def _cpuinfo(text: str) -> tuple[int, int, str, int]:
    """(physical cores, sockets, vendor, MHz*1000) from /proc/cpuinfo."""
    cores: set[tuple[str, str]] = set()
    sockets: set[str] = set()
    vendor, khz = "", 0
    physical = core = ""
    for line in text.splitlines() + [""]:
        key, _, value = (part.strip() for part in line.partition(":"))
        if key == "physical id":
            physical = value
        elif key == "core id":
            core = value
        elif key == "vendor_id":
            vendor = value
        elif key == "cpu MHz" and not khz:
            khz = int(float(value) * 1000)
        elif not key:
            if physical or core:
                cores.add((physical, core))
                sockets.add(physical)
            physical = core = ""
    return len(cores), len(sockets), vendor, khz


def machine_info(now: dt.datetime | None = None) -> dict[str, Any]:
    meminfo = _read(PROC / "meminfo")
    physical, sockets, vendor, khz = _cpuinfo(_read(PROC / "cpuinfo"))
    max_freq = _read(CPU_MAX_FREQ)
    machine_id = next((t for t in map(_read, MACHINE_ID_FILES) if t), "")
    cores = os.cpu_count() or 1
    stamp = (now or dt.datetime.now(dt.UTC)).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    return {
        "timestamp": stamp,
        "vendor_id": vendor,
        "num_cores": cores,
        "num_physical_cores": physical or cores,
        "num_sockets": sockets or 1,
        "cpu_frequency_khz": int(max_freq) if max_freq.isdigit() else khz,
        "memory_capacity": _meminfo_bytes(meminfo, "MemTotal"),
        "swap_capacity": _meminfo_bytes(meminfo, "SwapTotal"),
        "memory_by_type": {},
        "nvm": {"memory_mode_capacity": 0, "app direct_mode_capacity": 0, "avg_power_budget": 0},
        "hugepages": [],
        "machine_id": machine_id,
        "system_uuid": _read(PRODUCT_UUID),
        "boot_id": _read(PROC / "sys/kernel/random/boot_id"),
        "filesystems": [],
        "disk_map": {},
        "network_devices": [],
        "topology": [],
        "cloud_provider": "Unknown",
        "instance_type": "Unknown",
        "instance_id": "None",
    }
