"""What the node-lease worker asks of the API server, as JSON dicts.

``NodeApi`` is the seam (tests pass a fake); ``KubeNodeApi`` is the real one over the
official client's ``ApiClient`` (``pkletd.ipc.apiclient.kubeapi.connect``: credentials and the
token-bucket rate limiter), making raw requests so that objects stay API JSON (no
model round-trip drops a field the server added) and a status patch goes out as a
strategic merge patch. Every failure is an ``ApiCallFailed`` with the HTTP status (0
when no answer came) and a one-line description.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any, Protocol

from pkletd.ipc.apiclient.kubeapi import JSON, LimitedApiClient, describe, status_of

Obj = dict[str, Any]
LEASE_NAMESPACE = "kube-node-lease"
STRATEGIC_MERGE = "application/strategic-merge-patch+json"
NOT_FOUND, CONFLICT = 404, 409


class ApiCallFailed(Exception):
    """An API call that did not succeed; ``status`` is its HTTP status, 0 without one."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


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


class KubeNodeApi:
    def __init__(self, client: LimitedApiClient, timeout: float) -> None:
        self._client = client
        self._timeout = timeout

    def create_node(self, node: Obj) -> Obj:
        return self._request("POST", "/api/v1/nodes", node)

    def get_node(self, name: str, from_cache: bool = False) -> Obj:
        query = [("resourceVersion", "0")] if from_cache else []
        return self._request("GET", f"/api/v1/nodes/{name}", query=query)

    def patch_node_status(self, name: str, patch: Obj) -> Obj:
        return self._request("PATCH", f"/api/v1/nodes/{name}/status", patch, STRATEGIC_MERGE)

    def get_lease(self, name: str) -> Obj:
        return self._request("GET", f"{_leases()}/{name}")

    def create_lease(self, lease: Obj) -> Obj:
        return self._request("POST", _leases(), lease)

    def update_lease(self, lease: Obj) -> Obj:
        return self._request("PUT", f"{_leases()}/{lease['metadata']['name']}", lease)

    def close(self) -> None:
        self._client.close()

    def _request(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        content_type: str = JSON,
        query: Sequence[tuple[str, str]] = (),
    ) -> Obj:
        status, reason, data = self._send(method, path, body, content_type, query)
        if not 200 <= status < 300:
            raise ApiCallFailed(status, f"{method} {path}: {_failure(status, reason, data)}")
        try:
            found = json.loads(data)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise ApiCallFailed(status, f"{method} {path}: the answer is not a JSON object")
        return found

    def _send(
        self,
        method: str,
        path: str,
        body: Obj | None,
        content_type: str,
        query: Sequence[tuple[str, str]],
    ) -> tuple[int, str, bytes]:
        """One request: its status, reason and body."""
        try:
            answer = self._client.send_json(method, path, body, content_type, query, self._timeout)
        except Exception as exc:  # the client raises urllib3's errors and its own
            raise ApiCallFailed(status_of(exc), f"{method} {path}: {describe(exc)}") from exc
        return answer.status, answer.reason, answer.data


def _leases() -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{LEASE_NAMESPACE}/leases"


def _failure(status: int, reason: str, data: bytes) -> str:
    """``HTTP 404 Not Found: nodes "n1" not found`` from the API's Status answer."""
    text = f"HTTP {status} {reason}".strip()
    try:
        message = json.loads(data).get("message", "")
    except (ValueError, AttributeError):
        message = ""
    return f"{text}: {message}" if message else text
