"""Who is asking the kubelet API, as the kubelet's delegating authenticator decides.

In order: a client certificate verified against ``authentication.x509.clientCAFile``
(CN is the user, O the groups); else a bearer token, reviewed by the API server
(``TokenReview``, when ``authentication.webhook.enabled``) and cached for ``cacheTTL``
(both answers; not errors); else, if ``authentication.anonymous.enabled``,
``system:anonymous`` in ``system:unauthenticated``. A token that does not authenticate,
or that cannot be reviewed, is a 401 even when anonymous requests are allowed (the
kubelet's fail-on-error union). Every authenticated user is also in
``system:authenticated``.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from pkletd.workers.http.reviews import Reviewer, ReviewUnavailable, Status
from pkletd.workers.http.ttlcache import TtlCache

log = logging.getLogger(__name__)

AUTHENTICATED = "system:authenticated"
Offload = Callable[[Callable[[], Status]], Awaitable[Status]]


@dataclass(frozen=True, slots=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()  # sorted, so a User is a cache key

    def with_authenticated(self) -> User:
        if AUTHENTICATED in self.groups:
            return self
        return User(self.name, (*self.groups, AUTHENTICATED), self.uid, self.extra)


ANONYMOUS = User("system:anonymous", ("system:unauthenticated",))


class Unauthenticated(Exception):
    """The request has no identity we accept; the message says why (for the log only)."""


def user_from_certificate(peer: Mapping[str, Any] | None) -> User | None:
    """The user of a verified client certificate (``SSLSocket.getpeercert()``)."""
    if not peer:
        return None
    name, groups = "", []
    for rdn in peer.get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                name = value
            elif key == "organizationName":
                groups.append(value)
    return User(name, tuple(groups)) if name else None


def bearer_token(header: str | None) -> str | None:
    scheme, _, token = (header or "").strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


def user_from_review(status: Status) -> User | None:
    if not status.get("authenticated"):
        return None
    user = status.get("user") or {}
    extra = user.get("extra") or {}
    return User(
        str(user.get("username", "")),
        tuple(str(g) for g in user.get("groups") or ()),
        str(user.get("uid", "")),
        tuple(sorted((str(k), tuple(map(str, v))) for k, v in extra.items())),
    )


class TokenAuthenticator:
    """Bearer tokens through TokenReviews, cached by the token's digest."""

    def __init__(self, reviewer: Reviewer, offload: Offload, cache_ttl: float) -> None:
        self._reviewer = reviewer
        self._offload = offload
        self._cache: TtlCache[str, Status] = TtlCache(lambda _status: cache_ttl)

    async def authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        status = await self._cache.get(
            key, lambda: self._offload(lambda: self._reviewer.token_review(token))
        )
        return user_from_review(status)


class Authenticator:
    def __init__(self, tokens: TokenAuthenticator | None, anonymous: bool) -> None:
        self._tokens = tokens
        self._anonymous = anonymous

    async def authenticate(self, peer: Mapping[str, Any] | None, authorization: str | None) -> User:
        user = user_from_certificate(peer)
        if user is not None:
            return user.with_authenticated()
        token = bearer_token(authorization)
        if token is not None and self._tokens is not None:
            try:
                user = await self._tokens.authenticate(token)
            except ReviewUnavailable as exc:
                raise Unauthenticated(f"token review failed: {exc}") from exc
            if user is None:
                raise Unauthenticated("invalid bearer token")
            return user.with_authenticated()
        if self._anonymous:
            return ANONYMOUS
        raise Unauthenticated("no client certificate or bearer token")
