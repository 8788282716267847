"""``FakeCalls``: the status manager's API in memory, for unit tests.

Pods and Events by namespace/name, each write of a pod giving it a new
``resourceVersion`` (``bump``: one more, for a test's own change); every call recorded
as ``(verb, "namespace/name")``;
``fail(verb, error)`` makes every later call of that verb (``"*"``: of all) raise
``error()`` until ``fail(verb, None)``. A status patch checks the UID precondition
(409) and merges conditions as the API's strategic merge does: by type, field by field
(``null`` removes a field, the rest of the old condition stays), then in the order of
``$setElementOrder/conditions`` (conditions it does not name after). Reading a pod that
does not exist or is bound to another node is 403, as the Node authorizer answers the
node's credentials.
"""

from __future__ import annotations

import copy
import threading
from collections.abc import Callable
from typing import Any

from kubernetes.client.exceptions import ApiException
from pkletd.workers.statusmanager.calls import KubeCalls
from pkletd.workers.statusmanager.podstatus import ORDER

Obj = dict[str, Any]


class FakeCalls(KubeCalls):  # declared, so the type checker proves it fits
    def __init__(self) -> None:
        self.pods: dict[tuple[str, str], Obj] = {}
        self.events: dict[tuple[str, str], Obj] = {}
        self.node: Obj = {"metadata": {"name": "node-a", "uid": "node-uid"}}
        self.calls: list[tuple[str, str]] = []
        self.failing: dict[str, Callable[[], BaseException]] = {}
        self._next_uid = 0
        self._version = 0
        self._lock = threading.Lock()

    def fail(self, verb: str, error: Callable[[], BaseException] | None) -> None:
        if error is None:
            self.failing.pop(verb, None)
        else:
            self.failing[verb] = error

    def count(self, verb: str) -> int:
        return sum(1 for v, _ in self.calls if v == verb)

    def _call(self, verb: str, where: str) -> None:
        with self._lock:
            self.calls.append((verb, where))
        error = self.failing.get(verb) or self.failing.get("*")
        if error is not None:
            raise error()

    def _uid(self) -> str:
        self._next_uid += 1
        return f"api-uid-{self._next_uid}"

    def bump(self, pod: Obj) -> None:
        """``pod`` was written: a new resourceVersion."""
        self._version += 1
        pod["metadata"]["resourceVersion"] = str(self._version)

    def add_pod(self, pod: Obj) -> Obj:
        """A pod as the API would hold it (a UID given when it has none)."""
        pod = copy.deepcopy(pod)
        meta = pod.setdefault("metadata", {})
        meta.setdefault("uid", self._uid())
        meta.setdefault("namespace", "default")
        self.bump(pod)
        self.pods[(meta["namespace"], meta["name"])] = pod
        return pod

    def read_pod(self, namespace: str, name: str) -> Obj:
        self._call("read", f"{namespace}/{name}")
        pod = self.pods.get((namespace, name))
        if pod is None or pod.get("spec", {}).get("nodeName") != self.node["metadata"]["name"]:
            raise ApiException(status=403, reason="Forbidden")
        return copy.deepcopy(pod)

    def create_pod(self, namespace: str, pod: Obj) -> Obj:
        self._call("create", f"{namespace}/{pod['metadata']['name']}")
        if (namespace, pod["metadata"]["name"]) in self.pods:
            raise ApiException(status=409, reason="Conflict")
        pod = copy.deepcopy(pod)
        pod["metadata"]["uid"] = self._uid()
        pod["metadata"]["namespace"] = namespace
        self.bump(pod)
        self.pods[(namespace, pod["metadata"]["name"])] = pod
        return copy.deepcopy(pod)

    def patch_pod_status(self, namespace: str, name: str, patch: Obj) -> Obj:
        self._call("patch", f"{namespace}/{name}")
        pod = self._pod(namespace, name)
        if patch["metadata"]["uid"] != pod["metadata"]["uid"]:
            raise ApiException(status=409, reason="Conflict")
        status = pod.setdefault("status", {})
        for key, value in patch["status"].items():
            if key == ORDER:
                continue
            if key == "conditions":
                status["conditions"] = _merged(status.get("conditions", []), value)
            elif isinstance(value, list):
                status[key] = [v for v in value if "$patch" not in v]
            else:
                status[key] = value
        order = [c.get("type") for c in patch["status"].get(ORDER) or []]
        if order:
            status["conditions"] = _ordered(status.get("conditions", []), order)
        self.bump(pod)
        return copy.deepcopy(pod)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        self._call("delete", f"{namespace}/{name}")
        pod = self._pod(namespace, name)
        if pod["metadata"]["uid"] != uid:
            raise ApiException(status=409, reason="Conflict")
        del self.pods[(namespace, name)]

    def read_node(self, name: str) -> Obj:
        self._call("read-node", name)
        return copy.deepcopy(self.node)

    def create_event(self, namespace: str, event: Obj) -> Obj:
        self._call("create-event", f"{namespace}/{event['metadata']['name']}")
        event = copy.deepcopy(event)
        event["metadata"]["resourceVersion"] = "1"
        self.events[(namespace, event["metadata"]["name"])] = event
        return copy.deepcopy(event)

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        self._call("patch-event", f"{namespace}/{name}")
        event = self.events.get((namespace, name))
        if event is None:
            raise ApiException(status=404, reason="Not Found")
        event.update(copy.deepcopy(patch))
        return copy.deepcopy(event)

    def close(self) -> None:
        pass

    def _pod(self, namespace: str, name: str) -> Obj:
        pod = self.pods.get((namespace, name))
        if pod is None:
            raise ApiException(status=404, reason="Not Found")
        return pod


def _merged(old: list[Obj], patch: list[Obj]) -> list[Obj]:
    merged = [dict(c) for c in old]
    for item in patch:
        if "$patch" in item:
            continue
        found = next((c for c in merged if c.get("type") == item.get("type")), None)
        if found is None:
            found = {}
            merged.append(found)
        for field, value in item.items():
            if value is None:
                found.pop(field, None)
            else:
                found[field] = value
    return merged


def _ordered(conditions: list[Obj], order: list[Any]) -> list[Obj]:
    named = sorted(
        (c for c in conditions if c.get("type") in order), key=lambda c: order.index(c["type"])
    )
    return named + [c for c in conditions if c.get("type") not in order]
