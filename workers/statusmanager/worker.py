"""The status manager's loop: what the parent reports comes in, API calls go out.

Every call runs on a job thread (``jobs.py``) and its outcome comes back to the loop,
which alone holds the state (``state.py``); at most one call per object is in flight.
``tick`` starts what is due: mirror pod fixes (``mirrorsync.py``), status patches, final
deletes, and events (``eventsink.py``). What the API holds comes from the api-watcher's
watch (``ApiPodsObserved``, handed on by the parent, the whole set in each snapshot):
nothing is written before the first whole set, and each newer view of a pod (by
``resourceVersion``) is compared with what is wanted.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apiclient.jobs import ThreadJobs
from pkletd.ipc.apiclient.retry import transient
from pkletd.ipc.apimodel.podspec import PodUID
from pkletd.ipc.bus.messages import (
    ApiPodsObserved,
    EventRecorded,
    Message,
    PodDeleted,
    PodForgotten,
    PodStatusUpdated,
    PodTerminated,
    Snapshot,
)
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.clock import SYSTEM_CLOCK, Clock
from pkletd.workers.lifecycle import WorkerSettings, serve
from pkletd.workers.statusmanager import podstatus
from pkletd.workers.statusmanager.calls import ClientCalls
from pkletd.workers.statusmanager.context import ApiAccess, Context, Options
from pkletd.workers.statusmanager.eventsink import EventSink
from pkletd.workers.statusmanager.mirrorsync import MirrorKeeper
from pkletd.workers.statusmanager.state import FinalDelete, PodEntry

log = logging.getLogger(__name__)

Obj = dict[str, Any]
Where = tuple[str, str]
IDLE_WAKE_S = 60.0  # the loop's longest sleep when nothing waits for a time
GONE, CONFLICT = 404, 409
UNLIMITED_QPS = 1_000_000_000


class StatusManager:
    def __init__(
        self,
        bus: Sender,
        api: ApiAccess,
        node_name: str,
        options: Options,
        clock: Clock = SYSTEM_CLOCK,
    ) -> None:
        self._bus = bus
        self._context = context = Context(api, node_name, options, clock)
        self._pods: dict[str, PodEntry] = {}
        self._check: set[str] = set()  # pods whose status may need a write
        self._deletes: dict[str, FinalDelete] = {}
        self._api: dict[str, Obj] = {}  # uid -> the API pod as observed (ApiPodsObserved)
        self._names: dict[Where, str] = {}  # namespace/name -> the uid observed there
        self._listed = False  # the API's whole set arrived: statuses may be written
        self._mirrors = MirrorKeeper(context, self._pods.get, self._check.add, self._at)
        self._events = EventSink(context)
        context.on_back.append(self._retry_now)

    # --- the Worker protocol -------------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if snapshot.api_listed:
            self._observed(ApiPodsObserved(snapshot.api_pods, whole=True))
        present = {_uid_of(p) for p in snapshot.pods}
        for uid in [uid for uid in self._pods if uid not in present]:
            self._forget(uid)
        for pod in snapshot.pods:
            self._update(pod)
        for item in snapshot.terminated:
            try:
                self._terminated(str(item["uid"]), str(item["namespace"]), str(item["name"]))
            except (KeyError, TypeError) as exc:
                log.error("dropped terminated pod without identity error=%s", exc)

    def on_broadcast(self, message: Message) -> None:
        if isinstance(message, ApiPodsObserved):
            self._observed(message)
        elif isinstance(message, PodStatusUpdated):
            self._update(message.pod)
        elif isinstance(message, PodForgotten):
            self._forget(message.uid)
        elif isinstance(message, PodTerminated):
            self._terminated(message.uid, message.namespace, message.name)
        elif isinstance(message, EventRecorded):
            self._events.record(message.event)

    def fds(self) -> Sequence[int]:
        return (self._context.api.jobs.fileno(), self._context.api.event_jobs.fileno())

    def on_readable(self, fd: int) -> None:
        self._context.api.jobs.deliver()
        self._context.api.event_jobs.deliver()

    def tick(self, now: float) -> float:
        self._context.wake = now + IDLE_WAKE_S
        self._mirrors.sync(now, not self._listed)
        for uid in list(self._check):
            entry = self._pods.get(uid)
            if entry is None or not self._sync_status(entry, now):
                self._check.discard(uid)
        for final in list(self._deletes.values()):
            self._sync_delete(final, now)
        self._events.sync(now)
        return self._context.wake

    def close(self) -> None:
        self._context.api.close()

    # --- what the parent reports ------------------------------------------------------

    def _update(self, pod: Obj) -> None:
        try:
            fresh = PodEntry.of(pod)
        except (KeyError, TypeError, AttributeError) as exc:
            log.error("dropped pod without identity error=%s", exc)
            return
        entry = self._pods.setdefault(fresh.uid, fresh)
        entry.pod, entry.static_hash, entry.forgotten = pod, fresh.static_hash, False
        self._check.add(entry.uid)
        if entry.static_hash is not None:
            self._mirrors.want(entry)
        self._compare(entry)

    def _forget(self, uid: str) -> None:
        entry = self._pods.get(uid)
        if entry is None:
            return
        if entry.static_hash is None:
            entry.forgotten = True  # kept until its last status is written
            self._check.add(uid)
            return
        del self._pods[uid]  # its mirror pod goes: no status to write
        self._mirrors.let_go(entry)

    def _terminated(self, uid: str, namespace: str, name: str) -> None:
        if uid not in self._deletes:
            self._deletes[uid] = FinalDelete(uid, namespace, name)

    def _retry_now(self) -> None:
        """The server answers again: every write that waits goes now."""
        for entry in self._pods.values():
            entry.retry.now()
            self._check.add(entry.uid)
        for final in self._deletes.values():
            final.retry.now()

    # --- what the API holds -------------------------------------------------------------

    def _at(self, where: Where) -> Obj | None:
        """The API pod observed at namespace/name (None: none, or not listed yet)."""
        uid = self._names.get(where)
        return None if uid is None else self._api.get(uid)

    def _observed(self, message: ApiPodsObserved) -> None:
        first = message.whole and not self._listed
        gone = list(message.gone)
        if message.whole:  # what it no longer has is gone (deleted while nobody watched)
            present = {(p.get("metadata") or {}).get("uid") for p in message.pods}
            gone = [uid for uid in self._api if uid not in present]
        touched: set[Where] = set()
        for uid in gone:
            pod = self._api.pop(uid, None)
            if pod is not None:
                where = _where(pod)
                if self._names.get(where) == uid:
                    del self._names[where]
                self._mirrors.gone(where, uid)
        if message.whole:
            self._api, self._names, self._listed = {}, {}, True
        for pod in message.pods:
            key, where = (pod.get("metadata") or {}).get("uid"), _where(pod)
            if isinstance(key, str) and key:
                self._api[key], self._names[where] = pod, key
                touched.add(where)
        self._mirrors.observed(None if message.whole else touched)
        if first:
            self._check.update(self._pods)
        for entry in self._pods.values():
            if message.whole or entry.where in touched:
                self._compare(entry)

    def _compare(self, entry: PodEntry) -> None:
        """Take what a newer view of the API pod has of ours as what is written."""
        target = self._target(entry)
        api_pod = None if target is None else self._api.get(target)
        if target is None or api_pod is None or self._context.api.jobs.busy(_key(entry.uid)):
            return  # a call's end compares again
        version = str(api_pod["metadata"].get("resourceVersion", ""))
        if entry.seen_uid == target and not podstatus.newer(version, entry.seen_version):
            return  # this one, or a newer one, is known already
        entry.seen_uid, entry.seen_version = target, version
        status = api_pod.get("status") or {}
        if entry.static_hash is None:
            entry.scheduled = podstatus.has_scheduled(status)
        wanted = self._wanted(entry)
        if podstatus.status_covers(status, wanted):
            entry.written, entry.written_uid = wanted, target
        else:
            entry.written = None
            self._check.add(entry.uid)

    # --- pod status -------------------------------------------------------------------

    def _target(self, entry: PodEntry) -> str | None:
        """The UID of the API pod that carries this pod's status (None: none now)."""
        if entry.static_hash is not None:
            return self._mirrors.target(entry)
        return None if entry.skipped else entry.uid

    def _wanted(self, entry: PodEntry) -> Obj:
        scheduled = entry.scheduled
        if entry.static_hash is not None:
            scheduled = self._mirrors.has_scheduled(entry)
        return podstatus.owned(entry.status, with_scheduled=not scheduled)

    def _dirty(self, entry: PodEntry) -> bool:
        """The API pod lacks some of the status ours says (as far as we know)."""
        target = self._target(entry)
        if target is None:
            return False
        wanted = self._wanted(entry)
        if not wanted or wanted == entry.refused:
            return False  # a patch of the UID alone, or one refused as it is
        if entry.written is None or entry.written_uid != target:
            return True
        return not podstatus.status_covers(entry.written, wanted)

    def _sync_status(self, entry: PodEntry, now: float) -> bool:
        """Write the pod's status if it is due; True to look again at the next tick."""
        key = _key(entry.uid)
        if self._context.api.jobs.busy(key):
            return False  # looked at again when the call ends
        if not self._dirty(entry):
            if entry.forgotten:
                del self._pods[entry.uid]
            return False
        if not self._listed or not self._context.due(entry.retry, now):
            return True
        target, wanted = self._target(entry), self._wanted(entry)
        assert target is not None  # dirty
        body = podstatus.patch(target, wanted, podstatus.condition_order(entry.status))
        calls, (namespace, name) = self._context.api.calls, entry.where
        self._context.api.jobs.submit(
            key,
            lambda: calls.patch_pod_status(namespace, name, body),
            lambda outcome: self._status_written(entry.uid, target, wanted, outcome),
        )
        return False

    def _status_written(self, uid: str, target: str, wanted: Obj, outcome: Obj | Exception) -> None:
        entry = self._pods.get(uid)
        if entry is None:
            return
        self._check.add(uid)
        if isinstance(outcome, Exception):
            self._status_failed(entry, target, wanted, outcome)
            self._compare(entry)
            return
        self._context.ok()
        entry.retry.succeeded()
        entry.written, entry.written_uid, entry.refused = wanted, target, None
        status = outcome.get("status") or {}
        version = (outcome.get("metadata") or {}).get("resourceVersion")
        if version:
            entry.seen_uid, entry.seen_version = target, str(version)
        if entry.static_hash is None:
            entry.scheduled = podstatus.has_scheduled(status)
        else:
            self._mirrors.status_written(entry, target, status)
        self._compare(entry)  # a newer view that came meanwhile

    def _status_failed(self, entry: PodEntry, target: str, wanted: Obj, exc: Exception) -> None:
        code = kubeapi.status_of(exc)
        if entry.static_hash is not None and code in (GONE, CONFLICT):
            self._mirrors.lost(entry)  # deleted or replaced: look again
            return
        if code == CONFLICT:
            if not entry.skipped:
                log.warning(
                    "pod recreated under its name; status not written pod=%s/%s uid=%s",
                    entry.namespace,
                    entry.name,
                    entry.uid,
                )
            entry.skipped = True
            return
        if code != GONE:
            self._context.failed("patch pod status", exc)
        if transient(exc):
            self._context.retry_later(entry.retry)
        elif code == GONE:  # nothing to write to
            entry.written, entry.written_uid = wanted, target
        else:  # refused as it is: not again until it changes
            entry.refused = wanted

    # --- final deletes ------------------------------------------------------------------

    def _sync_delete(self, final: FinalDelete, now: float) -> None:
        key = _key(final.uid)
        if self._context.api.jobs.busy(key):
            return
        entry = self._pods.get(final.uid)
        if entry is not None and self._dirty(entry):
            return  # its last status goes first, as in the kubelet's syncPod
        if not self._context.due(final.retry, now):
            return
        calls, namespace, name, uid = (
            self._context.api.calls,
            final.namespace,
            final.name,
            final.uid,
        )
        self._context.api.jobs.submit(
            key,
            lambda: calls.delete_pod(namespace, name, uid),
            lambda outcome: self._deleted(uid, outcome),
        )

    def _deleted(self, uid: str, outcome: object) -> None:
        final = self._deletes.get(uid)
        if final is None:
            return
        if not isinstance(outcome, Exception):
            self._context.ok()
        elif kubeapi.status_of(outcome) not in (GONE, CONFLICT):
            self._context.failed("delete pod", outcome)
            self._context.retry_later(final.retry)
            return
        del self._deletes[uid]
        log.info("deleted pod pod=%s/%s uid=%s", final.namespace, final.name, uid)
        self._bus.send(PodDeleted(PodUID(uid)))


def _uid_of(pod: Any) -> Any:
    return (pod.get("metadata") or {}).get("uid") if isinstance(pod, dict) else None


def _where(pod: Obj) -> Where:
    meta = pod.get("metadata") or {}
    return str(meta.get("namespace") or "default"), str(meta.get("name", ""))


def _key(uid: str) -> tuple[str, str]:
    return ("pod", uid)


def event_rate(options: Options) -> tuple[int, int]:
    """The events client's token bucket: ``eventRecordQPS`` 0 means no limit."""
    qps = options.event_qps if options.event_qps > 0 else UNLIMITED_QPS
    return qps, max(1, options.event_burst)


def main(settings: WorkerSettings, kubeconfig: str, node_name: str, options: Options) -> int:
    timeout = options.request_timeout
    pods = kubeapi.connect(kubeconfig, options.kube_api_qps, options.kube_api_burst)
    events = kubeapi.connect(kubeconfig, *event_rate(options))
    api = ApiAccess(
        ClientCalls(pods, timeout),
        ClientCalls(events, timeout),
        ThreadJobs(options.threads, "status"),
        ThreadJobs(1, "events"),
    )
    bus = WorkerBus(settings.run_dir, settings.name)
    return serve(settings, bus, StatusManager(bus, api, node_name, options))
