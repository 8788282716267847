"""pkletd: cert-manager -- the node's client certificate: TLS bootstrap and rotation.

The kubelet's bootstrap (``pkg/kubelet/certificate/bootstrap``) and client certificate
manager (client-go ``util/certificate``) as one worker process:

- ``manager``: what is due (bootstrap, report, rotate), step by step on a thread;
- ``serving``: the serving certificate (``serverTLSBootstrap``), on a thread of its own;
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

import datetime as dt
import functools
import random
import threading
from collections.abc import Callable

from pkletd.ipc.apiclient.kubeapi import LimitedApiClient, connect
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.workers.certmanager.manager import CertManager, CertSettings
from pkletd.workers.certmanager.serving import (
    SERVER_PREFIX,
    ServingCertificate,
    subject_alt_names,
)
from pkletd.workers.certmanager.store import Store
from pkletd.workers.certmanager.worker import CertManagerWorker
from pkletd.workers.lifecycle import WorkerSettings, serve

__all__ = ["CertSettings", "main"]


def main(settings: WorkerSettings, options: CertSettings, qps: int, burst: int) -> int:
    bus = WorkerBus(settings.run_dir, settings.name, broadcasts=False)  # needs none
    worker = CertManagerWorker(bus)

    def client(path: str) -> LimitedApiClient:
        return connect(path, qps, burst)

    manager = CertManager(options, client, worker.report)
    serving: Callable[[threading.Event], None] | None = None
    if options.serving_sans:
        sans = subject_alt_names(options.serving_sans, ())
        keeper = ServingCertificate(
            options.node_name,
            sans,
            Store(options.cert_dir, SERVER_PREFIX),
            random.Random(),
            lambda: dt.datetime.now(dt.UTC),
        )
        serving = functools.partial(keeper.run, options.kubeconfig, client)
    worker.start(manager, serving)
    return serve(settings, bus, worker)
