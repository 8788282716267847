"""pkletd: image-gc -- the kubelet's image and container garbage collection.

The worker decides (``images``: the image GC manager's rules; ``containers``: the
container GC's) and the parent removes: it checks every candidate against its own book
and carries out what it agrees to (``supervisor/pods/garbage.py``), so no sandbox,
container or image leaves the runtime behind the parent's back.
"""

from __future__ import annotations

from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.runtime.cri import CriRuntime
from pkletd.workers.imagegc.containers import ContainerCollector
from pkletd.workers.imagegc.images import ImageCollector
from pkletd.workers.imagegc.options import ContainerPolicy, ImagePolicy, Options
from pkletd.workers.imagegc.worker import GarbageWorker
from pkletd.workers.lifecycle import WorkerSettings, serve

__all__ = ["ContainerPolicy", "ImagePolicy", "Options", "main"]


def main(settings: WorkerSettings, options: Options) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    runtime = CriRuntime(options.runtime_endpoint, options.runtime_timeout)
    images = ImageCollector(runtime, options.images)
    containers = ContainerCollector(runtime, options.containers, options.pod_logs_dir)
    worker = GarbageWorker(bus, images, containers, options, runtime.close)
    return serve(settings, bus, worker)
