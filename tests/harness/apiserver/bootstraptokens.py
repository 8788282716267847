"""Bootstrap tokens, as kube-apiserver's bootstrap token authenticator and the RBAC a
kubeadm cluster gives their users.

A token ``<id>.<secret>`` (6 and 16 of ``[a-z0-9]``) authenticates when the Secret
``bootstrap-token-<id>`` in ``kube-system`` has type ``bootstrap.kubernetes.io/token``,
the same ``token-id`` and ``token-secret``, ``usage-bootstrap-authentication: "true"``
and no ``expiration`` in the past. The user is ``system:bootstrap:<id>`` in
``system:bootstrappers`` plus the Secret's ``auth-extra-groups``. A token that looks like
one but does not match is refused (401), as the real authenticator does.

Authorization: a bootstrapper may create certificatesigningrequests and get, list and
watch them (``system:node-bootstrapper``), and read discovery; nothing else.
"""

from __future__ import annotations

import base64
import datetime as dt
import re

from tests.harness.apiserver.auth import Attributes, Authorizer, Decision, UserInfo
from tests.harness.apiserver.store import Store

TOKEN = re.compile(r"^([a-z0-9]{6})\.([a-z0-9]{16})$")
SECRET_TYPE = "bootstrap.kubernetes.io/token"
BOOTSTRAPPERS = "system:bootstrappers"
CSR_VERBS = ("create", "get", "list", "watch")


def token_secret(token_id: str, secret: str, extra_groups: str = "") -> dict[str, object]:
    """The Secret ``kubeadm token create`` writes (store form: base64 data)."""
    data = {
        "token-id": token_id,
        "token-secret": secret,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
    }
    if extra_groups:
        data["auth-extra-groups"] = extra_groups
    return {
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
        "type": SECRET_TYPE,
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


class BootstrapTokens:
    def __init__(self, store: Store) -> None:
        self.store = store

    def authenticate_token(self, token: str) -> UserInfo | None:
        found = TOKEN.match(token)
        if found is None:
            return None
        token_id, secret = found.groups()
        obj = self.store.get("secrets", "kube-system", f"bootstrap-token-{token_id}")
        if obj is None or obj.get("type") != SECRET_TYPE:
            raise ValueError("no such bootstrap token")
        data = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
        if data.get("token-id") != token_id or data.get("token-secret") != secret:
            raise ValueError("bootstrap token does not match")
        if data.get("usage-bootstrap-authentication") != "true" or _expired(data):
            raise ValueError("bootstrap token not usable for authentication")
        extra = [g for g in data.get("auth-extra-groups", "").split(",") if g]
        return UserInfo(f"system:bootstrap:{token_id}", (BOOTSTRAPPERS, *extra))


def _expired(data: dict[str, str]) -> bool:
    expiration = data.get("expiration")
    if not expiration:
        return False
    when = dt.datetime.fromisoformat(expiration.replace("Z", "+00:00"))
    return when <= dt.datetime.now(dt.UTC)


def bootstrappers_limited(others: Authorizer) -> Authorizer:
    """Bootstrappers get ``system:node-bootstrapper`` and discovery; others ``others``."""

    def authorize(a: Attributes) -> Decision:
        if BOOTSTRAPPERS not in a.user.groups:
            return others(a)
        if not a.resource_request:
            return others(a)
        is_csr = (a.api_group, a.resource) == ("certificates.k8s.io", "certificatesigningrequests")
        return Decision(is_csr and not a.subresource and a.verb in CSR_VERBS)

    return authorize
