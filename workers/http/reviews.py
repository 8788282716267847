"""The API server's two questions for the kubelet API: who is this token
(``TokenReview``) and may this user do that (``SubjectAccessReview``).

``Reviewer`` is the seam; ``ApiReviewer`` asks through the official client (built from
the kubeconfig by ``ipc.apiclient.kubeapi.connect``, rate limited like every API
worker), with a timeout on each call; ``NoApiServer`` answers for a standalone node,
where nothing can review; ``FakeReviewer`` is for tests. Calls block: the server runs
them on a small pool of threads, never on its event loop.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import Any, Protocol

REQUEST_TIMEOUT_S = 5.0
CALL_OPTIONS: dict[str, Any] = {"_preload_content": False, "_request_timeout": REQUEST_TIMEOUT_S}
Status = dict[str, Any]


class ReviewUnavailable(Exception):
    """The review could not be made (API server unreachable, an error answer, a timeout)."""


class Reviewer(Protocol):
    def token_review(self, token: str) -> Status:
        """The TokenReview's ``status`` (``authenticated``, ``user``, ``error``)."""
        ...

    def access_review(self, spec: dict[str, Any]) -> Status:
        """The SubjectAccessReview's ``status`` (``allowed``, ``denied``, ``reason``)."""
        ...


class ApiReviewer:
    def __init__(self, kubeconfig: str, qps: int, burst: int) -> None:
        from pkletd.ipc.apiclient import (
            kubeapi,  # the client costs ~0.4 s: only when reviews are needed
        )

        self._kubeapi = kubeapi
        self._client = kubeapi.connect(kubeconfig, qps, burst)

    def token_review(self, token: str) -> Status:
        import kubernetes.client

        body: Any = {
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenReview",
            "spec": {"token": token},
        }
        api = kubernetes.client.AuthenticationV1Api(self._client)
        return self._status(lambda: api.create_token_review(body, **CALL_OPTIONS))

    def access_review(self, spec: dict[str, Any]) -> Status:
        import kubernetes.client

        body: Any = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": spec,
        }
        api = kubernetes.client.AuthorizationV1Api(self._client)
        return self._status(lambda: api.create_subject_access_review(body, **CALL_OPTIONS))

    def _status(self, call: Callable[[], Any]) -> Status:
        try:
            reply = json.loads(call().data)
        except Exception as exc:  # noqa: BLE001 (any failure of the call is "unavailable")
            raise ReviewUnavailable(self._kubeapi.describe(exc)) from exc
        status = reply.get("status") if isinstance(reply, dict) else None
        if not isinstance(status, dict):
            raise ReviewUnavailable(f"review answered without a status: {str(reply)[:200]}")
        return status

    def close(self) -> None:
        self._client.close()


class NoApiServer:
    """A standalone node: every review is unavailable, saying why."""

    def __init__(self, why: str) -> None:
        self.why = why

    def token_review(self, token: str) -> Status:
        raise ReviewUnavailable(self.why)

    def access_review(self, spec: dict[str, Any]) -> Status:
        raise ReviewUnavailable(self.why)


class FakeReviewer:
    """Answers from ``tokens`` (token -> user JSON) and ``allow`` (spec -> allowed?),
    records every call, and fails every call while ``down`` is set."""

    def __init__(
        self,
        tokens: dict[str, dict[str, Any]] | None = None,
        allow: Callable[[dict[str, Any]], bool] = lambda spec: True,
    ) -> None:
        self.tokens = dict(tokens or {})
        self.allow = allow
        self.down = False
        self.calls: list[tuple[str, Any]] = []
        self.gate: threading.Event | None = None  # when set, calls wait for it
        self._lock = threading.Lock()

    def token_review(self, token: str) -> Status:
        self._call("TokenReview", token)
        user = self.tokens.get(token)
        if user is None:
            return {"authenticated": False, "error": "invalid bearer token"}
        return {"authenticated": True, "user": user}

    def access_review(self, spec: dict[str, Any]) -> Status:
        self._call("SubjectAccessReview", spec)
        allowed = self.allow(spec)
        return {"allowed": allowed} if allowed else {"allowed": False, "reason": "fake says no"}

    def _call(self, kind: str, what: Any) -> None:
        with self._lock:
            self.calls.append((kind, what))
        if self.gate is not None:
            self.gate.wait(10)
        if self.down:
            raise ReviewUnavailable("cannot reach the API server: fake is down")

    def count(self, kind: str) -> int:
        with self._lock:
            return sum(1 for k, _ in self.calls if k == kind)
