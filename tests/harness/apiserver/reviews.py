"""The create-only endpoints that answer a question: TokenRequest, TokenReview and
SubjectAccessReview (the calls a kubelet's authenticated API makes on each request).

* ``serviceaccounts/<sa>/token``: checks the service account and the bound object (kind Pod,
  Secret or Node, same uid; a pod must run as that service account), defaults the audiences
  to the server's, caps the lifetime at ``max_token_expiration`` and returns the request with
  ``status.token`` and ``status.expirationTimestamp`` (``tokens.py`` has the lifetimes).
* ``tokenreviews``: ``status.authenticated``, ``user`` and ``audiences``, or ``error``.
* ``subjectaccessreviews``: the authorizer's answer for the spec's user and attributes.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.auth import Attributes, Authenticator, Authorizer, UserInfo
from tests.harness.apiserver.store import Store, now_rfc3339
from tests.harness.apiserver.tokens import (
    TokenInvalid,
    TokenIssuer,
    expiration_timestamp,
    validate_token_request,
)
from tests.harness.apiserver.validation import FieldError, go_quote

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

    def token_request(
        self,
        namespace: str,
        name: str,
        body: Obj,
        admit: Callable[[Obj], None] = lambda request: None,
        warnings: list[str] | None = None,
    ) -> Obj:
        """The TokenRequest REST's ``Create``, in its order: names match the URL, the service
        account exists (404), audiences default to the server's, validation (422), admission
        (``admit``), the bound object (404/400/409), the max-expiration cap (a warning)."""
        meta = body.setdefault("metadata", {})
        for key, value, what in (("name", name, "name"), ("namespace", namespace, "namespace")):
            if meta.get(key) and meta[key] != value:
                problem = FieldError.invalid(
                    f"metadata.{key}",
                    meta[key],
                    f"must match the service account {what} if specified",
                )
                raise errors.invalid("authentication.k8s.io", "TokenRequest", name, [problem])
        sa = self.store.get("serviceaccounts", namespace, name)
        if sa is None:
            raise errors.not_found("", "serviceaccounts", name)
        spec = body.setdefault("spec", {})
        spec["audiences"] = spec.get("audiences") or list(self.issuer.audiences)
        meta.update(name=name, namespace=namespace, creationTimestamp=now_rfc3339())
        body.pop("status", None)
        validate_token_request(body)
        admit(copy.deepcopy(body))
        bound, node = self._bound_object(namespace, name, spec.get("boundObjectRef"))
        spec["expirationSeconds"], warning = self.issuer.capped(spec["expirationSeconds"])
        if warning and warnings is not None:
            warnings.append(warning)
        token, _ = self.issuer.issue(sa, spec["expirationSeconds"], spec["audiences"], bound, node)
        out = copy.deepcopy(body)
        out["apiVersion"], out["kind"] = "authentication.k8s.io/v1", "TokenRequest"
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
        kind, version = ref.get("kind", ""), ref.get("apiVersion", "")
        bucket = _BOUND_KINDS.get(kind)
        if bucket is None or "/" in version:  # the core group, whatever the version
            group, _, plain = version.rpartition("/")
            raise errors.bad_request(
                f"cannot bind token to object of type {group}/{plain}, Kind={kind}"
            )
        found = self.store.get(bucket, "" if kind == "Node" else namespace, ref.get("name", ""))
        if found is None:
            raise errors.not_found("", bucket, ref.get("name", ""))
        node = None
        if kind == "Pod":
            running_as = (found.get("spec") or {}).get("serviceAccountName", "")
            if running_as != sa_name:
                raise errors.bad_request(
                    f"cannot bind token for serviceaccount {go_quote(sa_name)} to "
                    "pod running with different serviceaccount name."
                )
            node_name = (found.get("spec") or {}).get("nodeName", "")
            if node_name:
                node = self.store.get("nodes", "", node_name) or {"metadata": {"name": node_name}}
        if ref.get("uid") and ref["uid"] != found["metadata"]["uid"]:
            raise errors.conflict(
                "",
                kind,
                ref.get("name", ""),
                f"the UID in the bound object reference ({ref['uid']}) does "
                "not match the UID in record. The object might have been "
                "deleted and then recreated",
            )
        found["kind"] = kind
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
            field_selector=_raw_field_selector(resource.get("fieldSelector") or {}),
        )
    assert non_resource is not None
    return Attributes(user, non_resource.get("verb", ""), False, path=non_resource.get("path", ""))


def _raw_field_selector(attributes: Obj) -> str:
    """``fieldSelector`` of a SAR: ``rawSelector``, or its ``In`` requirements of one value."""
    if attributes.get("rawSelector"):
        return str(attributes["rawSelector"])
    terms = [
        f"{r.get('key', '')}={r['values'][0]}"
        for r in attributes.get("requirements") or []
        if r.get("operator") == "In" and len(r.get("values") or []) == 1
    ]
    return ",".join(terms)
