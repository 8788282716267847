"""Everything the parent reports at ``/metrics``, gathered into one ``MetricsReport``.

The parent keeps plain counts (``ipc.bus.metricfamily``) where things happen: the pod logic
(``pods.podmetrics``), the CRI calls (``runtimeops``), PLEG's relists (``plegmetrics``),
the bus (``ParentBus``); the workers' state and costs are read when the report is made
(``workermetrics``). The agent broadcasts a report every ``REPORT_S`` and when the http
worker (re)starts; the http worker renders the last one it got.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

from pkletd.ipc.bus.messages import MetricsReport
from pkletd.ipc.bus.metricfamily import ALPHA, family
from pkletd.ipc.bus.sockets import ParentBus
from pkletd.supervisor.children import Children
from pkletd.supervisor.metrics.busmetrics import bus_families
from pkletd.supervisor.metrics.plegmetrics import PlegMetrics
from pkletd.supervisor.metrics.runtimeops import RuntimeOperations
from pkletd.supervisor.metrics.workermetrics import worker_families
from pkletd.supervisor.pods.book import Pods
from pkletd.supervisor.pods.podmetrics import PodMetrics

REPORT_S = 5.0


class AgentMetrics:
    def __init__(self, node_name: str, operations: RuntimeOperations) -> None:
        self.pods = PodMetrics()
        self.pleg = PlegMetrics()
        self._operations = operations
        self._node_name = node_name

    def report(
        self, book: Pods, children: Children, bus: ParentBus, forkserver_pid: int
    ) -> MetricsReport:
        node = family(
            "kubelet_node_name",
            ALPHA + "The node's name. The count is always 1.",
            "gauge",
            ("node",),
            {(self._node_name,): 1.0},
        )
        others: Mapping[str, int] = {"supervisor": os.getpid(), "forkserver": forkserver_pid}
        return MetricsReport(
            [
                node,
                *self.pods.families(book),
                *self._operations.families(),
                *self.pleg.families(),
                *worker_families(children, others),
                *bus_families(bus),
            ]
        )
