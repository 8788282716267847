"""What the node-lease worker asks of the API server, as JSON dicts.

``NodeApi`` is the seam (tests pass a fake); ``KubeNodeApi`` is the real one, raw JSON
requests (``pkletd.ipc.apiclient.jsonapi``) over the official client's ``ApiClient``
(``pkletd.ipc.apiclient.kubeapi.connect``: credentials and the token-bucket rate
limiter); a status patch goes out as a strategic merge patch. Every failure is an
``ApiCallFailed`` with the HTTP status (0 when no answer came) and a one-line
description.
"""

from __future__ import annotations

from typing import Protocol

from pkletd.ipc.apiclient.jsonapi import JsonApi, Obj

LEASE_NAMESPACE = "kube-node-lease"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"


class NodeApi(Protocol):
    def create_node(self, node: Obj) -> Obj: ...

    def get_node(self, name: str, from_cache: bool = False) -> Obj:
        """The Node; ``from_cache``: the API server's cache may answer (resourceVersion=0)."""
        ...

    def patch_node_status(self, name: str, patch: Obj) -> Obj: ...

    def get_lease(self, name: str) -> Obj: ...

    def create_lease(self, lease: Obj) -> Obj: ...

    def update_lease(self, lease: Obj) -> Obj: ...

    def close(self) -> None: ...


class KubeNodeApi(JsonApi):
    def create_node(self, node: Obj) -> Obj:
        return self.request("POST", "/api/v1/nodes", node)

    def get_node(self, name: str, from_cache: bool = False) -> Obj:
        query = [("resourceVersion", "0")] if from_cache else []
        return self.request("GET", f"/api/v1/nodes/{name}", query=query)

    def patch_node_status(self, name: str, patch: Obj) -> Obj:
        return self.request("PATCH", f"/api/v1/nodes/{name}/status", patch, STRATEGIC_MERGE)

    def get_lease(self, name: str) -> Obj:
        return self.request("GET", f"{_leases()}/{name}")

    def create_lease(self, lease: Obj) -> Obj:
        return self.request("POST", _leases(), lease)

    def update_lease(self, lease: Obj) -> Obj:
        return self.request("PUT", f"{_leases()}/{lease['metadata']['name']}", lease)


def _leases() -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"
