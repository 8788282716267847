"""pkletd: node-shutdown -- graceful node shutdown's watch on systemd-logind, started
only when a shutdown grace period is configured.

The kubelet's node shutdown manager, its D-Bus side, as one worker process: it keeps a
``delay`` inhibitor lock, so logind waits for the node's pods before a shutdown goes on,
and tells the parent when logind announces a shutdown (the parent stops the pods in
priority groups, then asks for the release) or cancels one (the lock is taken again).
The system bus is ``$DBUS_SYSTEM_BUS_ADDRESS``, by default
``unix:path=/run/dbus/system_bus_socket``; no bus, no logind: one error line, a retry
every second, and the rest of pkletd runs on.

Modules: ``worker`` (the process), ``inhibitor`` (the lock's life, on an asyncio loop),
``logind`` (the ``Logind`` seam and the dbus-fast one), ``fakelogind``, ``dropin`` (the
logind configuration that raises ``InhibitDelayMaxSec``).
"""

from __future__ import annotations

import os

from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.workers.lifecycle import WorkerSettings, serve
from pkletd.workers.nodeshutdown import logind
from pkletd.workers.nodeshutdown.inhibitor import InhibitorOptions
from pkletd.workers.nodeshutdown.worker import NodeShutdownWorker

__all__ = ["InhibitorOptions", "main", "system_bus_address"]

DEFAULT_SYSTEM_BUS = "unix:path=/run/dbus/system_bus_socket"


def system_bus_address() -> str:
    return os.environ.get("DBUS_SYSTEM_BUS_ADDRESS") or DEFAULT_SYSTEM_BUS


def main(settings: WorkerSettings, options: InhibitorOptions) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    worker = NodeShutdownWorker(bus, options, logind.connect)
    return serve(settings, bus, worker)
