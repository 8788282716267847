"""The pod-resources worker: keeps the node's pods as the parent broadcasts them and
answers gRPC clients from them on the server's own threads.

The lifecycle thread replaces ``pods`` whole; the gRPC threads only read it, so neither
waits for the other. A client hammering ``List`` costs this process, never the
kubelet API or the parent.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

from pkletd.ipc.bus.messages import Message, PodForgotten, PodStatusUpdated, Snapshot
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.workers.lifecycle import WorkerSettings, serve
from pkletd.workers.podresources.servicer import PodDict
from pkletd.workers.podresources.servicer import serve as serve_grpc

log = logging.getLogger(__name__)

SOCKET = Path("pod-resources") / "kubelet.sock"  # under the root dir, as the kubelet's
STOP_GRACE_S = 1.0


class PodResourcesWorker:
    def __init__(self, socket_path: Path) -> None:
        self.pods: dict[str, PodDict] = {}  # by UID
        self._server = serve_grpc(socket_path, lambda: self.pods.values())

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self.pods = {p["metadata"]["uid"]: p for p in snapshot.pods}

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, PodStatusUpdated):
            self.pods = {**self.pods, message.pod["metadata"]["uid"]: message.pod}
        elif isinstance(message, PodForgotten):
            self.pods = {k: v for k, v in self.pods.items() if k != message.uid}

    def fds(self) -> Sequence[int]:
        return ()

    def on_readable(self, fd: int) -> None:
        raise AssertionError("pod-resources polls no fds in the lifecycle loop")

    def tick(self, now: float) -> float:
        return now + 3600.0

    def close(self) -> None:
        self._server.stop(STOP_GRACE_S).wait()


def main(settings: WorkerSettings, root_dir: Path) -> int:
    bus = WorkerBus(settings.run_dir, settings.name)
    return serve(settings, bus, PodResourcesWorker(root_dir / SOCKET))
