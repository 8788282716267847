"""May this user do that to this node, as the kubelet decides (``pkg/kubelet/server/auth.go``).

A request becomes one or more attribute sets on resource ``nodes`` (name = the node), the
verb from the method (GET get, POST create, PUT update, PATCH patch, DELETE delete) and a
subresource from the path: ``/stats/*`` stats, ``/metrics/*`` metrics, ``/logs/*`` log,
``/checkpoint/*`` checkpoint, anything else proxy. As with ``KubeletFineGrainedAuthz``
(on by default since 1.33), ``/pods``, ``/runningpods/`` (pods), ``/healthz`` (healthz)
and ``/configz`` (configz) are asked first and fall back to proxy: the first set allowed
lets the request through.

``authorization.mode``: ``AlwaysAllow``, or ``Webhook``: a ``SubjectAccessReview`` per
set, allowed answers cached for ``cacheAuthorizedTTL``, denied ones for
``cacheUnauthorizedTTL``, errors not at all.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from pkletd.workers.http.authn import User
from pkletd.workers.http.reviews import Reviewer, Status
from pkletd.workers.http.ttlcache import TtlCache

VERBS = {"GET": "get", "POST": "create", "PUT": "update", "PATCH": "patch", "DELETE": "delete"}
FINE_GRAINED = (("/pods", "pods"), ("/healthz", "healthz"), ("/configz", "configz"),
                ("/statusz", "statusz"), ("/runningpods/", "pods"))  # fmt: skip
COARSE = (("/stats/", "stats"), ("/metrics", "metrics"), ("/logs/", "log"),
          ("/checkpoint/", "checkpoint"))  # fmt: skip
Offload = Callable[[Callable[[], Status]], Awaitable[Status]]


@dataclass(frozen=True, slots=True)
class Attributes:
    user: User
    verb: str
    subresource: str
    node: str
    path: str

    def forbidden(self) -> str:
        """The kubelet's 403 text."""
        return (
            f"Forbidden (user={self.user.name}, verb={self.verb}, resource=nodes, "
            f"subresource={self.subresource})"
        )

    def error(self) -> str:
        """The kubelet's 500 text when the authorizer could not decide."""
        return (
            f"Authorization error (user={self.user.name}, verb={self.verb}, resource=nodes, "
            f"subresource={self.subresource})"
        )

    def review_spec(self) -> dict[str, Any]:
        """The SubjectAccessReview spec the kubelet's webhook authorizer sends."""
        spec: dict[str, Any] = {
            "user": self.user.name,
            "groups": list(self.user.groups),
            "resourceAttributes": {
                "verb": self.verb,
                "version": "v1",
                "resource": "nodes",
                "subresource": self.subresource,
                "name": self.node,
            },
        }
        if self.user.uid:
            spec["uid"] = self.user.uid
        if self.user.extra:
            spec["extra"] = {k: list(v) for k, v in self.user.extra}
        return spec


def is_subpath(path: str, prefix: str) -> bool:
    """The kubelet's isSubpath: ``path`` is ``prefix`` (without a trailing slash) or under it."""
    prefix = prefix.rstrip("/")
    return path == prefix or path.startswith(prefix + "/")


def subresources(path: str) -> list[str]:
    found = [sub for prefix, sub in FINE_GRAINED if is_subpath(path, prefix)][:1]
    coarse = [sub for prefix, sub in COARSE if is_subpath(path, prefix)][:1]
    return found + (coarse or ["proxy"])


def attributes(user: User, method: str, path: str, node: str) -> list[Attributes]:
    verb = VERBS.get(method, "")
    return [Attributes(user, verb, sub, node, path) for sub in subresources(path)]


class Authorizer(Protocol):
    async def authorize(self, attrs: Attributes) -> bool:
        """Whether ``attrs`` is allowed; ReviewUnavailable when it cannot be decided."""
        ...


class AlwaysAllow:
    async def authorize(self, attrs: Attributes) -> bool:
        return True


class WebhookAuthorizer:
    def __init__(
        self, reviewer: Reviewer, offload: Offload, authorized_ttl: float, unauthorized_ttl: float
    ) -> None:
        self._reviewer = reviewer
        self._offload = offload
        self._cache: TtlCache[str, Status] = TtlCache(
            lambda s: authorized_ttl if s.get("allowed") else unauthorized_ttl
        )

    async def authorize(self, attrs: Attributes) -> bool:
        spec = attrs.review_spec()
        key = json.dumps(spec, sort_keys=True)
        status = await self._cache.get(
            key, lambda: self._offload(lambda: self._reviewer.access_review(spec))
        )
        return bool(status.get("allowed")) and not status.get("denied")
