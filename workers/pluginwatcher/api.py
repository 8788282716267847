"""What the plugin watcher asks of the API server: the node's Node and its CSINode, as
JSON dicts.

``CsiNodeApi`` is the seam (``fakes.FakeCsiNodeApi`` for tests); ``KubeCsiNodeApi`` is the
real one over the official client's rate-limited ``ApiClient``, making raw requests so the
objects stay API JSON (no model round-trip drops a field). A Node change goes out as a JSON
merge patch carrying the resourceVersion it was computed from, a CSINode change as a PUT:
either way a concurrent writer makes it fail with 409, never lose a change. Every failure
is an ``ApiCallFailed`` with the HTTP status (0 when no answer came).
"""

from __future__ import annotations

import json
from typing import Any, Protocol

from pkletd.ipc.apiclient.kubeapi import JSON, LimitedApiClient, describe, status_of

Obj = dict[str, Any]
MERGE_PATCH = "application/merge-patch+json"
CSINODES = "/apis/storage.k8s.io/v1/csinodes"
NOT_FOUND, CONFLICT = 404, 409


class ApiCallFailed(Exception):
    """An API call that did not succeed; ``status`` is its HTTP status, 0 without one."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class CsiNodeApi(Protocol):
    def get_node(self, name: str) -> Obj: ...

    def patch_node(self, name: str, patch: Obj) -> Obj: ...

    def get_csinode(self, name: str) -> Obj: ...

    def create_csinode(self, csinode: Obj) -> Obj: ...

    def update_csinode(self, csinode: Obj) -> Obj: ...

    def close(self) -> None: ...


class KubeCsiNodeApi:
    def __init__(self, client: LimitedApiClient, timeout: float) -> None:
        self._client = client
        self._timeout = timeout

    def get_node(self, name: str) -> Obj:
        return self._request("GET", f"/api/v1/nodes/{name}")

    def patch_node(self, name: str, patch: Obj) -> Obj:
        return self._request("PATCH", f"/api/v1/nodes/{name}", patch, MERGE_PATCH)

    def get_csinode(self, name: str) -> Obj:
        return self._request("GET", f"{CSINODES}/{name}")

    def create_csinode(self, csinode: Obj) -> Obj:
        return self._request("POST", CSINODES, csinode)

    def update_csinode(self, csinode: Obj) -> Obj:
        return self._request("PUT", f"{CSINODES}/{csinode['metadata']['name']}", csinode)

    def close(self) -> None:
        self._client.close()

    def _request(
        self, method: str, path: str, body: Obj | None = None, content_type: str = JSON
    ) -> Obj:
        try:
            answer = self._client.send_json(method, path, body, content_type, (), self._timeout)
        except Exception as exc:  # the client raises urllib3's errors and its own
            raise ApiCallFailed(status_of(exc), f"{method} {path}: {describe(exc)}") from exc
        if not 200 <= answer.status < 300:
            failure = _failure(answer.status, answer.reason, answer.data)
            raise ApiCallFailed(answer.status, f"{method} {path}: {failure}")
        try:
            found = json.loads(answer.data)
        except ValueError:
            found = None
        if not isinstance(found, dict):
            raise ApiCallFailed(answer.status, f"{method} {path}: the answer is not a JSON object")
        return found


def _failure(status: int, reason: str, data: bytes) -> str:
    """``HTTP 404 Not Found: csinodes "n1" not found`` from the API's Status answer."""
    text = f"HTTP {status} {reason}".strip()
    try:
        message = json.loads(data).get("message", "")
    except (ValueError, AttributeError):
        message = ""
    return f"{text}: {message}" if message else text
