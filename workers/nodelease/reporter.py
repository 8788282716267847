"""Registration and node status, as the kubelet's ``syncNodeStatus`` does them.

Every ``update_frequency`` (counted from the end of the last round), on a thread:

- registration first, while it has not succeeded (and only with ``registerNode``):
  create the Node the parent composed, with its whole status; if it exists already
  (409), read it and adopt it, reconciling what the kubelet owns on it (the
  attach-detach annotation, its default labels, hugepage resources; never the taints,
  which NodeRestriction keeps a node from changing). Attempts are 100 ms apart,
  doubling to 7 s.
- then the status: read the Node (the first try from the API server's cache), set
  it as ``nodestatus.updated_node`` says, and PATCH ``nodes/<name>/status`` only if
  that changed something other than heartbeat times, or the last write is
  ``report_frequency`` old. Up to 5 tries, each reading the Node afresh. A Node
  this worker created counts as a write of its status (the kubelet would PATCH the
  same status again at once).

Each step's outcome goes to the worker's loop through ``report``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any

from pkletd.ipc.apiclient.jsonapi import CONFLICT, ApiCallFailed
from pkletd.ipc.clock import Clock
from pkletd.workers.nodelease.api import NodeApi
from pkletd.workers.nodelease.conditions import (
    REQUIRED_CAPACITY,
    STORAGE_CAPACITY,
    Limits,
    ParentHealth,
    condition,
)
from pkletd.workers.nodelease.nodestatus import (
    Observed,
    initial_node,
    reconciled,
    status_patch,
    updated_node,
)
from pkletd.workers.nodelease.options import NodeLeaseOptions
from pkletd.workers.nodelease.outcome import Outcome, Source
from pkletd.workers.nodelease.runtime import RuntimeProbe
from pkletd.workers.nodelease.timing import Backoff

log = logging.getLogger(__name__)

UPDATE_RETRIES = 5  # the kubelet's nodeStatusUpdateRetry
REGISTER_FIRST_WAIT_S = 0.1
REGISTER_MAX_WAIT_S = 7.0

Obj = dict[str, Any]


class Inputs:
    """What the worker's loop shares with the status thread: the Node the parent
    composed and what the parent's broadcasts said."""

    def __init__(self, template: Obj, parent: ParentHealth) -> None:
        self.wake = threading.Event()  # the status thread writes now (or sees it must stop)
        self._lock = threading.Lock()
        self._template = template
        self._parent = parent

    def set_template(self, template: Obj) -> None:
        with self._lock:
            self._template = template

    def heard_parent(
        self,
        now: float,
        sync_loop_ok: bool,
        pleg_ok: bool,
        shutting_down: bool = False,
        pressure: Iterable[str] = (),
        volumes_in_use: Iterable[str] = (),
    ) -> bool:
        """Take a ParentAlive; True when it starts or ends a node shutdown."""
        with self._lock:
            was = self._parent.shutting_down
            self._parent = self._parent.heard(
                now, sync_loop_ok, pleg_ok, shutting_down, pressure, volumes_in_use
            )
            return was != shutting_down

    def parent_answered(self, now: float) -> None:
        """The parent answered (a snapshot): alive, its health as last heard."""
        with self._lock:
            self._parent = replace(self._parent, alive_at=now)

    def read(self) -> tuple[Obj, ParentHealth]:
        with self._lock:
            return self._template, self._parent


class StatusReporter:
    def __init__(
        self,
        api: NodeApi,
        probe: RuntimeProbe,
        inputs: Inputs,
        options: NodeLeaseOptions,
        clock: Clock,
        report: Callable[[Outcome], None],
    ) -> None:
        self._api = api
        self._probe = probe
        self._inputs = inputs
        self._options = options
        self._clock = clock
        self._report = report
        required = REQUIRED_CAPACITY + ((STORAGE_CAPACITY,) if options.local_storage else ())
        self._limits = Limits(options.runtime_down_after, options.parent_silent_after, required)
        self._registered = False
        self._last_report: float | None = None  # monotonic time of the last status write
        self._ready = ""  # the Ready status last written

    def run(self, stop: threading.Event) -> None:
        """A round every ``update_frequency``, or at once when woken (a node shutdown: the
        kubelet syncs the node status as it starts); ``stop`` also wakes it."""
        while not stop.is_set():
            self.sync(stop)
            self._clock.wait(self._inputs.wake, self._options.update_frequency)
            self._inputs.wake.clear()

    def sync(self, stop: threading.Event) -> None:
        if self._options.register_node and not self._registered:
            self._register(stop)
        if not stop.is_set():
            self.update_status()

    # --- registration -------------------------------------------------------------------------

    def _register(self, stop: threading.Event) -> None:
        backoff = Backoff(REGISTER_FIRST_WAIT_S, REGISTER_MAX_WAIT_S)
        while not self._registered:
            if self._clock.wait(stop, backoff.next()):
                return
            self._registered = self.try_register()

    def try_register(self) -> bool:
        template, _ = self._inputs.read()
        node = initial_node(template, self._observe())
        name = node["metadata"]["name"]
        try:
            created = self._api.create_node(node)
        except ApiCallFailed as exc:
            if exc.status != CONFLICT:
                return self._failed(Source.REGISTRATION, "node not registered", exc)
            return self._adopt(node)
        self._last_report = self._clock.monotonic()
        log.info("node registered node=%s", name)
        self._note_ready(node)
        uid = _uid(created)
        self._report(Outcome(Source.REGISTRATION, node_uid=uid))
        self._written(created)
        return True

    def _adopt(self, node: Obj) -> bool:
        name = node["metadata"]["name"]
        try:
            existing = self._api.get_node(name)
            fixed = reconciled(node, existing)
            if fixed is not None:
                self._api.patch_node_status(name, status_patch(existing, fixed))
        except ApiCallFailed as exc:
            return self._failed(Source.REGISTRATION, "node not adopted", exc)
        log.info(
            "node was already registered; adopted node=%s reconciled=%s", name, fixed is not None
        )
        self._report(Outcome(Source.REGISTRATION, node_uid=_uid(existing)))
        return True

    # --- status -------------------------------------------------------------------------------

    def update_status(self) -> None:
        """Up to 5 tries; the outcome of the last goes to the loop."""
        last: ApiCallFailed | None = None
        for attempt in range(UPDATE_RETRIES):
            try:
                self._try_update(attempt)
                return
            except ApiCallFailed as exc:
                log.error("node status not updated; will retry attempt=%d error=%s", attempt, exc)
                last = exc
        self._report(
            Outcome(Source.STATUS, error=f"update node status exceeds retry count: {last}")
        )

    def _try_update(self, attempt: int) -> None:
        template, _ = self._inputs.read()
        name = template["metadata"]["name"]
        original = self._api.get_node(name, from_cache=attempt == 0)
        node, changed = updated_node(original, template, self._observe())
        now = self._clock.monotonic()
        due = self._last_report is None or now - self._last_report >= self._options.report_frequency
        if not changed and not due:
            self._report(Outcome(Source.STATUS, node_uid=_uid(original)))
            return
        written = self._api.patch_node_status(name, status_patch(original, node))
        self._last_report = now
        self._note_ready(written)
        self._written(written)

    def _written(self, node: Obj) -> None:
        conditions = (node.get("status") or {}).get("conditions") or []
        self._report(
            Outcome(
                Source.STATUS,
                written_at=self._clock.time(),
                node_uid=_uid(node),
                conditions=tuple((str(c.get("type")), str(c.get("status"))) for c in conditions),
            )
        )

    # --- helpers ------------------------------------------------------------------------------

    def _observe(self) -> Observed:
        view = self._probe.view()
        if not view.checked:
            self._probe.check()  # the first status waits for the first runtime check
            view = self._probe.view()
        _, parent = self._inputs.read()
        return Observed(
            runtime=view.state,
            parent=parent,
            limits=self._limits,
            images=view.images,
            max_images=self._options.max_images,
            wall=self._clock.time(),
            mono=self._clock.monotonic(),
        )

    def _note_ready(self, node: Obj) -> None:
        ready = condition((node.get("status") or {}).get("conditions") or [], "Ready") or {}
        status = str(ready.get("status", ""))
        if status != self._ready:
            log.info(
                "node ready node=%s ready=%s reason=%s message=%s",
                (node.get("metadata") or {}).get("name"),
                status,
                ready.get("reason", ""),
                ready.get("message", ""),
            )
            self._ready = status

    def _failed(self, source: Source, what: str, exc: ApiCallFailed) -> bool:
        log.error("%s error=%s", what, exc)
        self._report(Outcome(source, error=str(exc)))
        return False


def _uid(node: Obj) -> str:
    return str((node.get("metadata") or {}).get("uid") or "")
