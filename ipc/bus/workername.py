"""The names of pkletd's worker processes: one closed set for the parent, the bus and the
workers. A name is what the process title, the bus identity, the log file, the metrics'
``worker`` label and ``pkletd restart-worker`` say; each travels as its string.

The order is the start order (and the order ``pkletd status`` lists them in). Which of
them run, and with what, is the parent's worker table (``supervisor/workerset.py``).
This module imports nothing else of pkletd: the CLI reads it without the heavy parts.
"""

from __future__ import annotations

import enum


class WorkerName(enum.StrEnum):
    PLEG = "pleg"
    HTTP = "http"
    POD_RESOURCES = "pod-resources"
    PROBER = "prober"
    FILE_SOURCE = "file-source"
    HTTP_SOURCE = "http-source"
    CERT_MANAGER = "cert-manager"
    STATUS_MANAGER = "status-manager"
    NODE_LEASE = "node-lease"
    API_WATCHER = "api-watcher"
    POD_OBJECTS = "pod-objects"
    PLUGIN_WATCHER = "plugin-watcher"
    NODE_SHUTDOWN = "node-shutdown"
    LOG_ROTATOR = "log-rotator"
    IMAGE_GC = "image-gc"
    EVICTION = "eviction"

    @classmethod
    def of(cls, text: str) -> WorkerName | None:
        """The worker so named; None for a name pkletd has no worker of."""
        try:
            return cls(text)
        except ValueError:
            return None
