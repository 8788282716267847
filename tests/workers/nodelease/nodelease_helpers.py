"""Fakes for the node-lease worker: the API in memory, the CRI calls.

``FakeNodeApi`` keeps Nodes and Leases as the API
server would (uids, resourceVersions, 404/409, strategic merge of status patches, by
the test API server's own merge code), records every call, and fails the next call of
a method on request.
"""

from __future__ import annotations

import copy
import itertools
from collections.abc import Sequence
from typing import Any

from pkletd.ipc.apiclient.jsonapi import ApiCallFailed
from pkletd.ipc.runtime.cri import CriError, ListedImage, RuntimeCondition

from tests.harness.apiserver.strategic import strategic_merge

Obj = dict[str, Any]
T0 = 1_700_000_000.0
NODE = "node-a"
READY_CONDITIONS = (
    RuntimeCondition("RuntimeReady", True),
    RuntimeCondition("NetworkReady", True),
)
CNI_DOWN = RuntimeCondition(
    "NetworkReady",
    False,
    "NetworkPluginNotReady",
    "Network plugin returns error: cni plugin not initialized",
)


class FakeRuntime:
    """``RuntimeReader``: what CRI Status and ListImages answer."""

    def __init__(self) -> None:
        self.conditions: Sequence[RuntimeCondition] = READY_CONDITIONS
        self.images: list[ListedImage] = [
            ListedImage("sha256:p", ("registry.k8s.io/pause:3.9",), ("pause@sha256:1",), 300_000),
            ListedImage("sha256:n", ("nginx:1.25",), ("nginx@sha256:2",), 70_000_000),
        ]
        self.down = False  # Status fails

    def runtime_conditions(self) -> list[RuntimeCondition]:
        if self.down:
            raise CriError("Status", "runtime", "UNAVAILABLE", "connection refused")
        return list(self.conditions)

    def list_images(self) -> list[ListedImage]:
        if self.down:
            raise CriError("ListImages", "images", "UNAVAILABLE", "connection refused")
        return list(self.images)


class FakeNodeApi:
    def __init__(self) -> None:
        self.nodes: dict[str, Obj] = {}
        self.leases: dict[str, Obj] = {}
        self.calls: list[str] = []
        self.failures: dict[str, list[ApiCallFailed]] = {}
        self._revision = itertools.count(100)
        self._uids = itertools.count(1)
        self.closed = False

    def fail(self, method: str, status: int, times: int = 1) -> None:
        self.failures.setdefault(method, []).extend(
            ApiCallFailed(status, f"{method}: HTTP {status}") for _ in range(times)
        )

    def count(self, method: str) -> int:
        return self.calls.count(method)

    def _enter(self, method: str) -> None:
        self.calls.append(method)
        queued = self.failures.get(method)
        if queued:
            raise queued.pop(0)

    def _stamp(self, obj: Obj, new: bool) -> Obj:
        meta = obj.setdefault("metadata", {})
        if new:
            meta["uid"] = f"uid-{next(self._uids)}"
        meta["resourceVersion"] = str(next(self._revision))
        return copy.deepcopy(obj)

    # --- nodes

    def create_node(self, node: Obj) -> Obj:
        self._enter("create_node")
        name = node["metadata"]["name"]
        if name in self.nodes:
            raise ApiCallFailed(409, f'nodes "{name}" already exists')
        self.nodes[name] = copy.deepcopy(node)
        return self._stamp(self.nodes[name], new=True)

    def get_node(self, name: str, from_cache: bool = False) -> Obj:
        self._enter("get_node")
        if name not in self.nodes:
            raise ApiCallFailed(404, f'nodes "{name}" not found')
        return copy.deepcopy(self.nodes[name])

    def patch_node_status(self, name: str, patch: Obj) -> Obj:
        self._enter("patch_node_status")
        if name not in self.nodes:
            raise ApiCallFailed(404, f'nodes "{name}" not found')
        self.last_patch = copy.deepcopy(patch)
        merged = strategic_merge(self.nodes[name], patch, "V1Node")
        merged["spec"] = self.nodes[name].get("spec", {})  # the status subresource keeps spec
        self.nodes[name] = merged
        return self._stamp(merged, new=False)

    # --- leases

    def get_lease(self, name: str) -> Obj:
        self._enter("get_lease")
        if name not in self.leases:
            raise ApiCallFailed(404, f'leases "{name}" not found')
        return copy.deepcopy(self.leases[name])

    def create_lease(self, lease: Obj) -> Obj:
        self._enter("create_lease")
        name = lease["metadata"]["name"]
        if name in self.leases:
            raise ApiCallFailed(409, f'leases "{name}" already exists')
        self.leases[name] = copy.deepcopy(lease)
        return self._stamp(self.leases[name], new=True)

    def update_lease(self, lease: Obj) -> Obj:
        self._enter("update_lease")
        name = lease["metadata"]["name"]
        stored = self.leases.get(name)
        if stored is None:
            raise ApiCallFailed(404, f'leases "{name}" not found')
        if lease["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
            raise ApiCallFailed(409, "the object has been modified")
        self.leases[name] = copy.deepcopy(lease)
        return self._stamp(self.leases[name], new=False)

    def close(self) -> None:
        self.closed = True


def template(name: str = NODE) -> Obj:
    """A Node as the parent composes it (``facts.compose_node``'s shape)."""
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "beta.kubernetes.io/os": "linux",
                "beta.kubernetes.io/arch": "amd64",
                "tier": "edge",
            },
            "annotations": {"volumes.kubernetes.io/controller-managed-attach-detach": "true"},
        },
        "spec": {"taints": [{"key": "dedicated", "value": "gpu", "effect": "NoSchedule"}]},
        "status": {
            "capacity": {
                "cpu": "2",
                "memory": "16318500Ki",
                "pods": "110",
                "ephemeral-storage": "100Gi",
                "hugepages-2Mi": "0",
            },
            "allocatable": {
                "cpu": "2",
                "memory": "16216100Ki",
                "pods": "110",
                "ephemeral-storage": "96636764k",
                "hugepages-2Mi": "0",
            },
            "addresses": [
                {"type": "InternalIP", "address": "10.0.0.7"},
                {"type": "Hostname", "address": name},
            ],
            "nodeInfo": {
                "machineID": "m1",
                "systemUUID": "s1",
                "bootID": "b1",
                "kernelVersion": "6.1.0",
                "osImage": "Debian GNU/Linux 12 (bookworm)",
                "containerRuntimeVersion": "containerd://1.6.20",
                "kubeletVersion": "v1.32.0-pkletd",
                "kubeProxyVersion": "",
                "operatingSystem": "linux",
                "architecture": "amd64",
            },
            "daemonEndpoints": {"kubeletEndpoint": {"Port": 10250}},
        },
    }


def conditions_of(node: Obj) -> dict[str, Obj]:
    return {c["type"]: c for c in node["status"]["conditions"]}
