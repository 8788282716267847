"""Raw JSON requests to the API server over the official client's rate-limited
``ApiClient``, for the workers that keep objects as API JSON (no model round-trip
drops a field the server added).

``JsonApi.request`` answers the object as a dict or raises ``ApiCallFailed`` with
the HTTP status (0 when no answer came) and a one-line description taken from the
API's Status answer.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from pkletd.ipc.apiclient.kubeapi import JSON, LimitedApiClient, describe, status_of

Obj = dict[str, Any]
NOT_FOUND, CONFLICT = 404, 409


class ApiCallFailed(Exception):
    """An API call that did not succeed; ``status`` is its HTTP status, 0 without one."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class JsonApi:
    def __init__(self, client: LimitedApiClient, timeout: float) -> None:
        self._client = client
        self._timeout = timeout

    def close(self) -> None:
        self._client.close()

    def request(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        content_type: str = JSON,
        query: Sequence[tuple[str, str]] = (),
    ) -> Obj:
        try:
            answer = self._client.send_json(method, path, body, content_type, query, self._timeout)
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
    """``HTTP 404 Not Found: nodes "n1" not found`` from the API's Status answer."""
    text = f"HTTP {status} {reason}".strip()
    try:
        message = json.loads(data).get("message", "")
    except (ValueError, AttributeError):
        message = ""
    return f"{text}: {message}" if message else text
