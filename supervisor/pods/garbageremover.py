"""Carrying out garbage collection off the loop thread: one collection at a time, on one
thread of its own, each result handed back to the loop through an ``Inbox``.

Every removal reads the runtime again just before it acts, so a candidate that changed
since the worker listed it is left alone: a container is removed only if the runtime
still lists it under that pod and not running (its log file first, with the rotated
ones, as the kubelet's ``removeContainerLog``); a sandbox only if it is not ready and
holds no container (stopped, then removed, as the kubelet's ``removeSandbox``); a pod
log dir only if it is a plain directory of that pod under ``podLogsDir``; an image only
if no container uses it and no pod the parent holds names it (resolved by ImageStatus
now). Each removal is one CRI call (or one file operation) that either happened or did
not: an agent killed in between leaves nothing half removed, and the next collection
finds what is left.
"""

from __future__ import annotations

import glob
import logging
import shutil
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from pkletd.ipc.bus.messages import DeadContainer, DeadSandbox, GarbageFound, PodLogDir, UnusedImage
from pkletd.ipc.runtime.cri import (
    ContainerID,
    ContainerState,
    CriError,
    SandboxID,
    SandboxState,
    unless_gone,
)
from pkletd.ipc.wakeup import Inbox
from pkletd.supervisor.pods.runtime import Runtime

log = logging.getLogger(__name__)

Candidate = TypeVar("Candidate", DeadContainer, DeadSandbox)


@dataclass(slots=True)
class Removal:
    """What one collection removed, and what failed (each failure's message)."""

    found: GarbageFound  # as carried out: the candidates the parent agreed to
    containers: int = 0
    sandboxes: int = 0
    log_dirs: int = 0
    images: int = 0
    freed_bytes: int = 0  # the removed images' sizes
    errors: list[str] = field(default_factory=list)


def by_pod(candidates: Iterable[Candidate]) -> dict[str, list[Candidate]]:
    found: dict[str, list[Candidate]] = {}
    for candidate in candidates:
        found.setdefault(candidate["pod_uid"], []).append(candidate)
    return found


def log_dir_name_ok(candidate: PodLogDir) -> bool:
    """A plain ``<namespace>_<name>_<uid>`` name of the pod it claims."""
    parts = candidate["name"].split("_")
    return (
        len(parts) == 3
        and all(parts)
        and parts[2] == candidate["pod_uid"]
        and ("/" not in candidate["name"] and candidate["name"] not in (".", ".."))
    )


class GarbageRemover:
    def __init__(self, runtime: Runtime, logs_root: Path) -> None:
        self._runtime = runtime
        self._logs_root = logs_root
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="gc")
        self._done: Inbox[Removal] = Inbox()

    def fileno(self) -> int:
        return self._done.fileno()

    def submit(self, found: GarbageFound, image_users: frozenset[str]) -> None:
        """Remove ``found``'s candidates, in order; ``image_users`` are the images the
        parent's pods name, kept whatever the worker thought."""
        self._pool.submit(self._run, found, image_users)

    def completed(self) -> list[Removal]:
        return self._done.take()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        self._done.close()

    def _run(self, found: GarbageFound, image_users: frozenset[str]) -> None:
        removal = Removal(found)
        try:
            self._containers(removal)
            self._sandboxes(removal)
            self._log_dirs(removal)
            self._images(removal, image_users)
        except CriError as exc:  # a list call failed: the rest waits for the next collection
            log.error("garbage collection stopped collection=%s error=%s", found.collection, exc)
            removal.errors.append(exc.rpc_message)
        finally:
            self._done.put(removal)

    # --- containers, sandboxes, log dirs ---------------------------------------------

    def _containers(self, removal: Removal) -> None:
        for uid, candidates in by_pod(removal.found.containers).items():
            listed = {str(c.id): c for c in self._runtime.list_containers(uid)}
            for candidate in candidates:
                container = listed.get(candidate["id"])
                if container is None or container.state is ContainerState.RUNNING:
                    continue  # removed meanwhile, or not what the worker saw
                try:
                    self._remove_log(container.id)
                    unless_gone(self._runtime.remove_container, container.id)
                except (CriError, OSError) as exc:
                    log.error("failed to remove container container=%s error=%s", container.id, exc)
                    removal.errors.append(str(exc))
                    continue
                log.info(
                    "removed dead container container=%s pod_uid=%s name=%s",
                    container.id[:13],
                    uid,
                    container.name,
                )
                removal.containers += 1

    def _remove_log(self, container_id: ContainerID) -> None:
        """The container's log file and its rotated files, if under ``podLogsDir``."""
        path = unless_gone(self._runtime.container_log_path, container_id)
        if not path or not Path(path).is_relative_to(self._logs_root):
            return
        for name in [path, *glob.glob(glob.escape(path) + ".*")]:
            Path(name).unlink(missing_ok=True)

    def _sandboxes(self, removal: Removal) -> None:
        for uid, candidates in by_pod(removal.found.sandboxes).items():
            listed = {str(s.id): s for s in self._runtime.list_sandboxes(uid)}
            occupied = {c.sandbox_id for c in self._runtime.list_containers(uid)}
            for candidate in candidates:
                sandbox = listed.get(candidate["id"])
                if sandbox is None or sandbox.state is SandboxState.READY:
                    continue
                if sandbox.id in occupied:
                    continue
                if self._remove_sandbox(sandbox.id, removal):
                    log.info("removed dead sandbox sandbox=%s pod_uid=%s", sandbox.id[:13], uid)
                    removal.sandboxes += 1

    def _remove_sandbox(self, sandbox_id: SandboxID, removal: Removal) -> bool:
        try:
            unless_gone(self._runtime.stop_sandbox, sandbox_id)
            unless_gone(self._runtime.remove_sandbox, sandbox_id)
        except CriError as exc:
            log.error("failed to remove sandbox sandbox=%s error=%s", sandbox_id, exc)
            removal.errors.append(exc.rpc_message)
            return False
        return True

    def _log_dirs(self, removal: Removal) -> None:
        for candidate in removal.found.log_dirs:
            path = self._logs_root / candidate["name"]
            if not log_dir_name_ok(candidate) or path.is_symlink() or not path.is_dir():
                continue
            try:
                shutil.rmtree(path)
            except OSError as exc:
                log.error("failed to remove pod log dir path=%s error=%s", path, exc)
                removal.errors.append(str(exc))
                continue
            log.info("removed pod log dir path=%s uid=%s", path, candidate["pod_uid"])
            removal.log_dirs += 1

    # --- images ---------------------------------------------------------------------

    def _images(self, removal: Removal, image_users: frozenset[str]) -> None:
        images = removal.found.images
        if not images:
            return
        in_use = self._images_in_use(image_users)
        for image in [i for i in images if i["expired"]]:
            self._remove_image(image, in_use, removal)
        for image in [i for i in images if not i["expired"]]:
            if removal.freed_bytes >= removal.found.wanted_bytes:
                break
            self._remove_image(image, in_use, removal)

    def _images_in_use(self, image_users: frozenset[str]) -> set[str]:
        """Image ids a container has (dead ones too) or a pod of the parent's names."""
        in_use = {c.image_ref for c in self._runtime.list_containers()}
        for name in image_users:
            found = self._runtime.image_status(name)
            if found is not None:
                in_use.add(found.id)
        return in_use

    def _remove_image(self, image: UnusedImage, in_use: set[str], removal: Removal) -> None:
        if image["id"] in in_use:
            log.info("image kept: in use image=%s", image["id"])
            return
        log.info("removing image to free bytes image=%s size=%d", image["id"], image["size"])
        try:
            unless_gone(self._runtime.remove_image, image["id"])
        except CriError as exc:
            log.error("failed to remove image image=%s error=%s", image["id"], exc)
            removal.errors.append(exc.rpc_message)
            return
        removal.images += 1
        removal.freed_bytes += image["size"]
