"""Keeping mirror pods: one ``MirrorSlot`` per static pod's name, what the API holds there
(from the api-watcher's view, or the last call, whichever is newer by
``resourceVersion``; a pod the watch saw deleted is gone), and the call that brings it
where it should be (``mirrors.action``): create, or delete (grace 0, UID precondition);
a slot left in doubt by a failed write is read.

A slot is settled when nothing is to be done; one that no static pod wants any more is
dropped then. The Node's UID (for the owner reference) is read once, when a mirror
pod is first to be created.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apiclient.retry import Retry
from pkletd.workers.statusmanager import mirrors, podstatus
from pkletd.workers.statusmanager.context import Context
from pkletd.workers.statusmanager.mirrors import Action, SeenKind
from pkletd.workers.statusmanager.state import MirrorSlot, PodEntry

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Where = tuple[str, str]
NODE = "node"
FORBIDDEN, GONE, CONFLICT = 403, 404, 409


class MirrorKeeper:
    def __init__(
        self,
        context: Context,
        pod: Callable[[str], PodEntry | None],
        changed: Callable[[str], None],
        at: Callable[[Where], Obj | None],
    ) -> None:
        """``pod`` finds a static pod by UID; ``changed`` says its mirror changed; ``at``
        is the API pod the watch last showed at a namespace/name."""
        self._context = context
        self._pod = pod
        self._changed = changed
        self._at = at
        self._listed = False  # the watch's whole set arrived
        self._slots: dict[Where, MirrorSlot] = {}
        self._node_uid: str | None = None
        self._node_retry = Retry()
        context.on_back.append(self._retry_now)

    # --- what the parent has ---------------------------------------------------------

    def want(self, entry: PodEntry) -> None:
        """A static pod the parent has: its mirror pod should exist."""
        assert entry.static_hash is not None
        slot = self._slots.get(entry.where)
        if slot is None:
            slot = self._slots[entry.where] = MirrorSlot(*entry.where)
            self._look(slot)
        slot.want_uid = entry.uid
        slot.forgotten.discard(entry.static_hash)

    def let_go(self, entry: PodEntry) -> None:
        """The parent forgot a static pod: its mirror pod goes."""
        assert entry.static_hash is not None
        slot = self._slots.get(entry.where)
        if slot is not None:
            slot.want_uid = "" if slot.want_uid == entry.uid else slot.want_uid
            slot.forgotten.add(entry.static_hash)

    # --- the mirror pod as the status writer sees it -------------------------------------

    def target(self, entry: PodEntry) -> str | None:
        """The UID of the static pod's current mirror pod (None: there is none now)."""
        slot = self._slots.get(entry.where)
        if slot is None or slot.want_uid != entry.uid or entry.static_hash is None:
            return None
        return slot.seen.uid if mirrors.is_mirror_of(slot.seen, entry.static_hash) else None

    def has_scheduled(self, entry: PodEntry) -> bool:
        slot = self._slots.get(entry.where)
        return slot is not None and podstatus.has_scheduled(slot.seen.status)

    def status_written(self, entry: PodEntry, target: str, status: Obj) -> None:
        slot = self._slots.get(entry.where)
        if slot is not None and slot.seen.uid == target:
            slot.seen = replace(slot.seen, status=status)

    def lost(self, entry: PodEntry) -> None:
        """A status write found the mirror pod gone or replaced: look again."""
        slot = self._slots.get(entry.where)
        if slot is not None:
            slot.seen = mirrors.UNKNOWN  # read, unless the watch shows a newer pod there

    # --- what the watch shows ----------------------------------------------------------

    def observed(self, wheres: set[Where] | None) -> None:
        """The watch showed pods at ``wheres`` (None: the whole set)."""
        if wheres is None:
            self._listed = True
        for where, slot in self._slots.items():
            if wheres is None or where in wheres:
                self._look(slot)

    def gone(self, where: Where, uid: str) -> None:
        """The watch saw the pod ``uid`` at ``where`` deleted."""
        slot = self._slots.get(where)
        if slot is None:
            return
        if self._context.api.jobs.busy(_key(where)):
            slot.gone.add(uid)  # the call's end decides
        elif slot.seen.uid == uid:
            slot.seen = mirrors.ABSENT

    def _look(self, slot: MirrorSlot) -> None:
        """Take the watch's view at the slot if it is newer than what the slot knows."""
        if not self._listed or self._context.api.jobs.busy(_key((slot.namespace, slot.name))):
            return
        api_pod = self._at((slot.namespace, slot.name))
        if api_pod is None:
            if not slot.version:  # never seen anything there
                slot.seen = mirrors.ABSENT
            return
        version = str(api_pod["metadata"].get("resourceVersion", ""))
        if podstatus.newer(version, slot.version):
            slot.seen, slot.version = mirrors.seen(api_pod), version

    # --- calls -------------------------------------------------------------------------

    def sync(self, now: float, unlisted: bool) -> None:
        """Start the calls that are due; nothing before the watch's whole set."""
        for slot in list(self._slots.values()):
            self._sync_slot(slot, now, unlisted)
        self._sync_node(now)

    def _want_hash(self, slot: MirrorSlot) -> str | None:
        entry = self._pod(slot.want_uid) if slot.want_uid else None
        return entry.static_hash if entry is not None else None

    def _sync_slot(self, slot: MirrorSlot, now: float, unlisted: bool) -> None:
        where = (slot.namespace, slot.name)
        if self._context.api.jobs.busy(_key(where)):
            return
        want = self._want_hash(slot)
        act = mirrors.action(slot.seen, want, frozenset(slot.forgotten))
        if act is Action.NONE:
            self._settled(slot, want)
            return
        if unlisted:
            return
        if act is Action.CREATE and self._node_uid is None:
            return  # the Node's UID first (_sync_node)
        if not self._context.due(slot.retry, now):
            return
        call = self._call(slot, act)
        self._context.api.jobs.submit(_key(where), call, self._done(where, act))

    def _settled(self, slot: MirrorSlot, want: str | None) -> None:
        if want is None:
            del self._slots[(slot.namespace, slot.name)]
        elif slot.seen.kind is SeenKind.OTHER and not slot.warned_other:
            slot.warned_other = True
            log.warning(
                "a pod that is not a mirror pod has the static pod's name; left alone pod=%s/%s",
                slot.namespace,
                slot.name,
            )

    def _call(self, slot: MirrorSlot, act: Action) -> Callable[[], Any]:
        calls, namespace, name = self._context.api.calls, slot.namespace, slot.name
        if act is Action.READ:
            return lambda: calls.read_pod(namespace, name)
        if act is Action.DELETE:
            uid = slot.seen.uid
            return lambda: calls.delete_pod(namespace, name, uid)
        entry = self._pod(slot.want_uid)
        assert entry is not None and self._node_uid is not None
        body = mirrors.mirror_pod(entry.pod, self._context.node, self._node_uid)
        return lambda: calls.create_pod(namespace, body)

    def _done(self, where: Where, act: Action) -> Callable[[Any], None]:
        def done(outcome: Any) -> None:
            slot = self._slots.get(where)
            if slot is None:
                return
            before = slot.seen
            if isinstance(outcome, Exception):
                self._failed(slot, act, outcome)
            else:
                self._succeeded(slot, act, outcome)
            if slot.seen.uid in slot.gone:  # deleted while the call ran
                slot.seen = mirrors.ABSENT
            slot.gone.clear()
            self._look(slot)
            if before.kind is SeenKind.MIRROR and slot.seen.kind is SeenKind.ABSENT:
                slot.forgotten.discard(before.hash)
            if slot.want_uid:
                self._changed(slot.want_uid)

        return done

    def _succeeded(self, slot: MirrorSlot, act: Action, outcome: Any) -> None:
        self._context.ok()
        slot.retry.succeeded()
        before, where = slot.seen, f"{slot.namespace}/{slot.name}"
        slot.seen = mirrors.ABSENT if act is Action.DELETE else mirrors.seen(outcome)
        version = (outcome or {}).get("metadata", {}).get("resourceVersion")
        if act is not Action.DELETE and version:
            slot.version = str(version)
        if act is Action.CREATE:
            log.info("created mirror pod pod=%s uid=%s", where, slot.seen.uid)
        elif act is Action.DELETE:
            log.info("deleted mirror pod pod=%s uid=%s", where, before.uid)

    def _failed(self, slot: MirrorSlot, act: Action, exc: Exception) -> None:
        code = kubeapi.status_of(exc)
        if act is Action.READ and code in (FORBIDDEN, GONE):
            # The Node authorizer lets a node read only the pods bound to it: one that does
            # not exist is 403 to it, never 404. Either way no pod of ours is there. The
            # back-off is kept: after a create's conflict it is a pod bound elsewhere.
            slot.seen = mirrors.ABSENT
            return
        if code == GONE and act is Action.DELETE:
            slot.seen = mirrors.ABSENT
        elif code == CONFLICT and act is Action.CREATE:
            slot.seen = mirrors.UNKNOWN  # another pod holds the name: look, not at once
            self._context.retry_later(slot.retry)
            return
        elif code == CONFLICT:
            slot.seen = mirrors.UNKNOWN  # another pod there now (delete): look
        else:
            self._context.failed(f"{act.value} mirror pod", exc)
            self._context.retry_later(slot.retry)
            return
        slot.retry.succeeded()

    # --- the Node's UID ---------------------------------------------------------------

    def _sync_node(self, now: float) -> None:
        if self._node_uid is not None or self._context.api.jobs.busy(NODE):
            return
        needed = any(
            mirrors.action(s.seen, self._want_hash(s), frozenset()) is Action.CREATE
            for s in self._slots.values()
        )
        if not needed or not self._context.due(self._node_retry, now):
            return
        calls, node = self._context.api.calls, self._context.node
        self._context.api.jobs.submit(NODE, lambda: calls.read_node(node), self._node_read)

    def _node_read(self, outcome: Obj | Exception) -> None:
        if isinstance(outcome, Exception):
            self._context.failed("read node", outcome)
            self._context.retry_later(self._node_retry)
            return
        self._context.ok()
        self._node_uid = (outcome.get("metadata") or {}).get("uid") or None
        if self._node_uid is None:
            self._context.retry_later(self._node_retry)

    def _retry_now(self) -> None:
        for slot in self._slots.values():
            slot.retry.now()
        self._node_retry.now()


def _key(where: Where) -> tuple[str, str, str]:
    return ("mirror", *where)
