"""pkletd: pleg -- the pod lifecycle event generator.

Reports, as ``PodLifecycleEvent`` messages, what changed in the runtime: containers
that started, died or were removed, and sandboxes that changed state. The parent
reports its own runtime calls at once, so PLEG exists to notice what happens without
the parent (exits, OOM kills, removals by someone else).

Two modes (``mode``): while containerd's event stream flows (``ipc/runtime/events.py``), an
exit or a removal is read and reported as soon as the CRI shows it, and a relist every
5 minutes is the safety net; without it (lost, containerd restarting, a runtime with no
events API, or ``--pleg-runtime-events=false``) PLEG relists every
``--pleg-relist-period`` and subscribes again after a back-off. Both ways give the same
events (``diff``); the parent is told the mode (``PlegModeChanged``), by which it judges
PLEG's health.

A restarted PLEG starts from the parent's view of the runtime (the snapshot), so a
container that died while PLEG was down is still reported.
"""

from __future__ import annotations

from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.ipc.runtime.events import RuntimeEvents
from pkletd.workers.lifecycle import WorkerSettings, serve
from pkletd.workers.pleg.worker import Pleg


def main(
    settings: WorkerSettings, endpoint: str, timeout: float, period: float, events: bool
) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    runtime = CriRuntime(endpoint, timeout)
    source = RuntimeEvents(endpoint) if events else None
    return serve(settings, bus, Pleg(runtime, bus, period, source))
