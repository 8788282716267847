"""What crossed the bus, counted by the parent's end of it (``ParentBus``):
``pkletd_bus_messages_received_total`` (by the ``worker`` that sent it and ``kind``),
``pkletd_bus_messages_sent_total`` (the parent's direct replies, such as snapshots, by
worker and kind) and ``pkletd_bus_broadcasts_total`` (by kind; every worker gets each)."""

from __future__ import annotations

from pkletd.ipc.bus.messages import MetricFamily
from pkletd.ipc.bus.metricfamily import Labels, family
from pkletd.ipc.bus.sockets import ParentBus

BY_WORKER = ("worker", "kind")


def bus_families(bus: ParentBus) -> list[MetricFamily]:
    received: dict[Labels, float] = {key: float(n) for key, n in bus.received.items()}
    sent: dict[Labels, float] = {key: float(n) for key, n in bus.sent.items()}
    broadcasts: dict[Labels, float] = {(kind,): float(n) for kind, n in bus.broadcasts.items()}
    return [
        family(
            "pkletd_bus_messages_received_total",
            "Bus messages the supervisor received, by the worker that sent them and kind.",
            "counter",
            BY_WORKER,
            received,
        ),
        family(
            "pkletd_bus_messages_sent_total",
            "Bus messages the supervisor sent to one worker, by worker and kind.",
            "counter",
            BY_WORKER,
            sent,
        ),
        family(
            "pkletd_bus_broadcasts_total",
            "Bus messages the supervisor broadcast to every worker, by kind.",
            "counter",
            ("kind",),
            broadcasts,
        ),
    ]
