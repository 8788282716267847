"""A tiny default-scheduler (off unless ``ApiServerConfig.scheduler``): binds pending pods.

Every ``interval`` it takes pods with no ``nodeName``, ``schedulerName: default-scheduler``,
no scheduling gates and no deletionTimestamp, and binds each through ``pods/binding`` (the
same path the real scheduler uses) to the first node that is Ready, schedulable, matches the
pod's ``nodeSelector`` and whose NoSchedule/NoExecute taints it tolerates. It records the
``Scheduled`` event the real scheduler writes. No resources, affinity or spreading.
"""

from __future__ import annotations

import datetime as dt
import logging
import threading
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.admission import random_suffix
from tests.harness.apiserver.auth import UserInfo
from tests.harness.apiserver.calls import Call, Query
from tests.harness.apiserver.kinds.nodes import is_ready
from tests.harness.apiserver.resources import ResourceTable
from tests.harness.apiserver.rest import Registry

log = logging.getLogger(__name__)
Obj = dict[str, Any]
SCHEDULER = UserInfo("system:kube-scheduler", ("system:authenticated",))


def tolerates(pod: Obj, taint: Obj) -> bool:
    for toleration in (pod.get("spec") or {}).get("tolerations") or []:
        if toleration.get("effect") not in (None, "", taint.get("effect")):
            continue
        if toleration.get("operator") == "Exists":
            if not toleration.get("key") or toleration["key"] == taint.get("key"):
                return True
        elif toleration.get("key") == taint.get("key") and toleration.get("value", "") == taint.get(
            "value", ""
        ):
            return True
    return False


def fits(pod: Obj, node: Obj) -> bool:
    spec, node_spec = pod.get("spec") or {}, node.get("spec") or {}
    if node_spec.get("unschedulable") or not is_ready(node):
        return False
    labels = node["metadata"].get("labels") or {}
    if any(labels.get(k) != v for k, v in (spec.get("nodeSelector") or {}).items()):
        return False
    return all(
        tolerates(pod, t)
        for t in node_spec.get("taints") or []
        if t.get("effect") in ("NoSchedule", "NoExecute")
    )


class Scheduler:
    def __init__(self, registry: Registry, table: ResourceTable, interval: float = 0.1) -> None:
        self.registry = registry
        self.table = table
        self.interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        if self._thread is not None:
            return
        self._stop.clear()
        self._thread = threading.Thread(target=self._run, name="scheduler", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                self.schedule_once()
            except Exception:  # the scheduler thread's top level
                log.exception("scheduling pass failed")

    def schedule_once(self) -> int:
        """Bind what can be bound now; how many pods were bound."""
        store = self.registry.store
        nodes = store.items("nodes")
        bound = 0
        for pod in store.items("pods"):
            spec, meta = pod.get("spec") or {}, pod["metadata"]
            if (
                spec.get("nodeName")
                or meta.get("deletionTimestamp")
                or spec.get("schedulingGates")
                or spec.get("schedulerName") != "default-scheduler"
            ):
                continue
            node = next((n for n in nodes if fits(pod, n)), None)
            if node is not None and self._bind(pod, node["metadata"]["name"]):
                bound += 1
        return bound

    def _bind(self, pod: Obj, node: str) -> bool:
        meta = pod["metadata"]
        pods = self.table.find("", "v1", "pods")
        assert pods is not None
        call = Call(pods, meta["namespace"], meta["name"], SCHEDULER, Query(), "binding")
        binding = {
            "metadata": {"name": meta["name"], "uid": meta["uid"]},
            "target": {"kind": "Node", "name": node},
        }
        try:
            self.registry.bind(call, binding)
        except errors.ApiError as exc:
            log.debug("binding %s/%s failed: %s", meta["namespace"], meta["name"], exc)
            return False
        self._record_event(pod, node)
        return True

    def _record_event(self, pod: Obj, node: str) -> None:
        meta = pod["metadata"]
        events = self.table.find("", "v1", "events")
        assert events is not None
        now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")
        event = {
            "metadata": {
                "name": f"{meta['name']}.{random_suffix(16)}",
                "namespace": meta["namespace"],
            },
            "involvedObject": {
                "kind": "Pod",
                "namespace": meta["namespace"],
                "name": meta["name"],
                "uid": meta["uid"],
                "apiVersion": "v1",
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "reason": "Scheduled",
            "type": "Normal",
            "action": "Binding",
            "message": f"Successfully assigned {meta['namespace']}/{meta['name']} to {node}",
            "eventTime": now,
            "reportingComponent": "default-scheduler",
            "reportingInstance": "default-scheduler-pkletd-test",
            "source": {},
        }
        try:
            self.registry.create(Call(events, meta["namespace"], "", SCHEDULER, Query()), event)
        except errors.ApiError as exc:
            log.debug("recording the Scheduled event failed: %s", exc)
