"""pkletd: node-lease -- registers the Node, writes its status, renews its Lease.

The kubelet's node status manager and node lease controller, as one worker process:

- ``reporter``: registration (create, or adopt an existing Node) and the node status
  every ``nodeStatusUpdateFrequency``, written only on change or every
  ``nodeStatusReportFrequency``;
- ``lease``: the ``kube-node-lease`` Lease, renewed every quarter of its duration on a
  thread and an API client of its own, so slow status writes never delay it;
- ``runtime``: CRI Status and ListImages every 5 s (Ready's runtime and network part);
- ``nodestatus`` and ``conditions``: what the status is, as pure functions;
- ``worker``: the lifecycle's worker object; ``api``: the API server seam.

The Node to register comes from the parent's snapshot (``Snapshot.node``, composed by
``pkletd.supervisor.node.facts``); the parent's health (``ParentAlive``: sync loop,
PLEG) feeds Ready. The parent learns how it goes from ``NodeReported``. A restarted
worker registers again (the existing Node is adopted, not duplicated) and carries on
with the Lease it finds.
"""

from __future__ import annotations

import logging

from pkletd.ipc.apiclient.kubeapi import connect
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.workers.lifecycle import WorkerSettings, serve
from pkletd.workers.nodelease.api import KubeNodeApi
from pkletd.workers.nodelease.options import NodeLeaseOptions
from pkletd.workers.nodelease.worker import NodeLeaseWorker

__all__ = ["NodeLeaseOptions", "NodeLeaseWorker", "main"]

log = logging.getLogger(__name__)


def main(
    settings: WorkerSettings,
    kubeconfig: str,
    endpoint: str,
    runtime_timeout: float,
    options: NodeLeaseOptions,
) -> int:
    try:
        status_client = connect(kubeconfig, options.api_qps, options.api_burst)
        lease_client = connect(kubeconfig, options.api_qps, options.api_burst)
    except Exception as exc:  # the kubeconfig is the operator's to fix
        log.error("kubeconfig not usable path=%s error=%s", kubeconfig, exc)
        return 2
    timeout = options.api_timeout()
    bus = WorkerBus(settings.run_dir, settings.name)
    runtime = CriRuntime(endpoint, runtime_timeout)
    worker = NodeLeaseWorker(
        bus,
        runtime,
        KubeNodeApi(status_client, timeout),
        KubeNodeApi(lease_client, timeout),
        options,
        on_close=runtime.close,
    )
    return serve(settings, bus, worker)
