"""pkletd: plugin-watcher -- CSI drivers register on the node through
``<root-dir>/plugins_registry``, as with the kubelet's plugin manager.

A worker of its own because it talks to third-party sockets: a driver that hangs or
answers nonsense costs a registration (or this worker's restart), never the sync loop.
It runs when pkletd joins a cluster (a CSI volume needs the API's objects), as one of the
API workers: held during TLS bootstrap, restarted when the client certificate rotates.

Modules: ``worker`` (the loop: the directory, the job thread, the bus), ``registrar``
(registering one socket: GetInfo, the checks, NodeGetInfo, the node's objects,
NotifyRegistrationStatus), ``versions`` (the CSI version rules), ``nodeinfo`` (the CSINode
and the Node's annotation and labels), ``api`` (the API calls), ``fakes`` (for tests).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.inotify import Inotify
from pkletd.workers.lifecycle import WorkerSettings, serve
from pkletd.workers.pluginwatcher.api import KubeCsiNodeApi
from pkletd.workers.pluginwatcher.nodeinfo import NodeInfoManager
from pkletd.workers.pluginwatcher.registrar import GrpcPlugins, Registrar
from pkletd.workers.pluginwatcher.worker import PluginWatcher, job_thread

REGISTRY = "plugins_registry"  # under the root dir, as the kubelet's


@dataclass(frozen=True, slots=True)
class WatcherOptions:
    root_dir: Path
    node_name: str
    kubeconfig: str
    api_qps: int
    api_burst: int


def main(settings: WorkerSettings, options: WatcherOptions) -> int:
    bus = WorkerBus(settings.run_dir, settings.name, broadcasts=False)  # needs none
    client = kubeapi.connect(options.kubeconfig, options.api_qps, options.api_burst)
    api = KubeCsiNodeApi(client, kubeapi.REQUEST_TIMEOUT_S)
    registrar = Registrar(GrpcPlugins(), NodeInfoManager(api, options.node_name))
    watcher = PluginWatcher(bus, options.root_dir / REGISTRY, registrar, Inotify(), job_thread())
    try:
        return serve(settings, bus, watcher)
    finally:
        api.close()


__all__ = ["REGISTRY", "WatcherOptions", "main"]
