"""The floors of ``/stats/summary`` and ``/metrics/cadvisor``: their sources, read raw.

What each endpoint cannot do without, made in the bench's own process with nothing built
from it, on one gRPC channel:

* ``/stats/summary``: CRI ``ImageFsInfo`` and ``ListContainerStats``, then the CPU and
  memory counter files of the root cgroup, ``/kubepods``, each pod's cgroup and each of
  its containers' (the cgroups below the pod's that are named by a container id);
* ``/metrics/cadvisor``: CRI ``ListContainerStats``, then the same files of the root, the
  three QoS cgroups, each pod's cgroup and every cgroup below it (containers and
  sandboxes).

The counter files are cgroup v1's ``cpuacct.usage``, ``cpuacct.stat``, ``cpu.stat``,
``memory.usage_in_bytes``, ``memory.limit_in_bytes``, ``memory.stat`` (v2: ``cpu.stat``,
``memory.current``, ``memory.max``, ``memory.stat``). The cgroups below a pod's are listed
at each pass, as the runtime may have changed them; then one ``json.dumps`` of the texts
read. Left out, so each stays a floor: the log and volume directory walks, ``statvfs``,
``/proc`` (network, processes) and any parsing or formatting. The time of the CRI calls
of each pass is kept (``cri_seconds``), to show what the runtime's part is.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import grpc
from cri_api.v1 import api_pb2

from tests.harness.containerd import (
    POD_CGROUP_PARENTS,
    cri_target,
    image_service,
    list_pod_sandboxes,
    runtime_service,
)

MOUNT = Path("/sys/fs/cgroup")
V1_FILES = (
    ("cpuacct", "cpuacct.usage"),
    ("cpuacct", "cpuacct.stat"),
    ("cpu", "cpu.stat"),
    ("memory", "memory.usage_in_bytes"),
    ("memory", "memory.limit_in_bytes"),
    ("memory", "memory.stat"),
)
V2_FILES = (("", "cpu.stat"), ("", "memory.current"), ("", "memory.max"), ("", "memory.stat"))
CRI_TIMEOUT = 30.0
# with an empty filter, as pkletd and the kubelet send it: containerd 1.6 takes about twice
# as long to answer a request that has no filter at all
LIST_STATS = api_pb2.ListContainerStatsRequest(filter=api_pb2.ContainerStatsFilter())


def _read(path: Path) -> str:
    try:
        return path.read_text()
    except OSError:  # a container that went away between the listing and the read
        return ""


class RawStats:
    """Reads the sources of the pods' stats; each ``read_*`` is one timed pass."""

    def __init__(self, address: str) -> None:
        self._v2 = (MOUNT / "cgroup.controllers").exists()
        self._files = V2_FILES if self._v2 else V1_FILES
        self._channel = grpc.insecure_channel(cri_target(address))
        self._runtime = runtime_service(self._channel)
        self._images = image_service(self._channel)
        self._pods = self._pod_cgroups({s.metadata.uid for s in list_pod_sandboxes(address)})
        self.cri_seconds: list[float] = []

    def _dir(self, cgroup: str, controller: str = "memory") -> Path:
        return (MOUNT if self._v2 else MOUNT / controller) / cgroup

    def _pod_cgroups(self, uids: set[str]) -> list[str]:
        found = []
        for uid in sorted(uids):
            names = [f"{parent}/pod{uid}" for parent in POD_CGROUP_PARENTS]
            found += [n for n in names if self._dir(n).is_dir()]
        if len(found) != len(uids):
            raise AssertionError(f"{len(found)} pod cgroups found for {len(uids)} sandboxes")
        return found

    def _below(self, cgroup: str) -> list[str]:
        with os.scandir(self._dir(cgroup)) as entries:
            return [e.name for e in entries if e.is_dir(follow_symlinks=False)]

    def _cri(self, image_fs: bool) -> set[str]:
        """The CRI calls of a pass; the ids of the containers the runtime has stats of."""
        t0 = time.perf_counter()
        stats = self._runtime.ListContainerStats(LIST_STATS, timeout=CRI_TIMEOUT)
        if image_fs:
            self._images.ImageFsInfo(api_pb2.ImageFsInfoRequest(), timeout=CRI_TIMEOUT)
        self.cri_seconds.append(time.perf_counter() - t0)
        return {s.attributes.id for s in stats.stats}

    def _counters(self, cgroups: list[str]) -> int:
        texts = {
            f"{cgroup}/{name}": _read(self._dir(cgroup, controller) / name)
            for cgroup in cgroups
            for controller, name in self._files
        }
        return len(json.dumps(texts))

    def read_summary(self) -> int:
        """A pass over the summary's sources; the size of what was read, as JSON."""
        ids = self._cri(image_fs=True)
        below = [f"{p}/{c}" for p in self._pods for c in self._below(p) if c in ids]
        return self._counters(["", POD_CGROUP_PARENTS[0], *self._pods, *below])

    def read_cadvisor(self) -> int:
        """A pass over the cAdvisor metrics' sources; the size of what was read, as JSON."""
        self._cri(image_fs=False)
        below = [f"{p}/{c}" for p in self._pods for c in self._below(p)]
        return self._counters(["", *POD_CGROUP_PARENTS, *self._pods, *below])

    def close(self) -> None:
        self._channel.close()
