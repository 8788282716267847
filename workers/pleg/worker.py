"""``Pleg``, the pleg worker's part of the shared lifecycle: relists, runtime events, modes.

PLEG keeps its view of the runtime (object key -> state, and -> its pod), taken from
the parent's snapshot and broadcasts (what the parent's own calls showed) and from its
own reads. A relist reads everything; a runtime event reads the one object it names,
again until the CRI shows the change (``settle``). Either way ``diff`` against the view
gives the lifecycle events, so both report exactly the same ones, a container's death
with its exit (``exits``).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import (
    SANDBOX_PREFIX,
    Message,
    PlegModeChanged,
    PodForgotten,
    PodStatusUpdated,
    RelistCompleted,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.ipc.runtime.cri import CriError
from pkletd.ipc.runtime.events import Topic
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.pleg.diff import diff
from pkletd.workers.pleg.exits import Exits
from pkletd.workers.pleg.mode import ModeSwitch
from pkletd.workers.pleg.settle import Awaiting
from pkletd.workers.pleg.subscriber import EventSource, Item, Lost, Subscriber
from pkletd.workers.pleg.view import PlegRuntime, View, list_all, read_one

log = logging.getLogger(__name__)


class Pleg:
    def __init__(
        self,
        runtime: PlegRuntime,
        bus: Sender,
        period: float,
        events: EventSource | None,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._runtime = runtime
        self._bus = bus
        self._clock = clock
        self._known: dict[str, str] = {}  # object key -> state
        self._owner: dict[str, PodUID] = {}  # object key -> pod uid
        self._inbox: Inbox[Item] = Inbox()
        self._subscriber = Subscriber(events, self._inbox) if events is not None else None
        self._mode = ModeSwitch(period, events is not None, clock)
        self._awaiting = Awaiting()
        self._exits = Exits(runtime)
        self._proving = False  # the open subscription waits for a relist to prove it
        self._next_relist = 0.0

    # --- the lifecycle's calls ----------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._known = dict(snapshot.containers)
        self._report_mode()

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, PodStatusUpdated):
            self._known.update(message.containers)
            uid = PodUID(message.pod.get("metadata", {}).get("uid", ""))
            self._owner.update(dict.fromkeys(message.containers, uid))
        elif isinstance(message, PodForgotten):
            self._forget(message.uid)

    def _forget(self, uid: PodUID) -> None:
        """The parent removed the pod and forgot it: its objects' removals are no news (a
        late event, or the next relist, would make an orphan of it again)."""
        for key in [key for key, owner in self._owner.items() if owner == uid]:
            self._known.pop(key, None)
            del self._owner[key]

    def fds(self) -> Sequence[int]:
        return (self._inbox.fileno(),)

    def on_readable(self, fd: int) -> None:
        for item in self._inbox.take():
            if isinstance(item, Lost):
                self._on_lost(item)
            elif item.topic is Topic.TASK_OOM:
                self._exits.oom_killed(item.object_id)  # it may run on: nothing to read
            else:
                self._awaiting.add(item, self._clock.monotonic())
        self._read_due()

    def tick(self, now: float) -> float:
        if now >= self._mode.next_subscribe:
            self._subscribe()
        if now >= self._next_relist:
            self._relist()
        self._read_due()
        deadlines = [self._next_relist, self._mode.next_subscribe]
        settle = self._awaiting.next_due()
        if settle is not None:
            deadlines.append(settle)
        return min(deadlines)

    def close(self) -> None:
        if self._subscriber is not None:
            self._subscriber.close()
        self._inbox.close()
        self._runtime.close()

    # --- the subscription ---------------------------------------------------------

    def _subscribe(self) -> None:
        assert self._subscriber is not None
        self._subscriber.start()
        self._mode.subscribing()
        self._proving = True
        self._next_relist = 0.0  # at once: it proves the subscription, and catches up

    def _on_lost(self, lost: Lost) -> None:
        if self._subscriber is None or not self._subscriber.current(lost):
            return
        self._subscriber.ended()
        self._proving = False
        was = self._mode.mode
        self._mode.lost(lost.why)
        if self._mode.mode is not was:
            self._relist()  # at once: whatever the lost stream did not tell
            self._report_mode()

    def _report_mode(self) -> None:
        self._bus.send(PlegModeChanged(self._mode.mode, self._mode.reason))

    # --- reading the runtime ------------------------------------------------------

    def _relist(self) -> None:
        started = self._clock.monotonic()
        try:
            view = list_all(self._runtime)
        except CriError as exc:
            log.error("relist failed error=%s", exc)
        else:
            self._send_changes(self._known, view, {**self._owner, **view.owners})
            self._known, self._owner = view.states, view.owners
            self._exits.keep_only(set(view.states))
            self._bus.send(RelistCompleted(self._clock.monotonic() - started, len(view.states)))
            if self._proving and self._subscriber is not None and self._subscriber.open():
                self._proving = False
                self._mode.subscribed()
                self._report_mode()
        self._next_relist = self._clock.monotonic() + self._mode.relist_period()

    def _read_due(self) -> None:
        now = self._clock.monotonic()
        for object_id in self._awaiting.due(now):
            self._read(object_id, now)

    def _read(self, object_id: str, now: float) -> None:
        """Read the object a runtime event named; report what changed."""
        keys = (object_id, SANDBOX_PREFIX + object_id)
        try:
            view = read_one(self._runtime, object_id, self._is_sandbox(object_id))
        except CriError as exc:
            log.warning("runtime event's object unread object=%s error=%s", object_id, exc)
            self._awaiting.later(object_id, now)
            return
        old = {key: self._known[key] for key in keys if key in self._known}
        owners = {key: self._owner[key] for key in keys if key in self._owner}
        self._send_changes(old, view, owners | view.owners)
        for key in keys:
            self._known.pop(key, None)
            self._owner.pop(key, None)
        self._known.update(view.states)
        self._owner.update(view.owners)
        state = next((view.states[key] for key in keys if key in view.states), None)
        self._awaiting.read(object_id, state, now)

    def _is_sandbox(self, object_id: str) -> bool | None:
        """Whether PLEG knows the object as a sandbox (True) or a container (False)."""
        for key, sandbox in ((SANDBOX_PREFIX + object_id, True), (object_id, False)):
            if key in self._known or key in self._owner:
                return sandbox
        return None

    def _send_changes(self, old: dict[str, str], new: View, owners: dict[str, PodUID]) -> None:
        for event in diff(old, new.states, owners):
            key = event.object_id
            told = self._awaiting.told(key)
            self._bus.send(self._exits.tell(event, new.containers.get(key), told))
