"""pkletd: file-source -- static pods from ``staticPodPath``.

A worker of its own because it parses untrusted input: a manifest that makes the
YAML parser blow up costs a worker restart, never the sync loop.

Reads every manifest (YAML or JSON, one Pod per file; names starting with "." are
ignored, as the kubelet does) when inotify reports a change in the directory, and
every ``fileCheckFrequency`` anyway. Each read sends the whole set
(``PodsListed``), which the parent diffs against what it has: a restarted source
loses nothing. Each pod is given its kubelet-style identity (``manifests.py``,
shared with the HTTP source): name ``<name>-<nodeName>``, namespace ``default`` if
absent, ``spec.nodeName``, and, if the manifest has no UID, one derived from the
pod, the node and the file path. A bad file, a file whose pod is marked deleted
(``metadata.deletionTimestamp``), or a second file with a pod name already taken, is
reported once per version with its path and reason (``ManifestRejected``), and the
other pods go on; once it reads well again, or is gone, that is said too
(``ManifestAccepted``). A snapshot (the parent restarted, or lost messages) reports
every rejection again.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pkletd.ipc.apimodel.manifests import (
    ManifestError,
    file_origin,
    first_of_each_name,
    load_documents,
    marked_deleted,
    static_pod,
)
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.bus.messages import (
    ManifestAccepted,
    ManifestRejected,
    Message,
    PodsListed,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.inotify import Inotify
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

SOURCE = PodSource.FILE
SETTLE_S = 0.05  # let a burst of inotify events (editor save, cp) settle before reading
RETRY_WATCH_S = 1.0


def read_manifest(path: Path, node_name: str) -> dict[str, Any]:
    """One static pod from ``path``, with its kubelet-style identity applied."""
    try:
        text = path.read_text()
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read: {exc}") from exc
    documents = load_documents(text)
    if len(documents) != 1:
        raise ManifestError(f"want exactly one Pod per file, found {len(documents)} documents")
    pod = static_pod(documents[0], SOURCE, file_origin(path, node_name), node_name)
    deleted = marked_deleted(pod)
    if deleted is not None:
        raise ManifestError(deleted)
    return pod


def manifest_paths(root: Path) -> list[Path]:
    if root.is_file():
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if not p.name.startswith(".") and p.is_file())


class FileSource:
    def __init__(
        self, bus: Sender, root: Path, node_name: str, period: float, inotify: Inotify
    ) -> None:
        self._bus = bus
        self._root = root
        self._node = node_name
        self._period = period
        self._inotify = inotify
        self._next_read = 0.0
        self._next_watch = 0.0
        self._sent: list[dict[str, Any]] | None = None
        self._reported: dict[Path, str] = {}

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._sent = None  # the parent may have lost our last set: send it again
        self._reported = {}  # ... and what we rejected
        self._next_read = 0.0

    def on_broadcast(self, message: Message) -> None:
        pass

    def fds(self) -> Sequence[int]:
        return (self._inotify.fd,)

    def on_readable(self, fd: int) -> None:
        if self._inotify.drain():
            self._inotify.watching = False
        self._next_read = min(self._next_read, time.monotonic() + SETTLE_S)

    def tick(self, now: float) -> float:
        if not self._inotify.watching and now >= self._next_watch:
            self._inotify.watch(self._root)
            self._next_watch = now + RETRY_WATCH_S
        if now >= self._next_read:
            self._read_all()
            self._next_read = now + self._period
        if self._inotify.watching:
            return self._next_read
        return min(self._next_read, self._next_watch)

    def close(self) -> None:
        self._inotify.close()

    def _read_all(self) -> None:
        found = []
        failed: set[Path] = set()
        for path in manifest_paths(self._root):
            try:
                found.append((str(path), read_manifest(path, self._node)))
            except ManifestError as exc:
                self._reject(path, str(exc))
                failed.add(path)
        pods, dropped = first_of_each_name(found)
        for where, reason in dropped:
            self._reject(Path(where), reason)
        rejected = {Path(where) for where, _ in dropped} | failed
        for path in list(self._reported):
            if path not in rejected:
                self._accept(path)
        if pods != self._sent:
            self._bus.send(PodsListed(SOURCE, pods))
            self._sent = pods
            log.info("sent pods source=%s count=%d", SOURCE, len(pods))

    def _reject(self, path: Path, reason: str) -> None:
        if self._reported.get(path) == reason:
            return
        self._reported[path] = reason
        log.error("manifest rejected path=%s reason=%s", path, reason)
        self._bus.send(ManifestRejected(SOURCE, str(path), reason))

    def _accept(self, path: Path) -> None:
        """A manifest rejected before reads well again, or is gone."""
        del self._reported[path]
        log.info("manifest accepted path=%s", path)
        self._bus.send(ManifestAccepted(SOURCE, str(path)))


def main(settings: WorkerSettings, root: Path, node_name: str, period: float) -> int:
    bus = WorkerBus(settings.run_dir, settings.name, broadcasts=False)  # needs none
    source = FileSource(bus, root, node_name, period, Inotify())
    return serve(settings, bus, source)
