"""pkletd: cert-manager -- the node's client certificate: TLS bootstrap and rotation.

The kubelet's bootstrap (``pkg/kubelet/certificate/bootstrap``) and client certificate
manager (client-go ``util/certificate``) as one worker process:

- ``manager``: what is due (bootstrap, report, rotate), step by step on a thread;
- ``csr``: the key, the request and the CertificateSigningRequest;
- ``requester``: create the request and wait for its certificate;
- ``store``: the pairs under ``--cert-dir`` and the ``kubelet-client-current.pem`` link;
- ``kubeconfigs``: the bootstrap kubeconfig read, the node's kubeconfig written;
- ``timing``: the rotation deadline and the backoff;
- ``worker``: the lifecycle's worker object.

The parent learns of each new pair from ``ClientCertificateReported``: it starts the API
workers it held back for the first, and restarts them for the next (``docs/design/cluster.md``).
"""

from __future__ import annotations

from pkletd.ipc.apiclient.kubeapi import connect
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.workers.certmanager.manager import CertManager, CertSettings
from pkletd.workers.certmanager.worker import CertManagerWorker
from pkletd.workers.lifecycle import WorkerSettings, serve

__all__ = ["CertSettings", "main"]


def main(settings: WorkerSettings, options: CertSettings, qps: int, burst: int) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    worker = CertManagerWorker(bus)
    worker.start(CertManager(options, lambda path: connect(path, qps, burst), worker.report))
    return serve(settings, bus, worker)
