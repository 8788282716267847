"""pkletd's own metrics of its processes, which no kubelet has, by ``worker``:

- ``pkletd_worker_up``: 1 while the worker runs (it said ready and heartbeats), else 0;
- ``pkletd_worker_restarts_total``: how often it was started again;
- ``pkletd_worker_last_exit_code``: how it last exited, for a worker that did: its exit
  status, or minus the signal that killed it, with the phrase ``pkletd status`` shows
  as ``reason`` (``killed by SIGKILL; not expected (heartbeat timeout)``);
- ``pkletd_process_cpu_seconds_total``, ``pkletd_process_resident_memory_bytes`` and
  ``pkletd_process_pss_bytes``: each live worker's, and the ``supervisor``'s and the
  ``forkserver``'s, read from ``/proc`` at each report.
"""

from __future__ import annotations

from collections.abc import Mapping

from pkletd.ipc.bus.messages import MetricFamily, MetricType
from pkletd.ipc.bus.metricfamily import Labels, family
from pkletd.supervisor.children import Children, State
from pkletd.supervisor.metrics import procstats


def worker_families(children: Children, others: Mapping[str, int]) -> list[MetricFamily]:
    """The workers' families; ``others`` names the pids of the processes that are not
    workers (the supervisor, the fork server)."""
    workers = list(children.workers.values())
    exits: dict[Labels, float] = {
        (w.name, w.last_exit): float(w.last_exit_code)
        for w in workers
        if w.last_exit_code is not None
    }
    pids: dict[str, int] = {**others, **{w.name: w.pid for w in workers if w.pid}}
    stats = {name: s for name, pid in pids.items() if (s := procstats.read(pid)) is not None}
    return [
        family(
            "pkletd_worker_up",
            "1 while the worker is running: it said ready and heartbeats.",
            "gauge",
            ("worker",),
            {(w.name,): float(w.state is State.RUNNING) for w in workers},
        ),
        family(
            "pkletd_worker_restarts_total",
            "Times the worker was started again after it exited.",
            "counter",
            ("worker",),
            {(w.name,): float(w.restarts) for w in workers},
        ),
        family(
            "pkletd_worker_last_exit_code",
            "The worker's last exit: its exit status, or minus the signal that killed it.",
            "gauge",
            ("worker", "reason"),
            exits,
        ),
        _process(
            "pkletd_process_cpu_seconds_total",
            "User and system CPU time the process used, in seconds.",
            "counter",
            {name: s.cpu_seconds for name, s in stats.items()},
        ),
        _process(
            "pkletd_process_resident_memory_bytes",
            "The process's resident set size (RSS), in bytes.",
            "gauge",
            {name: float(s.rss_bytes) for name, s in stats.items()},
        ),
        _process(
            "pkletd_process_pss_bytes",
            "The process's proportional set size (PSS): shared pages divided among the "
            "processes that map them, in bytes.",
            "gauge",
            {name: float(s.pss_bytes) for name, s in stats.items()},
        ),
    ]


def _process(
    name: str, help_text: str, kind: MetricType, values: Mapping[str, float]
) -> MetricFamily:
    labelled: dict[Labels, float] = {(worker,): value for worker, value in values.items()}
    return family(name, help_text, kind, ("worker",), labelled)
