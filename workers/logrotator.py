"""pkletd: log-rotator -- the kubelet's container log manager.

Rotation, as ``pkg/kubelet/logs/container_log_manager.go`` does it, every
``containerLogMonitorInterval`` (counted from the end of the previous pass), with
up to ``containerLogMaxWorkers`` containers at a time:

- for every *running* container of a pod (``io.kubernetes.pod.uid`` label), ask
  the runtime for its log path (ContainerStatus); if the file is missing, ask the
  runtime to reopen it (ReopenContainerLog);
- if the file has reached ``containerLogMaxSize``: remove leftovers of an
  interrupted rotation (``*.tmp``, and an uncompressed file whose ``.gz`` exists),
  remove the oldest rotated files so that at most ``containerLogMaxFiles - 2``
  remain, gzip every remaining rotated file that is not compressed yet
  (``<log>.<timestamp>.gz``), rename the live file to ``<log>.<timestamp>``
  (``YYYYMMDD-hhmmss``, local time) and ask the runtime to reopen the log path,
  renaming it back if that fails. So a container has at most
  ``containerLogMaxFiles`` files: the live one, the last rotated one as it was
  (a reader may still be following it), and the older ones compressed.

A negative ``containerLogMaxSize`` turns rotation off (the kubelet's stub manager).
The log dirs of pods that are gone are container GC's (the image-gc worker, carried
out by the parent), as in the kubelet.

ReopenContainerLog is a runtime write outside the parent: this worker is a named
exception to the one-writer rule (docs/design/processes.md), touching nothing but log files.
The passes run in a thread of their own, so heartbeats never wait on a gzip.
"""

from __future__ import annotations

import glob
import gzip
import logging
import os
import shutil
import threading
import time
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Protocol

from pkletd.ipc.bus.messages import Message, Snapshot
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.runtime.cri import ContainerInfo, ContainerState, CriError, CriRuntime
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

TIMESTAMP_FORMAT = "%Y%m%d-%H%M%S"  # Go's "20060102-150405"
COMPRESS_SUFFIX = ".gz"
TMP_SUFFIX = ".tmp"
STOP_WAIT_S = 4.0  # how long close() waits for a pass (the parent SIGKILLs after 5 s)


@dataclass(frozen=True, slots=True)
class RotatePolicy:
    max_size: int  # bytes; negative: no rotation
    max_files: int  # at least 2


class LogReopener(Protocol):
    def reopen_container_log(self, container_id: str) -> None: ...


# --- one container's log ----------------------------------------------------------------


def split_unused(logs: Sequence[str]) -> tuple[list[str], list[str]]:
    """``(in use, unused)``: temporary files and files already compressed are unused."""
    present = set(logs)
    in_use: list[str] = []
    unused: list[str] = []
    for name in logs:
        if name.endswith(TMP_SUFFIX):
            unused.append(name)
        elif not name.endswith(COMPRESS_SUFFIX) and name + COMPRESS_SUFFIX in present:
            unused.append(name)
        else:
            in_use.append(name)
    return in_use, unused


def compress(path: str) -> None:
    """``path`` -> ``path.gz`` through a temporary file, keeping its mode; then remove ``path``."""
    tmp = path + TMP_SUFFIX
    mode = os.stat(path).st_mode & 0o7777
    try:
        with open(path, "rb") as source:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, mode)
            with (
                open(fd, "wb") as target,
                gzip.GzipFile(filename="", mode="wb", fileobj=target, mtime=0) as packed,
            ):
                shutil.copyfileobj(source, packed, 1 << 20)
        os.rename(tmp, path + COMPRESS_SUFFIX)
    finally:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
    os.unlink(path)


def rotate(
    runtime: LogReopener,
    container_id: str,
    path: str,
    policy: RotatePolicy,
    clock: Clock = SYSTEM_CLOCK,
) -> str:
    """Rotate the log at ``path`` now (see the module doc); the rotated file's name."""
    rotated_before = sorted(glob.glob(glob.escape(path) + ".*"))
    in_use, unused = split_unused(rotated_before)
    for name in unused:
        os.unlink(name)
    keep = max(policy.max_files - 2, 0)  # besides the live file and the one rotated now
    excess = len(in_use) - keep
    for name in in_use[: max(excess, 0)]:
        os.unlink(name)
    for name in in_use[max(excess, 0) :]:
        if not name.endswith(COMPRESS_SUFFIX):
            compress(name)
    rotated = f"{path}.{time.strftime(TIMESTAMP_FORMAT, time.localtime(clock.time()))}"
    os.rename(path, rotated)
    try:
        runtime.reopen_container_log(container_id)
    except CriError:
        try:
            os.rename(rotated, path)  # try again next round
        except OSError as exc:
            log.error("rotated log not renamed back path=%s to=%s error=%s", path, rotated, exc)
        raise
    return rotated


def rotate_if_full(runtime: LogReopener, container_id: str, path: str, policy: RotatePolicy) -> str:
    """Rotate the container's log if it reached the size limit; the rotated name, else ""."""
    try:
        size = os.stat(path).st_size
    except FileNotFoundError:
        # A rotation may have lost the live file (the reopen failed, then a restart):
        # have the runtime open it again.
        runtime.reopen_container_log(container_id)
        size = os.stat(path).st_size
    if size < policy.max_size:
        return ""
    return rotate(runtime, container_id, path, policy)


# --- the worker -------------------------------------------------------------------------


class LogRotator:
    def __init__(
        self,
        runtime: CriRuntime,
        policy: RotatePolicy,
        interval: float,
        workers: int,
    ) -> None:
        self._runtime = runtime
        self._policy = policy
        self._interval = interval
        self._workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="rotate")
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="passes", daemon=True)

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if self._thread.ident is None:  # the first snapshot: the parent is there, start
            log.info(
                "log rotation max_size=%d max_files=%d interval=%gs workers=%d",
                self._policy.max_size,
                self._policy.max_files,
                self._interval,
                self._workers,
            )
            self._thread.start()

    def on_broadcast(self, message: Message) -> None:
        pass  # rotation needs nothing of the parent's

    def fds(self) -> Sequence[int]:
        return ()

    def on_readable(self, fd: int) -> None:
        raise AssertionError("the log-rotator polls no fds")

    def tick(self, now: float) -> float:
        if self._thread.ident is not None and not self._thread.is_alive():
            raise RuntimeError("the log rotation thread ended")  # a restart brings it back
        return now + 1.0  # the passes run in their own thread

    def close(self) -> None:
        self._stop.set()
        if self._thread.is_alive():
            self._thread.join(STOP_WAIT_S)
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._runtime.close()

    # --- the passes thread ------------------------------------------------------------

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.run_pass()
            except Exception:  # one bad pass must not end rotation for good
                log.exception("log rotation pass failed")
            self._stop.wait(self._interval)

    def run_pass(self) -> None:
        if self._policy.max_size < 0:
            return
        try:
            listed = self._runtime.list_containers()
        except CriError as exc:
            log.error("listing containers failed error=%s", exc)
            return
        running = [c for c in listed if c.pod_uid and c.state is ContainerState.RUNNING]
        list(self._pool.map(self._rotate_container, running))

    def _rotate_container(self, container: ContainerInfo) -> None:
        if self._stop.is_set():
            return
        try:
            path = self._runtime.container_log_path(container.id)
            rotated = path and rotate_if_full(self._runtime, container.id, path, self._policy)
            if rotated:
                log.info(
                    "rotated container log container=%s path=%s to=%s", container.id, path, rotated
                )
        except (CriError, OSError) as exc:
            log.error("container log not rotated container=%s error=%s", container.id, exc)


def main(
    settings: WorkerSettings,
    endpoint: str,
    timeout: float,
    policy: RotatePolicy,
    interval: float,
    workers: int,
) -> int:
    bus = WorkerBus(settings.run_dir, settings.name, broadcasts=False)  # needs none
    rotator = LogRotator(CriRuntime(endpoint, timeout), policy, interval, workers)
    return serve(settings, bus, rotator)
