"""pkletd: eviction -- the kubelet's eviction manager, the measuring and deciding half.

Every monitoring period it measures the node's eviction signals, checks them against
the thresholds, checks the pods' local storage limits and reports to the parent, which
owns the pods and does the rest (pressure conditions, admission, evicting pods):

- ``thresholds``: signals, thresholds (hard and soft, minimum reclaim), from the
  KubeletConfiguration's eviction fields;
- ``signals``: reading the signals (cgroups, statfs, CRI ImageFsInfo, /proc);
- ``manager``: the kubelet's ``synchronize`` decisions, pure;
- ``podusage``: what each pod uses of the resource to reclaim, from a Summary;
- ``localstorage``: which pods are over their local storage limits (emptyDir
  ``sizeLimit``, ephemeral-storage limits), from a Summary of those pods;
- ``worker``: the round, node-level reclaim, waiting for an evicted pod.

It reads cgroups, filesystems and the runtime, which are untrusted and change under
it, so none of that runs in the parent; it writes nothing.
"""

from __future__ import annotations

from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.nodestats.cgroupstats import CgroupReader
from pkletd.ipc.nodestats.summary import NodePaths, SummaryProvider
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.workers.eviction.signals import SignalReader
from pkletd.workers.eviction.thresholds import from_config
from pkletd.workers.eviction.worker import EvictionWorker, Options
from pkletd.workers.lifecycle import WorkerSettings, serve

__all__ = ["EvictionWorker", "Options", "from_config", "main"]


def main(
    settings: WorkerSettings,
    endpoint: str,
    runtime_timeout: float,
    paths: NodePaths,
    options: Options,
) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    runtime = CriRuntime(endpoint, runtime_timeout)
    cgroups = CgroupReader()
    signals = SignalReader(cgroups, paths.root_dir, runtime, paths.proc)
    usage = SummaryProvider(paths, cgroups, runtime)
    try:
        return serve(settings, bus, EvictionWorker(bus, signals, usage, options))
    finally:
        runtime.close()
