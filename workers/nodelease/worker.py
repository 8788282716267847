"""The worker object the lifecycle serves: threads for the API and CRI calls, the loop
for the bus.

The loop only takes broadcasts (``ParentAlive`` into the parent's health, a new
snapshot's Node into the template) and outcomes: the three threads (lease, status,
runtime) do every blocking call and hand their outcomes back through an ``Inbox``,
so the loop never waits on the API server or the runtime and heartbeats go on. From
the outcomes the loop keeps what ``NodeReported`` says and sends it when it changes.
A thread that dies of a bug takes the worker down (the parent restarts it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pkletd.ipc.bus.messages import Message, NodeReported, ParentAlive, Snapshot
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.nodelease.api import NodeApi
from pkletd.workers.nodelease.conditions import ParentHealth
from pkletd.workers.nodelease.lease import LeaseKeeper
from pkletd.workers.nodelease.options import NodeLeaseOptions
from pkletd.workers.nodelease.outcome import Outcome, Source
from pkletd.workers.nodelease.reporter import Inputs, StatusReporter
from pkletd.workers.nodelease.runtime import RuntimeProbe, RuntimeReader

log = logging.getLogger(__name__)

JOIN_S = 2.0  # how long close() waits for each thread
IDLE_S = 3600.0  # the loop has nothing timed of its own

Obj = dict[str, Any]


@dataclass(frozen=True, slots=True)
class ThreadDied:
    thread: str
    error: str


@dataclass
class Reported:
    """What the parent is told (``NodeReported``)."""

    registered: bool = False
    lease_renewed_at: float = 0.0
    status_reported_at: float = 0.0
    errors: dict[Source, str] = field(default_factory=dict)
    conditions: dict[str, str] = field(default_factory=dict)

    def apply(self, outcome: Outcome) -> None:
        if outcome.node_uid or (outcome.source is Source.REGISTRATION and not outcome.error):
            self.registered = True
        if outcome.written_at:
            if outcome.source is Source.LEASE:
                self.lease_renewed_at = outcome.written_at
            else:
                self.status_reported_at = outcome.written_at
        if outcome.conditions:
            self.conditions = dict(outcome.conditions)
        self.errors[outcome.source] = outcome.error

    def message(self) -> NodeReported:
        api_error = "; ".join(f"{s}: {e}" for s, e in sorted(self.errors.items()) if e)
        return NodeReported(
            self.registered,
            self.lease_renewed_at,
            self.status_reported_at,
            api_error,
            dict(self.conditions),
        )


class NodeLeaseWorker:
    def __init__(
        self,
        bus: Sender,
        runtime: RuntimeReader,
        status_api: NodeApi,
        lease_api: NodeApi,
        options: NodeLeaseOptions,
        clock: Clock = SYSTEM_CLOCK,
        on_close: Callable[[], None] = lambda: None,
    ) -> None:
        self._bus = bus
        self._runtime = runtime
        self._status_api = status_api
        self._lease_api = lease_api
        self._options = options
        self._clock = clock
        self._on_close = on_close
        self._outcomes: Inbox[Outcome | ThreadDied] = Inbox()
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._inputs: Inputs | None = None
        self._lease: LeaseKeeper | None = None
        self._reported = Reported()
        self._sent: NodeReported | None = None
        self._node_uid = ""

    # --- the Worker protocol ----------------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        name = (snapshot.node.get("metadata") or {}).get("name")
        if not name:
            log.error("no node in the snapshot; waiting for one")
            return
        if self._inputs is None:
            self._start(snapshot.node)
            return
        self._inputs.set_template(snapshot.node)
        self._inputs.parent_answered(self._clock.monotonic())

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, ParentAlive) and self._inputs is not None:
            now = self._clock.monotonic()
            started_or_ended = self._inputs.heard_parent(
                now,
                message.sync_loop_ok,
                message.pleg_ok,
                message.shutting_down,
                message.pressure,
                message.volumes_in_use,
            )
            if started_or_ended:
                self._inputs.wake.set()  # Ready changes now, not at the next round

    def fds(self) -> Sequence[int]:
        return (self._outcomes.fileno(),)

    def on_readable(self, fd: int) -> None:
        for item in self._outcomes.take():
            if isinstance(item, ThreadDied):
                raise RuntimeError(f"thread {item.thread} died: {item.error}")
            self._apply(item)
        self._send_report()

    def tick(self, now: float) -> float:
        return now + IDLE_S

    def close(self) -> None:
        self._stop.set()
        if self._inputs is not None:
            self._inputs.wake.set()
        deadline = time.monotonic() + JOIN_S
        for thread in self._threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        self._outcomes.close()
        self._status_api.close()
        self._lease_api.close()
        self._on_close()

    # --- inside ------------------------------------------------------------------------------

    def _start(self, template: Obj) -> None:
        name = template["metadata"]["name"]
        options = self._options
        self._inputs = Inputs(template, ParentHealth(alive_at=self._clock.monotonic()))
        probe = RuntimeProbe(self._runtime, self._clock, options.runtime_check_period)
        reporter = StatusReporter(
            self._status_api, probe, self._inputs, options, self._clock, self._outcomes.put
        )
        self._lease = LeaseKeeper(
            self._lease_api,
            name,
            options.lease_duration_s,
            options.lease_renew_interval(),
            self._clock,
            self._outcomes.put,
            options.lease_jitter,
        )
        for label, body in (
            ("runtime", probe.run),
            ("status", reporter.run),
            ("lease", self._lease.run),
        ):
            self._spawn(label, body)
        log.info(
            "node-lease started node=%s register=%s renew_every=%.1fs status_every=%.1fs",
            name,
            options.register_node,
            options.lease_renew_interval(),
            options.update_frequency,
        )

    def _spawn(self, label: str, body: Callable[[threading.Event], None]) -> None:
        def run() -> None:
            try:
                body(self._stop)
            except Exception as exc:  # a bug: the worker goes down and is restarted
                log.exception("thread died thread=%s", label)
                self._outcomes.put(ThreadDied(label, f"{type(exc).__name__}: {exc}"))

        thread = threading.Thread(target=run, name=f"node-lease-{label}", daemon=True)
        self._threads.append(thread)
        thread.start()

    def _apply(self, outcome: Outcome) -> None:
        if outcome.node_uid and outcome.node_uid != self._node_uid:
            self._node_uid = outcome.node_uid
            if self._lease is not None:
                self._lease.set_node_uid(outcome.node_uid)
        self._reported.apply(outcome)

    def _send_report(self) -> None:
        """The one place that tells the parent (``NodeReported``)."""
        message = self._reported.message()
        if message != self._sent:
            self._bus.send(message)
            self._sent = message
