"""Authentication and authorization on the test API server: client certs, static and
service-account tokens, the authorizer hook (403 text), TokenRequest, TokenReview and
SubjectAccessReview as a kubelet's authenticated API uses them."""

from __future__ import annotations

import base64
import datetime as dt
import json
import ssl
import urllib.error
import urllib.request
from collections.abc import Callable
from typing import Any

import pytest

from tests.harness.apiserver import ApiServer, Attributes, Decision
from tests.harness.apiserver.client import Kube, expect_failure


def anonymous_get(server: ApiServer, path: str, token: str | None = None) -> tuple[int, Any]:
    context = ssl.create_default_context(cafile=str(server.ca_path))
    request = urllib.request.Request(server.url + path)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, context=context, timeout=10) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as exc:
        with exc:
            return exc.code, json.loads(exc.read())


def claims(token: str) -> dict[str, Any]:
    payload = token.split(".")[1]
    return dict(json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4))))


def test_no_credentials_is_401_and_a_bad_token_too(apiserver: ApiServer) -> None:
    expected = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "Unauthorized",
        "reason": "Unauthorized",
        "code": 401,
    }
    assert anonymous_get(apiserver, "/api/v1/pods") == (401, expected)
    assert anonymous_get(apiserver, "/api/v1/pods", token="nope") == (401, expected)
    apiserver.add_token("s3cret", "bot", ["bots"])
    code, body = anonymous_get(apiserver, "/api/v1/namespaces", token="s3cret")
    assert code == 200 and json.loads(body)["kind"] == "NamespaceList"
    assert apiserver.requests(user="bot", resource="namespaces", verb="LIST")


def test_token_kubeconfig_works_with_kubectl(apiserver: ApiServer, kube: Kube) -> None:
    apiserver.add_token("t0k", "robot")
    robot = kube.as_user("robot", token="t0k")
    assert "default" in robot.kubectl("get", "namespaces", "-o", "name").stdout
    assert apiserver.request_count(user="robot", user_agent=None) >= 1


def test_authorizer_hook_denies_with_the_real_message(apiserver: ApiServer, kube: Kube) -> None:
    def deny_mallory(attributes: Attributes) -> Decision:
        return Decision(attributes.user.name != "mallory")

    apiserver.authorizer = deny_mallory
    mallory = kube.as_user("mallory", ["devs"])
    body = expect_failure(mallory.core.read_namespaced_pod, "web", "default")
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'pods "web" is forbidden: User "mallory" cannot get resource "pods" in API '
        'group "" in the namespace "default"',
        "reason": "Forbidden",
        "details": {"name": "web", "kind": "pods"},
        "code": 403,
    }
    body = expect_failure(mallory.core.list_node)
    assert body["message"] == (
        'nodes is forbidden: User "mallory" cannot list resource "nodes"'
        ' in API group "" at the cluster scope'
    )
    body = expect_failure(
        mallory.coordination.patch_namespaced_lease_with_http_info, "n1", "kube-node-lease", {}
    )
    assert body["message"].startswith(
        'leases.coordination.k8s.io "n1" is forbidden: User '
        '"mallory" cannot patch resource "leases" in API group '
        '"coordination.k8s.io"'
    )
    result = mallory.kubectl("get", "pods", check=False)
    assert result.returncode == 1 and "Forbidden" in result.stderr


def test_subject_access_review_answers_with_the_authorizer(
    apiserver: ApiServer, kube: Kube
) -> None:
    seen: list[Attributes] = []

    def only_get(attributes: Attributes) -> Decision:
        seen.append(attributes)
        if attributes.user.name == "admin":
            return Decision(True)
        return Decision(attributes.verb == "get", reason="only reads")

    apiserver.authorizer = only_get
    spec = {
        "user": "system:node:n1",
        "groups": ["system:nodes"],
        "resourceAttributes": {
            "verb": "get",
            "resource": "nodes",
            "subresource": "proxy",
            "name": "n1",
        },
    }
    review = kube.authz.create_subject_access_review({"spec": spec})
    assert review.status.allowed is True
    spec["resourceAttributes"]["verb"] = "create"
    review = kube.authz.create_subject_access_review({"spec": spec})
    assert (review.status.allowed, review.status.reason) == (False, "only reads")
    assert seen[-1].subresource == "proxy" and seen[-1].user.groups == ("system:nodes",)
    code, body, _ = kube.raw(
        "POST", "/apis/authorization.k8s.io/v1/subjectaccessreviews", {"spec": {"user": "x"}}
    )
    assert code == 422 and body["message"].startswith(
        'SubjectAccessReview.authorization.k8s.io "" is invalid: spec.resourceAttributes'
    )


def test_token_request_and_token_review(apiserver: ApiServer, kube: Kube) -> None:
    kube.core.create_node({"metadata": {"name": "n1"}})
    pod = kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]},
        },
    )
    kubelet = kube.as_user("system:node:n1", ["system:nodes"])
    request = {
        "spec": {
            "audiences": ["https://kubernetes.default.svc.cluster.local"],
            "expirationSeconds": 3607,
            "boundObjectRef": {
                "kind": "Pod",
                "apiVersion": "v1",
                "name": "web",
                "uid": pod.metadata.uid,
            },
        }
    }
    answer = kubelet.core.create_namespaced_service_account_token("default", "default", request)
    token = answer.status.token
    body = claims(token)
    assert body["sub"] == "system:serviceaccount:default:default"
    assert body["kubernetes.io"]["pod"] == {"name": "web", "uid": pod.metadata.uid}
    assert body["kubernetes.io"]["node"]["name"] == "n1"
    assert body["exp"] - body["iat"] == 365 * 24 * 3600 and "warnafter" in body["kubernetes.io"]
    review = kube.authn.create_token_review({"spec": {"token": token}})
    status = review.status
    assert status.authenticated is True
    assert status.user.username == "system:serviceaccount:default:default"
    assert status.user.groups == [
        "system:serviceaccounts",
        "system:serviceaccounts:default",
        "system:authenticated",
    ]
    assert status.user.extra["authentication.kubernetes.io/pod-name"] == ["web"]
    code, _ = anonymous_get(apiserver, "/api/v1/namespaces/default/pods", token=token)
    assert code == 200
    kube.core.delete_namespaced_pod("web", "default", grace_period_seconds=0)
    review = kube.authn.create_token_review({"spec": {"token": token}})
    assert not review.status.authenticated
    assert review.status.error == (
        "[invalid bearer token, service account token has been invalidated]"
    )


def test_token_request_validation(kube: Kube) -> None:
    body = expect_failure(
        kube.core.create_namespaced_service_account_token,
        "default",
        "default",
        {"spec": {"audiences": ["x"], "expirationSeconds": 599}},
    )
    assert body["details"]["causes"][0] == {
        "reason": "FieldValueInvalid",
        "field": "spec.expirationSeconds",
        "message": "Invalid value: 599: may not specify a duration less than 10 minutes",
    }
    answer = kube.core.create_namespaced_service_account_token(
        "default", "default", {"spec": {"audiences": ["api"]}}
    )
    assert claims(answer.status.token)["aud"] == ["api"]
    review = kube.authn.create_token_review(
        {"spec": {"token": answer.status.token, "audiences": ["other"]}}
    )
    assert not review.status.authenticated and "invalid for the target audiences" in (
        review.status.error
    )
    body = expect_failure(
        kube.core.create_namespaced_service_account_token,
        "nobody",
        "default",
        {"spec": {"audiences": ["x"]}},
    )
    assert body["message"] == 'serviceaccounts "nobody" not found'
    kubelet = kube.as_user("system:node:n1", ["system:nodes"])
    body = expect_failure(
        kubelet.core.create_namespaced_service_account_token,
        "default",
        "default",
        {"spec": {"audiences": ["x"]}},
    )
    assert body["message"].endswith(
        "no relationship found between node 'n1' and this object"
    )  # the Node authorizer: no pod of n1 runs as default/default yet
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]},
        },
    )
    body = expect_failure(
        kubelet.core.create_namespaced_service_account_token,
        "default",
        "default",
        {"spec": {"audiences": ["x"]}},
    )
    assert body["message"].endswith("node requested token not bound to a pod")  # admission


def test_token_request_defaults_and_bound_object_checks(kube: Kube) -> None:
    code, answer, _ = kube.raw(
        "POST", "/api/v1/namespaces/default/serviceaccounts/default/token", {"spec": {}}
    )
    assert code == 201
    assert answer["spec"]["audiences"] == ["https://kubernetes.default.svc.cluster.local"]
    assert answer["spec"]["expirationSeconds"] == 3600
    assert (answer["metadata"]["name"], answer["metadata"]["namespace"]) == ("default", "default")
    body = claims(answer["status"]["token"])
    assert body["exp"] - body["iat"] == 3600 and "pod" not in body["kubernetes.io"]

    body = expect_failure(
        kube.core.create_namespaced_service_account_token,
        "default",
        "default",
        {"spec": {"expirationSeconds": 2**32 + 1}},
    )
    assert body["message"] == (
        'TokenRequest.authentication.k8s.io "" is invalid: spec.expirationSeconds: Invalid '
        "value: 4294967297: may not specify a duration larger than 2^32 seconds"
    )
    body = expect_failure(
        kube.core.create_namespaced_service_account_token,
        "default",
        "default",
        {"metadata": {"name": "other"}, "spec": {}},
    )
    assert body["message"] == (
        'TokenRequest.authentication.k8s.io "default" is invalid: metadata.name: Invalid value: '
        '"other": must match the service account name if specified'
    )
    kube.core.create_namespaced_service_account("default", {"metadata": {"name": "runner"}})
    pod = kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web"},
            "spec": {"serviceAccountName": "runner", "containers": [{"name": "a", "image": "b"}]},
        },
    )

    def bound_to(**ref: str) -> dict[str, Any]:
        return expect_failure(
            kube.core.create_namespaced_service_account_token,
            "runner",
            "default",
            {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", **ref}}},
        )

    body = bound_to(name="web", uid="not-the-uid")
    assert (body["code"], body["message"]) == (
        409,
        'Operation cannot be fulfilled on Pod "web": the UID in the bound object reference '
        "(not-the-uid) does not match the UID in record. The object might have been deleted "
        "and then recreated",
    )
    body = bound_to(name="gone")
    assert (body["code"], body["message"]) == (404, 'pods "gone" not found')
    body = bound_to(name="web", kind="ConfigMap")
    assert (body["code"], body["message"]) == (
        400,
        "cannot bind token to object of type /v1, Kind=ConfigMap",
    )
    body = expect_failure(
        kube.core.create_namespaced_service_account_token,
        "default",
        "default",
        {"spec": {"boundObjectRef": {"apiVersion": "v1", "kind": "Pod", "name": "web"}}},
    )
    assert body["message"] == (
        'cannot bind token for serviceaccount "default" to pod running with different '
        "serviceaccount name."
    )
    answer = kube.core.create_namespaced_service_account_token(
        "runner",
        "default",
        {
            "spec": {
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "web",
                    "uid": pod.metadata.uid,
                }
            }
        },
    )
    assert claims(answer.status.token)["kubernetes.io"]["pod"]["name"] == "web"


def test_max_token_expiration_shortens_with_a_warning(
    make_apiserver: Callable[..., ApiServer],
) -> None:
    server = make_apiserver(extend_token_expiration=False, max_token_expiration=1200)
    admin = Kube(server)
    try:
        code, answer, headers = admin.raw(
            "POST",
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            {"spec": {"expirationSeconds": 7200}},
        )
        assert code == 201 and answer["spec"]["expirationSeconds"] == 1200
        body = claims(answer["status"]["token"])
        assert body["exp"] - body["iat"] == 1200
        assert headers["Warning"] == (
            '299 - "requested expiration of 7200 seconds shortened to 1200 seconds"'
        )
    finally:
        admin.close()
    with pytest.raises(ValueError, match="must be at least 3607 s"):
        ApiServer(server.base_dir / "other", max_token_expiration=1200)


def test_token_review_audience_expiry_and_bound_pod(apiserver: ApiServer, kube: Kube) -> None:
    pod = kube.core.create_namespaced_pod(
        "default",
        {"metadata": {"name": "web"}, "spec": {"containers": [{"name": "a", "image": "b"}]}},
    )
    answer = kube.core.create_namespaced_service_account_token(
        "default",
        "default",
        {
            "spec": {
                "audiences": ["vault"],
                "boundObjectRef": {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "name": "web",
                    "uid": pod.metadata.uid,
                },
            }
        },
    )
    token = answer.status.token

    def review(audiences: list[str] | None = None) -> Any:
        spec: dict[str, Any] = {"token": token}
        if audiences is not None:
            spec["audiences"] = audiences
        return kube.authn.create_token_review({"spec": spec}).status

    status = review(["vault", "other"])
    assert status.authenticated and status.audiences == ["vault"]
    status = review()  # the API server's own audience: not this token's
    assert not status.authenticated and "invalid for the target audiences" in status.error
    assert anonymous_get(apiserver, "/api/v1/namespaces", token=token)[0] == 401

    with apiserver.store.lock:  # marked for deletion two minutes ago, not yet removed
        stored = apiserver.store.get("pods", "default", "web")
        assert stored is not None
        long_ago = dt.datetime.now(dt.UTC) - dt.timedelta(seconds=120)
        stored["metadata"]["deletionTimestamp"] = long_ago.strftime("%Y-%m-%dT%H:%M:%SZ")
        apiserver.store.update("pods", stored)
    status = review(["vault"])
    assert not status.authenticated
    assert status.error == "[invalid bearer token, service account token has been invalidated]"

    sa = apiserver.store.get("serviceaccounts", "default", "default")
    assert sa is not None
    expired, _ = apiserver.parts.issuer.issue(sa, -1, ["vault"], None)  # the API refuses < 600
    token = expired
    status = review(["vault"])
    assert status.error == "[invalid bearer token, service account token has expired]"
