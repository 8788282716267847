"""The API pod source: the pods the API server binds to this node, beside file and HTTP.

A reflector (``ipc/apiclient/reflector.py``) lists, then watches, the pods of every namespace
with ``fieldSelector=spec.nodeName=<node>`` through the official client, as the
kubelet's reflector does; each list, event and failure reaches the worker's loop
through an ``Inbox``; its thread never touches the bus.

The loop keeps the set and sends it whole (``PodsListed``, source ``api``) when the
part the parent acts on changed: the metadata less ``resourceVersion`` and
``managedFields``, the spec, the phase once it is terminal, and for a pod with
``readinessGates`` the conditions its gates name (another client's status patch that
turns a gate True makes the parent compute Ready again, as the kubelet's
``HandlePodReconcile`` does). So the echo of the status manager's own writes sends
nothing. Mirror pods (``kubernetes.io/config.mirror``)
are the static pods' reflections and are left out, as the kubelet leaves them out.
A restarted worker relists and sends the set again: nothing is lost or doubled.

Before that, the status manager's side (``ApiPodsObserved``, which the parent hands on):
the API's own view of every pod bound to the node, mirror pods included
(``api_view``: identity, ``resourceVersion``, ``deletionTimestamp``, the mirror
annotation and the status), the whole set after each list, then the pods whose view
changed (less ``resourceVersion``) and the ones deleted. It is how the status manager
sees a status someone else wrote, or a mirror pod someone deleted, without a list of
its own, as the kubelet's status manager reads its pod manager's copies of the watched
pods.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

import kubernetes.client
from pkletd.ipc.apiclient import kubeapi
from pkletd.ipc.apiclient.reflector import Broken, Listed, Reflector, Seen
from pkletd.ipc.apimodel.podenums import TERMINAL_PHASES, PodSource
from pkletd.ipc.apimodel.readiness import gate_conditions
from pkletd.ipc.bus.messages import ApiPodsObserved, Message, PodsListed, Snapshot
from pkletd.ipc.bus.sender import Sender
from pkletd.ipc.bus.sockets import WorkerBus
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

SOURCE = PodSource.API
MIRROR = "kubernetes.io/config.mirror"
VOLATILE = ("resourceVersion", "managedFields")  # metadata that changes with every write
API_METADATA = ("uid", "namespace", "name", "resourceVersion", "deletionTimestamp")


def source_view(pod: dict[str, Any]) -> dict[str, Any]:
    """What the parent acts on of an API pod: no resourceVersion; of the status, the phase
    once terminal and the readiness gates' conditions."""
    meta = {
        k: v
        for k, v in pod.get("metadata", {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    view = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod.get("spec", {})}
    status: dict[str, Any] = {}
    phase = pod.get("status", {}).get("phase")
    if phase in TERMINAL_PHASES:
        status["phase"] = phase
    gates = gate_conditions(pod)
    if gates:
        status["conditions"] = gates
    if status:
        view["status"] = status
    return view


def api_view(pod: dict[str, Any]) -> dict[str, Any]:
    """What the status manager compares of an API pod (``ApiPodsObserved``)."""
    meta = pod.get("metadata") or {}
    kept = {k: meta[k] for k in API_METADATA if meta.get(k) is not None}
    mirror = (meta.get("annotations") or {}).get(MIRROR)
    if mirror is not None:
        kept["annotations"] = {MIRROR: mirror}
    return {"metadata": kept, "status": pod.get("status") or {}}


def _same_view(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """The two views differ in nothing but ``resourceVersion``."""
    if a["status"] != b["status"]:
        return False
    strip = "resourceVersion"
    return {k: v for k, v in a["metadata"].items() if k != strip} == {
        k: v for k, v in b["metadata"].items() if k != strip
    }


def is_mirror(pod: dict[str, Any]) -> bool:
    return MIRROR in (pod.get("metadata", {}).get("annotations") or {})


class ApiWatcher:
    def __init__(self, bus: Sender, reflector: Reflector, inbox: Inbox[Seen]) -> None:
        self._bus = bus
        self._reflector = reflector
        self._inbox = inbox
        self._pods: dict[str, dict[str, Any]] = {}  # uid -> source view
        self._listed = False  # a first list arrived
        self._sent: list[dict[str, Any]] | None = None
        self._problem = ""
        self._views: dict[str, dict[str, Any]] = {}  # uid -> api_view, mirror pods too
        self._told: dict[str, dict[str, Any]] = {}  # uid -> the view last sent
        self._whole = False  # the next ApiPodsObserved carries every view
        self._dirty: set[str] = set()  # uids seen or deleted since then

    # --- the Worker protocol -----------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._sent = None  # the parent may have lost our last set: send it again
        self._whole = True
        self._send()

    def on_broadcast(self, message: Message) -> None:
        pass

    def fds(self) -> Sequence[int]:
        return (self._inbox.fileno(),)

    def on_readable(self, fd: int) -> None:
        for item in self._inbox.take():
            self._apply(item)
        self._send()

    def tick(self, now: float) -> float:
        return now + 60.0

    def close(self) -> None:
        self._reflector.stop()
        self._inbox.close()

    # --- the set -------------------------------------------------------------------

    def _apply(self, item: Seen) -> None:
        if isinstance(item, Broken):
            problem = kubeapi.describe(item.error)
            if problem != self._problem:
                log.warning("pod watch failed error=%s; retrying with back-off", problem)
            self._problem = problem
            return
        if self._problem:
            log.info("pod watch resumed after error=%s", self._problem)
            self._problem = ""
        if isinstance(item, Listed):
            self._listed = self._whole = True
            self._pods, self._views = {}, {}
            for pod in item.items:
                self._upsert(pod)
        elif item.type == "DELETED":
            uid = item.obj.get("metadata", {}).get("uid", "")
            self._pods.pop(uid, None)
            self._views.pop(uid, None)
            self._dirty.add(uid)
        else:
            self._upsert(item.obj)

    def _upsert(self, pod: dict[str, Any]) -> None:
        uid = pod.get("metadata", {}).get("uid", "")
        if not uid:
            return
        self._views[uid] = api_view(pod)
        self._dirty.add(uid)
        if not is_mirror(pod):
            self._pods[uid] = source_view(pod)

    def _send(self) -> None:
        if not self._listed:
            return
        self._send_views()
        pods = sorted(self._pods.values(), key=lambda p: p["metadata"]["uid"])
        if pods != self._sent:
            self._bus.send(PodsListed(SOURCE, pods))
            self._sent = pods

    def _send_views(self) -> None:
        """The API's view for the status manager: the whole set, or what changed."""
        dirty, self._dirty = self._dirty, set()
        if self._whole:
            self._bus.send(ApiPodsObserved(list(self._views.values()), whole=True))
            self._told, self._whole = dict(self._views), False
            return
        changed, gone = [], []
        for uid in dirty:
            view, told = self._views.get(uid), self._told.get(uid)
            if view is None:
                if told is not None:
                    gone.append(uid)
            elif told is None or not _same_view(view, told):
                changed.append(view)
        if changed or gone:
            self._bus.send(ApiPodsObserved(changed, gone))
            for view in changed:
                self._told[view["metadata"]["uid"]] = view
            for uid in gone:
                del self._told[uid]


def main(settings: WorkerSettings, kubeconfig: str, node: str, qps: int, burst: int) -> int:
    client = kubeapi.connect(kubeconfig, qps, burst)
    inbox: Inbox[Seen] = Inbox()
    pods = kubernetes.client.CoreV1Api(client).list_pod_for_all_namespaces
    reflector = Reflector(SOURCE, pods, inbox, f"spec.nodeName={node}")
    bus = WorkerBus(settings.run_dir, settings.name, broadcasts=False)  # needs none
    worker = ApiWatcher(bus, reflector, inbox)
    reflector.start()
    return serve(settings, bus, worker)
