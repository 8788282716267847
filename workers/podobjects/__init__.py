"""pkletd: pod-objects -- the API objects the node's pods reference, fetched, followed
and handed to the parent (started only with ``--kubeconfig``).

The kubelet's secret and configmap managers (``pkg/kubelet/secret``,
``pkg/kubelet/configmap``, ``pkg/kubelet/util/manager``), its token manager
(``pkg/kubelet/token``) and its service informer, as one worker:

- the pods are the parent's (its snapshot, ``PodStatusUpdated``, ``PodForgotten``);
  what each references is ``references.py``'s list (``wanted.py``), and what no pod
  references any more is let go;
- **ConfigMaps and Secrets** by ``configMapAndSecretChangeDetectionStrategy``:
  ``Watch`` (``watched.py``: a list+watch per object, by name), ``Cache`` and ``Get``
  (``polled.py``: GETs; ``Cache`` takes the node's object TTL from ``nodettl.py``),
  each reading sent as ``ObjectFetched`` when it first comes and when it changes
  (``reading.py``, ``outbox.py``);
- **service account tokens** (``tokens.py``): TokenRequests bound to the pod,
  refreshed as the kubelet's token manager refreshes them, sent as ``TokenIssued``;
- **storage objects** (``polled.py``, by GET only, as the node authorizer allows): each
  claim a pod's volumes use and what it leads to (``persistentvolumes.closure``: the
  bound volume, its CSIDriver, its VolumeAttachment when the driver attaches, the
  secrets it names), read again soon while not final (an unbound claim, a volume not
  attached), sent as ``ObjectFetched`` with the object's ``body``;
- **Services** (``services.py``): one list+watch of all of them, sent per namespace
  as ``ServicesListed``;
- **RuntimeClasses** (``runtimeclasses.py``): one list+watch of all of them, as the
  kubelet's RuntimeClass manager, sent as ``RuntimeClassesListed`` (each class's handler).

Every call goes through one rate-limited client (``calls.py``: ``kubeAPIQPS``,
``kubeAPIBurst``); watches run on threads of their own (``ipc/apiclient/reflector.py``), GETs and
token requests on small job pools; the loop never waits on the network. Secrets stay
in memory: nothing here writes a file, logs a value or a token, and the process is
not dumpable, so no core dump takes them to disk either.
"""

from __future__ import annotations

import ctypes
import functools
import threading

from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apiclient.jobs import ThreadJobs
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.lifecycle import WorkerSettings, serve
from pkletd.workers.podobjects.calls import ApiCalls
from pkletd.workers.podobjects.nodettl import NodeTtl
from pkletd.workers.podobjects.options import Options, Strategy
from pkletd.workers.podobjects.outbox import Outbox
from pkletd.workers.podobjects.parts import ObjectSource, Part
from pkletd.workers.podobjects.polled import Period, Polled, storage_period
from pkletd.workers.podobjects.runtimeclasses import RUNTIME_CLASSES, RuntimeClasses
from pkletd.workers.podobjects.services import Services
from pkletd.workers.podobjects.tokens import Tokens
from pkletd.workers.podobjects.watched import Watched
from pkletd.workers.podobjects.worker import PodObjects, services_key

__all__ = ["Options", "PodObjects", "Strategy", "build", "main"]

THREAD_STACK = 512 * 1024  # per watch thread; the default is the 8 MiB RLIMIT_STACK
POOL_SIZE = 1024  # connections kept for reuse: one per open watch, and then some
READ_THREADS, TOKEN_THREADS, STORAGE_THREADS = 4, 2, 2
PR_SET_DUMPABLE = 4


def build(
    bus: Sender, calls: ApiCalls, options: Options, clock: Clock = SYSTEM_CLOCK
) -> PodObjects:
    """The worker and its parts; ``clock`` is the wall clock tokens are refreshed by."""
    outbox = Outbox(bus)
    others: list[Part] = []
    objects: ObjectSource
    if options.strategy is Strategy.WATCH:
        objects = Watched(calls, outbox.put_object)
    else:
        period: Period = lambda key: options.sync_frequency  # noqa: E731
        if options.strategy is Strategy.CACHE:
            ttl = NodeTtl(calls.node_lister(), options.node_name)
            others.append(ttl)
            period = lambda key: max(ttl.seconds(), options.sync_frequency)  # noqa: E731
        reads = ThreadJobs(READ_THREADS, "reads")
        objects = Polled(calls.read, reads, period, outbox.put_object)
    storage = Polled(
        calls.read,
        ThreadJobs(STORAGE_THREADS, "storage"),
        storage_period(outbox.latest_object),
        outbox.put_object,
    )
    tokens = Tokens(calls.request_token, ThreadJobs(TOKEN_THREADS, "tokens"), outbox.put, clock)
    services = Services(
        calls.services_lister(), lambda namespace, m: outbox.put(services_key(namespace), m)
    )
    others.append(
        RuntimeClasses(
            calls.runtime_classes_lister(), functools.partial(outbox.put, RUNTIME_CLASSES)
        )
    )
    return PodObjects(outbox, objects, storage, tokens, services, options.node_name, others)


def main(settings: WorkerSettings, kubeconfig: str, options: Options) -> int:
    ctypes.CDLL(None, use_errno=True).prctl(PR_SET_DUMPABLE, 0, 0, 0, 0)  # no core dumps
    threading.stack_size(THREAD_STACK)
    calls = ApiCalls(
        kubeapi.connect(kubeconfig, options.kube_api_qps, options.kube_api_burst, POOL_SIZE)
    )
    bus = WorkerBus(settings.run_dir, settings.name)
    try:
        return serve(settings, bus, build(bus, calls, options))
    finally:
        calls.close()
