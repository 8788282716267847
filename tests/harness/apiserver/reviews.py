"""The create-only endpoints that answer a question: TokenRequest, TokenReview and
SubjectAccessReview (the calls a kubelet's authenticated API makes on each request).

* ``serviceaccounts/<sa>/token``: checks the service account and the bound object (kind Pod,
  Secret or Node, same uid; a pod must run as that service account) and returns the request
  with ``status.token`` and ``status.expirationTimestamp``.
* ``tokenreviews``: ``status.authenticated``, ``user`` and ``audiences``, or ``error``.
* ``subjectaccessreviews``: the authorizer's answer for the spec's user and attributes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.auth import Attributes, Authenticator, Authorizer, UserInfo
from tests.harness.apiserver.store import Store
from tests.harness.apiserver.tokens import (
    TokenInvalid,
    TokenIssuer,
    expiration_timestamp,
    validate_token_request,
)
from tests.harness.apiserver.validation import FieldError

Obj = dict[str, Any]
_BOUND_KINDS = {"Pod": "pods", "Secret": "secrets", "Node": "nodes"}


class Reviews:
    def __init__(
        self,
        store: Store,
        issuer: TokenIssuer,
        authenticator: Authenticator,
        authorizer: Callable[[], Authorizer],
    ) -> None:
        self.store = store
        self.issuer = issuer
        self.authenticator = authenticator
        self.authorizer = authorizer

    # ----------------------------------------------------------------------- TokenRequest

    def token_request(self, namespace: str, name: str, body: Obj) -> Obj:
        validate_token_request(body)
        spec = body["spec"]
        sa = self.store.get("serviceaccounts", namespace, name)
        if sa is None:
            raise errors.not_found("", "serviceaccounts", name)
        audiences = spec.get("audiences") or list(self.issuer.audiences)
        bound, node = self._bound_object(namespace, name, spec.get("boundObjectRef"))
        token, _ = self.issuer.issue(sa, spec["expirationSeconds"], audiences, bound, node)
        out = copy.deepcopy(body)
        out["apiVersion"], out["kind"] = "authentication.k8s.io/v1", "TokenRequest"
        out["metadata"] = {
            "name": name,
            "namespace": namespace,
            "creationTimestamp": sa["metadata"].get("creationTimestamp"),
        }
        out["spec"]["audiences"] = audiences
        out["status"] = {
            "token": token,
            "expirationTimestamp": expiration_timestamp(spec["expirationSeconds"]),
        }
        return out

    def _bound_object(
        self, namespace: str, sa_name: str, ref: Obj | None
    ) -> tuple[Obj | None, Obj | None]:
        if not ref:
            return None, None
        kind = ref.get("kind", "")
        bucket = _BOUND_KINDS.get(kind)
        if bucket is None or ref.get("apiVersion", "v1") != "v1":
            raise errors.bad_request(
                f"cannot bind token for serviceaccount {sa_name!r} to object of kind {kind!r}"
            )
        found = self.store.get(bucket, "" if kind == "Node" else namespace, ref.get("name", ""))
        if found is None:
            raise errors.not_found("", bucket, ref.get("name", ""))
        if ref.get("uid") and ref["uid"] != found["metadata"]["uid"]:
            raise errors.conflict(
                "",
                bucket,
                ref.get("name", ""),
                f"the UID in the bound object reference ({ref['uid']}) does "
                "not match the UID in record. The object might have been "
                "deleted and then recreated",
            )
        found["kind"] = kind
        node = None
        if kind == "Pod":
            running_as = (found.get("spec") or {}).get("serviceAccountName", "")
            if running_as != sa_name:
                raise errors.bad_request(
                    f'cannot bind token for serviceaccount "{sa_name}" to '
                    "pod running with different serviceaccount name."
                )
            node_name = (found.get("spec") or {}).get("nodeName", "")
            node = self.store.get("nodes", "", node_name) if node_name else None
        return found, node

    # ----------------------------------------------------------------------- TokenReview

    def token_review(self, body: Obj) -> Obj:
        spec = body.get("spec") or {}
        token = spec.get("token", "")
        if not token:
            raise errors.bad_request("token is required for TokenReview in authentication")
        wanted = spec.get("audiences") or list(self.issuer.audiences)
        status: Obj = {"user": {}}
        try:
            user, audiences = self._review(token, wanted)
        except TokenInvalid as exc:
            status["error"] = f"[invalid bearer token, {exc}]"
        else:
            if user is not None:
                status = {"authenticated": True, "user": user.as_json(), "audiences": audiences}
        return {
            "kind": "TokenReview",
            "apiVersion": "authentication.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }

    def _review(self, token: str, wanted: list[str]) -> tuple[UserInfo | None, list[str]]:
        if token.count(".") == 2:
            user, audiences = self.issuer.review(token, wanted)
            return user.with_authenticated(), audiences
        static = self.authenticator.authenticate_token(token)
        accepted = [a for a in wanted if a in self.issuer.audiences]
        if static is None or not accepted:
            return None, []
        return static.with_authenticated(), accepted

    # ----------------------------------------------------------------------- SAR

    def subject_access_review(self, body: Obj) -> Obj:
        spec = body.get("spec") or {}
        resource = spec.get("resourceAttributes")
        non_resource = spec.get("nonResourceAttributes")
        problems = []
        if (resource is None) == (non_resource is None):
            problems.append(
                FieldError.invalid(
                    "spec.resourceAttributes",
                    "null" if resource is None else resource,
                    "exactly one of nonResourceAttributes or resourceAttributes must be specified",
                )
            )
        if not spec.get("user") and not spec.get("groups"):
            problems.append(
                FieldError.invalid(
                    "spec.user", "", "at least one of user or group must be specified"
                )
            )
        if problems:
            raise errors.invalid("authorization.k8s.io", "SubjectAccessReview", "", problems)
        extra = {k: tuple(v) for k, v in (spec.get("extra") or {}).items()}
        user = UserInfo(
            spec.get("user", ""), tuple(spec.get("groups") or ()), spec.get("uid", ""), extra
        )
        decision = self.authorizer()(_attributes(user, resource, non_resource))
        status: Obj = {"allowed": decision.allowed}
        if decision.denied:
            status["denied"] = True
        if decision.reason:
            status["reason"] = decision.reason
        return {
            "kind": "SubjectAccessReview",
            "apiVersion": "authorization.k8s.io/v1",
            "metadata": {"creationTimestamp": None},
            "spec": spec,
            "status": status,
        }


def _attributes(user: UserInfo, resource: Obj | None, non_resource: Obj | None) -> Attributes:
    if resource is not None:
        return Attributes(
            user,
            resource.get("verb", ""),
            True,
            namespace=resource.get("namespace", ""),
            api_group=resource.get("group", ""),
            api_version=resource.get("version", ""),
            resource=resource.get("resource", ""),
            subresource=resource.get("subresource", ""),
            name=resource.get("name", ""),
        )
    assert non_resource is not None
    return Attributes(user, non_resource.get("verb", ""), False, path=non_resource.get("path", ""))
