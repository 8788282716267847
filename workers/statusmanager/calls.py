"""The API calls the status manager makes: a seam (``KubeCalls``) and the real one on the
official client (``ClientCalls``); ``fakecalls.FakeCalls`` is the fake.

Every call takes and returns plain JSON dicts, as the API serves them, and raises the
client's exceptions (``ApiException`` with the HTTP status; a connection error from
urllib3). Reads, patches and deletes go through ``CoreV1Api`` with
``_preload_content=False`` (the JSON as served, not the client's models). The two
creates (a mirror pod, an Event) post the dict through the same ``ApiClient``
(``param_serialize`` and ``call_api``, which is what ``CoreV1Api`` does inside): the
typed ``create_namespaced_pod`` first converts its body to the client's pydantic models,
which refuse what a manifest may hold (``cpu: 1`` as a number) and drop the fields they
do not know.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, Protocol

import kubernetes.client
from kubernetes.client.exceptions import ApiException
from pkletd.ipc.apiclient.kubeapi import LimitedApiClient

Obj = dict[str, Any]
STRATEGIC = "application/strategic-merge-patch+json"


class KubeCalls(Protocol):
    """The calls, each blocking (run on a job thread, never on the worker's loop)."""

    def read_pod(self, namespace: str, name: str) -> Obj: ...

    def create_pod(self, namespace: str, pod: Obj) -> Obj: ...

    def patch_pod_status(self, namespace: str, name: str, patch: Obj) -> Obj: ...

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Delete with grace 0 and ``uid`` as the precondition."""
        ...

    def read_node(self, name: str) -> Obj: ...

    def create_event(self, namespace: str, event: Obj) -> Obj: ...

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj: ...

    def close(self) -> None: ...


def _json(response: Any) -> Obj:
    body = response.data
    return json.loads(body) if body else {}


class ClientCalls:
    """``KubeCalls`` on ``kubernetes.client``; ``timeout`` bounds every call."""

    def __init__(self, client: LimitedApiClient, timeout: float) -> None:
        self._client = client
        self._core = kubernetes.client.CoreV1Api(client)
        self._timeout = timeout

    def read_pod(self, namespace: str, name: str) -> Obj:
        response = self._core.read_namespaced_pod(
            name, namespace, _preload_content=False, _request_timeout=self._timeout
        )
        return _json(response)

    def create_pod(self, namespace: str, pod: Obj) -> Obj:
        return self._post(f"/api/v1/namespaces/{namespace}/pods", pod)

    def patch_pod_status(self, namespace: str, name: str, patch: Obj) -> Obj:
        return self._patch(self._core.patch_namespaced_pod_status, namespace, name, patch)

    def delete_pod(self, namespace: str, name: str, uid: str) -> None:
        options = kubernetes.client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=kubernetes.client.V1Preconditions(uid=uid)
        )
        response = self._core.delete_namespaced_pod(
            name, namespace, body=options, _preload_content=False, _request_timeout=self._timeout
        )
        _json(response)  # read to the end: the connection goes back to the pool

    def read_node(self, name: str) -> Obj:
        response = self._core.read_node(
            name, _preload_content=False, _request_timeout=self._timeout
        )
        return _json(response)

    def create_event(self, namespace: str, event: Obj) -> Obj:
        return self._post(f"/api/v1/namespaces/{namespace}/events", event)

    def patch_event(self, namespace: str, name: str, patch: Obj) -> Obj:
        return self._patch(self._core.patch_namespaced_event, namespace, name, patch)

    def _patch(self, call: Callable[..., Any], namespace: str, name: str, patch: Obj) -> Obj:
        """A strategic-merge PATCH through the typed client, its answer as JSON."""
        response = call(
            name,
            namespace,
            patch,
            _content_type=STRATEGIC,
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        return _json(response)

    def close(self) -> None:
        self._client.close()

    def _post(self, path: str, body: Obj) -> Obj:
        answer = self._client.send_json("POST", path, body, timeout=self._timeout)
        if not 200 <= answer.status <= 299:
            raise ApiException(status=answer.status, reason=answer.reason)
        return json.loads(answer.data) if answer.data else {}
