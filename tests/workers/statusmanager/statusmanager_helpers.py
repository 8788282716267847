"""Builders shared by the status manager's tests: pods as the parent reports them, events,
a bus that records what the worker sends, and a rig that steps the worker on a fake
clock with its calls run inline and the API's pods watched as the api-watcher watches
them."""

from __future__ import annotations

import copy
from typing import Any

from pkletd.ipc.apiclient.jobs import InlineJobs
from pkletd.ipc.bus.messages import ApiPodsObserved
from pkletd.ipc.bus.sender import FakeSender
from pkletd.ipc.clock import FakeClock
from pkletd.workers.apiwatcher import api_view
from pkletd.workers.statusmanager import Options, StatusManager
from pkletd.workers.statusmanager.context import ApiAccess
from pkletd.workers.statusmanager.fakecalls import FakeCalls

NODE = "node-a"
T0 = 1_800_000_000.0
STAMP = "2026-01-01T00:00:00Z"

Obj = dict[str, Any]


def condition(kind: str, ok: bool = True, when: str = STAMP) -> Obj:
    return {
        "type": kind,
        "status": "True" if ok else "False",
        "lastProbeTime": None,
        "lastTransitionTime": when,
    }


def status(phase: str = "Running", ready: bool = True, ip: str = "10.88.0.5") -> Obj:
    """A status as the parent computes it (supervisor/pods/podstatus.py)."""
    return {
        "phase": phase,
        "conditions": [
            condition("PodReadyToStartContainers"),
            condition("Initialized"),
            condition("Ready", ready),
            condition("ContainersReady", ready),
            condition("PodScheduled"),
        ],
        "hostIP": "192.0.2.10",
        "hostIPs": [{"ip": "192.0.2.10"}],
        "podIP": ip,
        "podIPs": [{"ip": ip}],
        "startTime": STAMP,
        "qosClass": "BestEffort",
        "containerStatuses": [
            {
                "name": "app",
                "ready": ready,
                "restartCount": 0,
                "image": "busybox:1.36",
                "imageID": "sha256:feed",
                "containerID": "containerd://abc",
                "started": True,
                "state": {"running": {"startedAt": STAMP}},
                "lastState": {},
            }
        ],
    }


def api_pod(name: str = "web", uid: str = "", namespace: str = "default") -> Obj:
    """A pod as the parent reports it: the API pod with the status the parent computed."""
    meta: Obj = {"name": name, "namespace": namespace}
    if uid:
        meta["uid"] = uid
    spec = {"nodeName": NODE, "containers": [{"name": "app", "image": "busybox:1.36"}]}
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


def scheduled(pod: Obj, when: str = "2025-06-01T12:00:00Z") -> Obj:
    """``pod`` as the scheduler leaves it: Pending, with its PodScheduled condition."""
    return {
        **pod,
        "status": {"phase": "Pending", "conditions": [condition("PodScheduled", when=when)]},
    }


def reported(pod: Obj, **status_args: Any) -> Obj:
    """``pod`` (as the API has it) with the status the parent computed."""
    return {**pod, "status": status(**status_args)}


def static_pod(name: str = "etcd", content_hash: str = "hash-1", source: str = "file") -> Obj:
    """A static pod as the file source gives it (ipc/apimodel/manifests.py), with its status."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": f"{name}-{NODE}",
            "namespace": "kube-system",
            "uid": content_hash,
            "labels": {"component": name},
            "annotations": {
                "kubernetes.io/config.source": source,
                "kubernetes.io/config.hash": content_hash,
            },
        },
        "spec": {
            "nodeName": NODE,
            "containers": [
                {"name": name, "image": "busybox:1.36", "resources": {"requests": {"cpu": 1}}}
            ],
        },
        "status": status(),
    }


def event(
    reason: str = "Started",
    message: str = "Started container app",
    when: float = T0,
    kind: str = "Normal",
    name: str = "web",
    uid: str = "pod-uid",
) -> Obj:
    """An ``EventRecorded`` body as the parent's recorder makes it."""
    return {
        "type": kind,
        "reason": reason,
        "message": message,
        "time": when,
        "involvedObject": {
            "kind": "Pod",
            "namespace": "default",
            "name": name,
            "uid": uid,
            "apiVersion": "v1",
            "fieldPath": "spec.containers{app}",
        },
    }


class Rig:
    """A status manager on FakeCalls, its calls run inline, stepped on a fake clock.
    ``settle`` hands it what the api-watcher's watch would (``watch``) unless ``watched``
    is False."""

    def __init__(
        self, calls: FakeCalls | None = None, watched: bool = True, **options: Any
    ) -> None:
        self.calls = calls or FakeCalls()
        self.bus = FakeSender()
        self.clock = FakeClock(mono=1000.0, wall=T0 + 1000.0)
        self.jobs, self.event_jobs = InlineJobs(), InlineJobs()
        settings = Options(50, 100, 50, 100, **options)
        api = ApiAccess(self.calls, self.calls, self.jobs, self.event_jobs)
        self.worker = StatusManager(self.bus, api, NODE, settings, self.clock)
        self.next_due = self.clock.mono
        self.watched = watched
        self._told: dict[str, Obj] | None = None  # uid -> the view last handed over

    def views(self) -> list[Obj]:
        """The api-watcher's views of the pods bound to the node; a pod a test changed by
        hand gets a new resourceVersion, as any write does."""
        found = []
        for pod in self.calls.pods.values():
            if pod.get("spec", {}).get("nodeName") != NODE:
                continue
            view = copy.deepcopy(api_view(pod))  # as the JSON of a watch event: not shared
            told = (self._told or {}).get(pod["metadata"]["uid"])
            if told is not None and told != view:
                if told["metadata"].get("resourceVersion") == pod["metadata"]["resourceVersion"]:
                    self.calls.bump(pod)
                    view = copy.deepcopy(api_view(pod))
            found.append(view)
        return found

    def watch(self) -> None:
        """Hand the worker what the watch shows: the whole set first, then changes."""
        views = {v["metadata"]["uid"]: v for v in self.views()}
        if self._told is None:
            self.worker.on_broadcast(ApiPodsObserved(list(views.values()), whole=True))
        else:
            told = self._told
            changed = [v for uid, v in views.items() if told.get(uid) != v]
            gone = [uid for uid in told if uid not in views]
            if changed or gone:
                self.worker.on_broadcast(ApiPodsObserved(changed, gone))
        self._told = views

    def settle(self) -> None:
        """Tick and hand back outcomes until the worker starts nothing more."""
        for _ in range(100):
            if self.watched:
                self.watch()
            self.next_due = self.worker.tick(self.clock.mono)
            if not self.jobs.pending() and not self.event_jobs.pending():
                return
            self.worker.on_readable(self.jobs.fileno())
        raise AssertionError("the worker does not settle")

    def advance(self, seconds: float) -> None:
        self.clock.step(seconds)
        self.settle()

    def close(self) -> None:
        self.worker.close()
