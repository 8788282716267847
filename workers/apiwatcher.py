"""The API pod source: the pods the API server binds to this node, beside file and HTTP.

A thread lists, then watches, the pods of every namespace with
``fieldSelector=spec.nodeName=<node>`` through the official client, as the kubelet's
reflector does: the list's resourceVersion starts the watch, every event and
bookmark moves it on, a dropped or timed-out watch resumes from it (back-off 1 s
doubling to 30 s while the server is unreachable), and ``410 Gone`` (a watch from a
compacted revision) relists. Each list and event reaches the worker's loop through
an ``Inbox``; the thread never touches the bus.

The loop keeps the set and sends it whole (``PodsListed``, source ``api``) when the
part the parent acts on changed: the metadata less ``resourceVersion`` and
``managedFields``, the spec, and the phase once it is terminal. So the echo of the
status manager's own writes sends nothing. Mirror pods (``kubernetes.io/config.mirror``)
are the static pods' reflections and are left out, as the kubelet leaves them out.
A restarted worker relists and sends the set again: nothing is lost or doubled.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import kubernetes.client
from pkletd.ipc import kubeapi
from pkletd.ipc.bus import WorkerBus
from pkletd.ipc.messages import Message, PodsListed, Snapshot
from pkletd.ipc.wakeup import Inbox
from pkletd.workers.lifecycle import WorkerSettings, serve

log = logging.getLogger(__name__)

SOURCE = "api"
MIRROR = "kubernetes.io/config.mirror"
TERMINAL = ("Succeeded", "Failed")
WATCH_TIMEOUT_S = 300  # the server ends a watch after this; client-go picks 5-10 min
READ_SLACK_S = 30  # no byte for this long past the timeout: the connection is dead
RETRY_FIRST_S, RETRY_MAX_S = 1.0, 30.0
EXPIRED = 410
VOLATILE = ("resourceVersion", "managedFields")  # metadata that changes with every write


@dataclass(frozen=True, slots=True)
class Listed:
    """A full list: the set replaces the last one."""

    pods: list[dict[str, Any]]


@dataclass(frozen=True, slots=True)
class Changed:
    """One watch event: ``ADDED``, ``MODIFIED`` or ``DELETED``."""

    type: str
    pod: dict[str, Any]


class Gone(Exception):
    """The watch's resourceVersion was compacted away: relist."""


def source_view(pod: dict[str, Any]) -> dict[str, Any]:
    """What the parent acts on of an API pod (no resourceVersion, status only when ended)."""
    meta = {
        k: v
        for k, v in pod.get("metadata", {}).items()
        if k not in ("resourceVersion", "managedFields")
    }
    view = {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod.get("spec", {})}
    phase = pod.get("status", {}).get("phase")
    if phase in TERMINAL:
        view["status"] = {"phase": phase}
    return view


def is_mirror(pod: dict[str, Any]) -> bool:
    return MIRROR in (pod.get("metadata", {}).get("annotations") or {})


class Reflector:
    """List and watch on a thread of its own; results go to ``inbox``."""

    def __init__(self, core: kubernetes.client.CoreV1Api, node: str, inbox: Inbox[Any]):
        self._core = core
        self._selector = f"spec.nodeName={node}"
        self._inbox = inbox
        self._stopped = threading.Event()

    def start(self) -> None:
        threading.Thread(target=self._run, name="reflector", daemon=True).start()

    def stop(self) -> None:
        self._stopped.set()

    def _run(self) -> None:
        version = ""
        delay = RETRY_FIRST_S
        while not self._stopped.is_set():
            try:
                if not version:
                    version = self._list()
                version = self._watch(version)
                delay = RETRY_FIRST_S
            except Gone:
                log.info("watch expired; relisting resource_version=%s", version)
                version = ""
            except Exception as exc:  # any failure of the connection: resume from version
                log.warning("pod watch failed error=%s retry_s=%.1f", kubeapi.describe(exc), delay)
                self._inbox.put(exc)
                self._stopped.wait(delay)
                delay = min(delay * 2, RETRY_MAX_S)

    def _list(self) -> str:
        response: Any = self._core.list_pod_for_all_namespaces(  # raw: every field kept
            field_selector=self._selector,
            _preload_content=False,
            _request_timeout=kubeapi.REQUEST_TIMEOUT_S,
        )
        body = json.loads(response.data)
        self._inbox.put(Listed(body.get("items") or []))
        return str(body["metadata"]["resourceVersion"])

    def _watch(self, version: str) -> str:
        """Follow changes from ``version`` until the server ends the watch; the last version."""
        response: Any = self._core.list_pod_for_all_namespaces(
            field_selector=self._selector,
            watch=True,
            resource_version=version,
            allow_watch_bookmarks=True,
            timeout_seconds=WATCH_TIMEOUT_S,
            _preload_content=False,
            _request_timeout=(kubeapi.REQUEST_TIMEOUT_S, WATCH_TIMEOUT_S + READ_SLACK_S),
        )
        try:
            for event in _lines(response):
                version = self._on_event(event, version)
                if self._stopped.is_set():
                    break
        finally:
            response.release_conn()
        return version

    def _on_event(self, event: dict[str, Any], version: str) -> str:
        kind, obj = event.get("type"), event.get("object") or {}
        if kind == "ERROR":
            if obj.get("code") == EXPIRED:
                raise Gone()
            raise RuntimeError(f"watch error: {obj.get('message', obj)}")
        if kind in ("ADDED", "MODIFIED", "DELETED"):
            self._inbox.put(Changed(kind, obj))
        return str(obj.get("metadata", {}).get("resourceVersion") or version)


def _lines(response: Any) -> Iterator[dict[str, Any]]:
    """The watch's events, one JSON object per line, as the chunks arrive."""
    pending = b""
    for chunk in response.stream(decode_content=True):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for line in complete:
            if line.strip():
                yield json.loads(line)


class ApiWatcher:
    def __init__(self, bus: WorkerBus, reflector: Reflector, inbox: Inbox[Any]) -> None:
        self._bus = bus
        self._reflector = reflector
        self._inbox = inbox
        self._pods: dict[str, dict[str, Any]] = {}  # uid -> source view
        self._listed = False  # a first list arrived
        self._sent: list[dict[str, Any]] | None = None
        self._problem = ""

    # --- the Worker protocol -----------------------------------------------------

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self._sent = None  # the parent may have lost our last set: send it again
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

    def _apply(self, item: Listed | Changed | Exception) -> None:
        if isinstance(item, Exception):
            self._problem = kubeapi.describe(item)
            return
        if self._problem:
            log.info("pod watch resumed after error=%s", self._problem)
            self._problem = ""
        if isinstance(item, Listed):
            self._listed = True
            self._pods = {}
            for pod in item.pods:
                self._upsert(pod)
        elif item.type == "DELETED":
            self._pods.pop(item.pod.get("metadata", {}).get("uid", ""), None)
        else:
            self._upsert(item.pod)

    def _upsert(self, pod: dict[str, Any]) -> None:
        uid = pod.get("metadata", {}).get("uid", "")
        if uid and not is_mirror(pod):
            self._pods[uid] = source_view(pod)

    def _send(self) -> None:
        if not self._listed:
            return
        pods = sorted(self._pods.values(), key=lambda p: p["metadata"]["uid"])
        if pods != self._sent:
            self._bus.send(PodsListed(SOURCE, pods))
            self._sent = pods


def main(settings: WorkerSettings, kubeconfig: str, node: str, qps: int, burst: int) -> int:
    client = kubeapi.connect(kubeconfig, qps, burst)
    inbox: Inbox[Any] = Inbox()
    reflector = Reflector(kubernetes.client.CoreV1Api(client), node, inbox)
    bus = WorkerBus(settings.run_dir, settings.name)
    worker = ApiWatcher(bus, reflector, inbox)
    reflector.start()
    return serve(settings, bus, worker)
