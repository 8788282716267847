"""Who is asking (authentication) and may they (authorization), as kube-apiserver decides.

Authentication, in the real order: an x509 client cert verified against the cluster CA
(CN = user, O = groups), else a bearer token (the static token table, then service-account
JWTs); every authenticated user is also in ``system:authenticated``. No credentials is 401
unless anonymous auth is on; a bad token is always 401.

Authorization is a hook: ``Authorizer`` is any callable from ``Attributes`` to ``Decision``.
The default allows every authenticated user (and anonymous users only the public-info
paths); a test swaps it to deny::

    server.authorizer = lambda a: Decision(a.user.name != "mallory")
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from tests.harness.apiserver import errors

AUTHENTICATED = "system:authenticated"
UNAUTHENTICATED = "system:unauthenticated"
ANONYMOUS = "system:anonymous"
PUBLIC_PATHS = ("/healthz", "/livez", "/readyz", "/version")


@dataclass(frozen=True)
class UserInfo:
    name: str
    groups: tuple[str, ...] = ()
    uid: str = ""
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    def with_authenticated(self) -> UserInfo:
        if AUTHENTICATED in self.groups or self.name == ANONYMOUS:
            return self
        return UserInfo(self.name, (*self.groups, AUTHENTICATED), self.uid, self.extra)

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"username": self.name}
        if self.uid:
            out["uid"] = self.uid
        if self.groups:
            out["groups"] = list(self.groups)
        if self.extra:
            out["extra"] = {k: list(v) for k, v in self.extra.items()}
        return out


@dataclass(frozen=True)
class Attributes:
    """``authorizer.Attributes``: one request as the authorizer sees it."""

    user: UserInfo
    verb: str
    resource_request: bool
    path: str = ""
    namespace: str = ""
    api_group: str = ""
    api_version: str = ""
    resource: str = ""
    subresource: str = ""
    name: str = ""
    field_selector: str = ""  # list, watch and deletecollection: the raw ``fieldSelector``


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""
    denied: bool = False  # an explicit deny (SubjectAccessReview's status.denied)


Authorizer = Callable[[Attributes], Decision]


def default_authorizer(attributes: Attributes) -> Decision:
    if AUTHENTICATED in attributes.user.groups:
        return Decision(True)
    if not attributes.resource_request and attributes.path in PUBLIC_PATHS:
        return Decision(True)
    return Decision(False)


def forbidden_message(a: Attributes) -> str:
    if not a.resource_request:
        return f'User "{a.user.name}" cannot {a.verb} path "{a.path}"'
    resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
    where = f'in the namespace "{a.namespace}"' if a.namespace else "at the cluster scope"
    return (
        f'User "{a.user.name}" cannot {a.verb} resource "{resource}" in API group '
        f'"{a.api_group}" {where}'
    )


def forbidden(a: Attributes, reason: str) -> errors.ApiError:
    message = forbidden_message(a)
    if reason:
        message = f"{message}: {reason}"
    return errors.forbidden(a.api_group, a.resource, a.name, message)


# --------------------------------------------------------------------------- authentication


class TokenAuthenticator(Protocol):
    def authenticate_token(self, token: str) -> UserInfo | None:
        """The user of a valid token; None if unknown; raise ValueError if it is invalid."""
        ...


class StaticTokens:
    """The ``--token-auth-file`` table: token → user."""

    def __init__(self) -> None:
        self._users: dict[str, UserInfo] = {}

    def add(self, token: str, user: UserInfo) -> None:
        self._users[token] = user

    def authenticate_token(self, token: str) -> UserInfo | None:
        return self._users.get(token)


def user_from_certificate(peer: Mapping[str, Any] | None) -> UserInfo | None:
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
    return UserInfo(name, tuple(groups)) if name else None


class Authenticator:
    def __init__(self, token_authenticators: list[TokenAuthenticator], anonymous: bool) -> None:
        self.token_authenticators = token_authenticators
        self.anonymous = anonymous

    def authenticate(self, peer: Mapping[str, Any] | None, authorization: str | None) -> UserInfo:
        """The request's user; raises the 401 ApiError when it has none."""
        user = user_from_certificate(peer)
        if user is not None:
            return user.with_authenticated()
        if authorization:
            user = self.authenticate_bearer(authorization)
            if user is None:
                raise errors.unauthorized()
            return user.with_authenticated()
        if self.anonymous:
            return UserInfo(ANONYMOUS, (UNAUTHENTICATED,))
        raise errors.unauthorized()

    def authenticate_bearer(self, header: str) -> UserInfo | None:
        scheme, _, token = header.strip().partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            return None
        return self.authenticate_token(token.strip())

    def authenticate_token(self, token: str) -> UserInfo | None:
        for authenticator in self.token_authenticators:
            try:
                user = authenticator.authenticate_token(token)
            except ValueError:
                return None
            if user is not None:
                return user
        return None
