"""The runtime as the node status sees it: CRI Status and ListImages, every 5 s.

``RuntimeProbe.check`` is the kubelet's ``updateRuntimeUp`` (RuntimeReady and
NetworkReady into a ``RuntimeState``) plus the image list the Images setter reads. It
runs on a thread of its own, so a runtime that hangs makes the node "container runtime
is down" after ``runtime_down_after`` instead of holding up the status writes.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Protocol

from pkletd.ipc.clock import Clock
from pkletd.ipc.runtime.cri import CriError, ListedImage, RuntimeCondition
from pkletd.workers.nodelease.conditions import RuntimeState, after_status

log = logging.getLogger(__name__)


class RuntimeReader(Protocol):
    """The CRI calls the node status needs (``CriRuntime`` has them)."""

    def runtime_conditions(self) -> list[RuntimeCondition]: ...

    def list_images(self) -> list[ListedImage]: ...


@dataclass(frozen=True, slots=True)
class RuntimeView:
    state: RuntimeState
    images: tuple[ListedImage, ...] | None  # None: not listed (yet, or the call failed)
    checked: bool  # a check has completed


class RuntimeProbe:
    def __init__(self, runtime: RuntimeReader, clock: Clock, period: float) -> None:
        self._runtime = runtime
        self._clock = clock
        self._period = period
        self._lock = threading.Lock()
        self._view = RuntimeView(RuntimeState(), None, checked=False)
        self._problem = ""  # the last problem logged

    def view(self) -> RuntimeView:
        with self._lock:
            return self._view

    def run(self, stop: threading.Event) -> None:
        while not stop.is_set():
            self.check()
            if self._clock.wait(stop, self._period):
                return

    def check(self) -> None:
        try:
            conditions: list[RuntimeCondition] | None = self._runtime.runtime_conditions()
            failed = ""
        except CriError as exc:
            conditions, failed = None, f"container runtime sanity check failed: {exc}"
        try:
            images: tuple[ListedImage, ...] | None = tuple(self._runtime.list_images())
        except CriError as exc:
            images = None
            log.warning("images not listed error=%s", exc)
        with self._lock:
            state = after_status(self._view.state, conditions, self._clock.monotonic())
            self._view = RuntimeView(state, images, checked=True)
        self._log(failed or state.runtime_error or state.network_error)

    def _log(self, problem: str) -> None:
        if problem == self._problem:
            return
        if problem:
            log.error("runtime not ready reason=%s", problem)
        else:
            log.info("runtime ready")
        self._problem = problem
