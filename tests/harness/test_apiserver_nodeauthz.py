"""The Node authorizer of the test API server: what a ``system:node:<n>`` user may read and
write, with the real 403 texts, through the official client, raw requests and real kubectl.
A node reads a secret, configmap or service account token only for a pod bound to it that
references it, and the answer follows pod deletions and bindings at once."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from kubernetes import watch

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube, expect_failure

NODE_GROUPS = ["system:nodes"]
NO_RELATIONSHIP = "no relationship found between node 'n1' and this object"


def as_node(kube: Kube, name: str = "n1") -> Kube:
    return kube.as_user(f"system:node:{name}", NODE_GROUPS)


def pod_body(name: str, node: str = "n1", **spec: Any) -> dict[str, Any]:
    containers = spec.pop("containers", None) or [{"name": "app", "image": "busybox:1.36"}]
    body: dict[str, Any] = {"metadata": {"name": name}, "spec": {"containers": containers, **spec}}
    if node:
        body["spec"]["nodeName"] = node
    return body


def make_objects(kube: Kube, *names: str, namespace: str = "default") -> None:
    for name in names:
        kube.core.create_namespaced_secret(
            namespace, {"metadata": {"name": name}, "stringData": {"k": name}}
        )
        kube.core.create_namespaced_config_map(
            namespace, {"metadata": {"name": name}, "data": {"k": name}}
        )


def forbidden(call: Callable[..., Any], *args: Any, **kwargs: Any) -> str:
    body = expect_failure(call, *args, **kwargs)
    assert (body["code"], body["reason"]) == (403, "Forbidden"), body
    return str(body["message"])


def test_a_node_reads_only_what_its_pods_reference(kube: Kube) -> None:
    names = ["vol", "proj", "env", "envfrom", "pull", "init", "other"]
    make_objects(kube, *names)
    kube.core.create_namespaced_pod(
        "default",
        pod_body(
            "web",
            volumes=[
                {"name": "s", "secret": {"secretName": "vol"}},
                {"name": "c", "configMap": {"name": "vol"}},
                {
                    "name": "p",
                    "projected": {
                        "sources": [{"secret": {"name": "proj"}}, {"configMap": {"name": "proj"}}]
                    },
                },
            ],
            imagePullSecrets=[{"name": "pull"}],
            initContainers=[
                {
                    "name": "init",
                    "image": "busybox:1.36",
                    "envFrom": [
                        {"secretRef": {"name": "init"}},
                        {"configMapRef": {"name": "init"}},
                    ],
                }
            ],
            containers=[
                {
                    "name": "app",
                    "image": "busybox:1.36",
                    "env": [
                        {"name": "A", "valueFrom": {"secretKeyRef": {"name": "env", "key": "k"}}},
                        {
                            "name": "B",
                            "valueFrom": {"configMapKeyRef": {"name": "env", "key": "k"}},
                        },
                    ],
                    "envFrom": [
                        {"secretRef": {"name": "envfrom"}},
                        {"configMapRef": {"name": "envfrom"}},
                    ],
                }
            ],
        ),
    )
    kubelet = as_node(kube)
    for name in ("vol", "proj", "pull", "init", "env", "envfrom"):
        if name != "pull":
            assert kubelet.core.read_namespaced_config_map(name, "default").data == {"k": name}
        assert kubelet.core.read_namespaced_secret(name, "default").data is not None
    assert kubelet.core.read_namespaced_config_map("kube-root-ca.crt", "default").data
    body = expect_failure(kubelet.core.read_namespaced_secret, "other", "default")
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'secrets "other" is forbidden: User "system:node:n1" cannot get resource '
        f'"secrets" in API group "" in the namespace "default": {NO_RELATIONSHIP}',
        "reason": "Forbidden",
        "details": {"name": "other", "kind": "secrets"},
        "code": 403,
    }
    assert forbidden(kubelet.core.read_namespaced_config_map, "pull", "default").endswith(
        NO_RELATIONSHIP  # imagePullSecrets name secrets only
    )
    assert forbidden(kubelet.core.read_namespaced_secret, "vol", "kube-system").endswith(
        NO_RELATIONSHIP  # the same name in another namespace
    )
    other_node = as_node(kube, "n2")
    assert forbidden(other_node.core.read_namespaced_secret, "vol", "default").endswith(
        "no relationship found between node 'n2' and this object"
    )
    assert kube.core.read_namespaced_secret("other", "default").data  # admin: anything


def test_list_and_watch_only_one_named_object(kube: Kube) -> None:
    make_objects(kube, "mine", "theirs")
    kube.core.create_namespaced_pod(
        "default", pod_body("web", volumes=[{"name": "c", "configMap": {"name": "mine"}}])
    )
    kubelet = as_node(kube)
    message = forbidden(kubelet.core.list_namespaced_config_map, "default")
    assert message == (
        'configmaps is forbidden: User "system:node:n1" cannot list resource "configmaps" in '
        'API group "" in the namespace "default": No Object name found'
    )
    listed = kubelet.core.list_namespaced_config_map("default", field_selector="metadata.name=mine")
    assert [c.metadata.name for c in listed.items] == ["mine"]
    message = forbidden(
        kubelet.core.list_namespaced_config_map, "default", field_selector="metadata.name=theirs"
    )
    assert message.startswith('configmaps "theirs" is forbidden: User "system:node:n1" cannot list')
    assert message.endswith(NO_RELATIONSHIP)
    message = forbidden(
        kubelet.core.list_config_map_for_all_namespaces, field_selector="metadata.name=mine"
    )
    assert message.endswith("can only read namespaced object of this type")
    message = forbidden(kubelet.core.delete_namespaced_config_map, "mine", "default")
    assert message.endswith("can only read resources of this type")

    stream = watch.Watch().stream(
        kubelet.core.list_namespaced_config_map,
        "default",
        field_selector="metadata.name=mine",
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    kube.core.patch_namespaced_config_map("mine", "default", {"data": {"k": "v2"}})
    event = next(stream)
    assert (event["type"], event["object"].data) == ("MODIFIED", {"k": "v2"})
    stream.close()
    code, body, _ = kubelet.raw(
        "GET", "/api/v1/namespaces/default/configmaps?watch=1&fieldSelector=metadata.name%3Dtheirs"
    )
    assert code == 403 and body["message"].endswith(NO_RELATIONSHIP)


def test_the_graph_follows_deletion_and_binding(kube: Kube) -> None:
    make_objects(kube, "cfg")
    uses_cfg = {"volumes": [{"name": "c", "configMap": {"name": "cfg"}}]}
    kube.core.create_namespaced_pod("default", pod_body("pending", node="", **uses_cfg))
    kubelet = as_node(kube)
    assert forbidden(kubelet.core.read_namespaced_config_map, "cfg", "default").endswith(
        NO_RELATIONSHIP  # not bound yet
    )
    binding = {"metadata": {"name": "pending"}, "target": {"kind": "Node", "name": "n1"}}
    code, _, _ = kube.raw("POST", "/api/v1/namespaces/default/pods/pending/binding", binding)
    assert code == 201
    assert kubelet.core.read_namespaced_config_map("cfg", "default").data == {"k": "cfg"}
    assert kubelet.core.read_namespaced_pod("pending", "default").spec.node_name == "n1"
    kube.core.delete_namespaced_pod("pending", "default", grace_period_seconds=30)
    assert kubelet.core.read_namespaced_config_map("cfg", "default")  # still terminating
    kube.core.delete_namespaced_pod("pending", "default", grace_period_seconds=0)
    assert forbidden(kubelet.core.read_namespaced_config_map, "cfg", "default").endswith(
        NO_RELATIONSHIP
    )
    assert forbidden(kubelet.core.read_namespaced_pod, "pending", "default").endswith(
        NO_RELATIONSHIP  # a pod that is gone is no relation either: 403, not 404
    )


def test_a_service_accounts_pull_secrets_reach_the_node(kube: Kube) -> None:
    make_objects(kube, "regcred", "unused")
    kube.core.create_namespaced_service_account(
        "default", {"metadata": {"name": "puller"}, "imagePullSecrets": [{"name": "regcred"}]}
    )
    pod = kube.core.create_namespaced_pod("default", pod_body("web", serviceAccountName="puller"))
    assert [r.name for r in pod.spec.image_pull_secrets] == ["regcred"]  # admission copied it
    kubelet = as_node(kube)
    assert kubelet.core.read_namespaced_secret("regcred", "default").metadata.name == "regcred"
    assert forbidden(kubelet.core.read_namespaced_secret, "unused", "default").endswith(
        NO_RELATIONSHIP
    )


def test_mirror_pods_grant_nothing(apiserver: ApiServer, kube: Kube) -> None:
    make_objects(kube, "cfg")
    mirror = pod_body("static-web", volumes=[{"name": "c", "configMap": {"name": "cfg"}}])
    mirror["metadata"].update(
        namespace="default", annotations={"kubernetes.io/config.mirror": "abc"}
    )
    apiserver.store.create("pods", mirror)  # admission would refuse it: the graph still must
    kubelet = as_node(kube)
    assert kubelet.core.read_namespaced_pod("static-web", "default").metadata.name
    assert forbidden(kubelet.core.read_namespaced_config_map, "cfg", "default").endswith(
        NO_RELATIONSHIP
    )


def test_service_accounts_tokens_only(kube: Kube) -> None:
    kube.core.create_namespaced_service_account("default", {"metadata": {"name": "runner"}})
    pod = kube.core.create_namespaced_pod("default", pod_body("web", serviceAccountName="runner"))
    kubelet = as_node(kube)
    message = forbidden(kubelet.core.read_namespaced_service_account, "runner", "default")
    assert message.endswith("can only create tokens for individual service accounts")
    request = {
        "spec": {
            "boundObjectRef": {
                "apiVersion": "v1",
                "kind": "Pod",
                "name": "web",
                "uid": pod.metadata.uid,
            }
        }
    }
    answer = kubelet.core.create_namespaced_service_account_token("runner", "default", request)
    assert answer.status.token.count(".") == 2
    message = forbidden(
        kubelet.core.create_namespaced_service_account_token, "default", "default", request
    )
    assert message == (
        'serviceaccounts "default" is forbidden: User "system:node:n1" cannot create resource '
        f'"serviceaccounts/token" in API group "" in the namespace "default": {NO_RELATIONSHIP}'
    )


def test_pods_nodes_and_the_static_rules(kube: Kube) -> None:
    kube.core.create_node({"metadata": {"name": "n2"}})
    kube.core.create_namespaced_pod("default", pod_body("mine"))
    kube.core.create_namespaced_pod("default", pod_body("theirs", node="n2"))
    kubelet = as_node(kube)
    kubelet.core.create_node({"metadata": {"name": "n1"}})
    message = forbidden(kubelet.core.list_pod_for_all_namespaces)
    assert message.endswith("can only list/watch pods with spec.nodeName field selector")
    mine = kubelet.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in mine.items] == ["mine"]
    forbidden(kubelet.core.list_pod_for_all_namespaces, field_selector="spec.nodeName=n2")
    assert forbidden(kubelet.core.read_namespaced_pod, "theirs", "default").endswith(
        NO_RELATIONSHIP
    )
    assert kubelet.core.read_node("n1").metadata.name == "n1"
    assert forbidden(kubelet.core.read_node, "n2").endswith(
        "node 'n1' cannot read 'n2', only its own Node object"
    )
    assert forbidden(kubelet.core.list_node).endswith(
        "node 'n1' cannot read all nodes, only its own Node object"
    )
    own = kubelet.core.list_node(field_selector="metadata.name=n1")
    assert [n.metadata.name for n in own.items] == ["n1"]
    assert [s.metadata.name for s in kubelet.core.list_service_for_all_namespaces().items] == [
        "kubernetes"
    ]
    assert kubelet.core.read_namespaced_endpoints("kubernetes", "default").subsets
    forbidden(kubelet.core.list_namespaced_endpoints, "default")
    assert forbidden(kubelet.core.list_namespace) == (
        'namespaces is forbidden: User "system:node:n1" cannot list resource "namespaces" in '
        'API group "" at the cluster scope'
    )
    event = {
        "metadata": {"name": "e1"},
        "regarding": {"kind": "Node", "name": "n1"},
        "reason": "Starting",
        "action": "Start",
        "type": "Normal",
        "eventTime": "2030-01-01T00:00:00.000000Z",
        "reportingController": "kubelet",
        "reportingInstance": "n1",
    }
    forbidden(kubelet.events.create_namespaced_event, "default", event)  # events.k8s.io: no
    for path in ("/api", "/apis", "/version", "/openapi/v3"):
        assert kubelet.raw("GET", path)[0] == 200, path
    code, body, _ = kubelet.raw("GET", "/metrics")
    assert (code, body["message"]) == (
        403,
        'forbidden: User "system:node:n1" cannot get path "/metrics"',
    )


def test_who_is_a_node(apiserver: ApiServer, kube: Kube) -> None:
    make_objects(kube, "s")
    nameless = kube.as_user("system:node:", NODE_GROUPS)
    assert forbidden(nameless.core.read_namespaced_secret, "s", "default").endswith(
        'unknown node for user "system:node:"'
    )
    not_in_group = kube.as_user("system:node:n1", ["developers"])
    assert not_in_group.core.read_namespaced_secret("s", "default").metadata.name == "s"
    review = kube.authz.create_subject_access_review(
        {
            "spec": {
                "user": "system:node:n1",
                "groups": NODE_GROUPS,
                "resourceAttributes": {
                    "verb": "list",
                    "resource": "pods",
                    "fieldSelector": {"rawSelector": "spec.nodeName=n1"},
                },
            }
        }
    )
    assert review.status.allowed is True
    review = kube.authz.create_subject_access_review(
        {
            "spec": {
                "user": "system:node:n1",
                "groups": NODE_GROUPS,
                "resourceAttributes": {
                    "verb": "get",
                    "resource": "secrets",
                    "namespace": "default",
                    "name": "s",
                },
            }
        }
    )
    assert (review.status.allowed, review.status.reason) == (False, NO_RELATIONSHIP)


def test_node_authorization_can_be_turned_off(make_apiserver: Callable[..., ApiServer]) -> None:
    server = make_apiserver(node_authorization=False)
    admin = Kube(server)
    try:
        make_objects(admin, "s")
        kubelet = as_node(admin)
        assert kubelet.core.read_namespaced_secret("s", "default").metadata.name == "s"
    finally:
        admin.close()


def test_kubectl_as_a_node(kube: Kube) -> None:
    make_objects(kube, "mine", "theirs")
    kube.core.create_namespaced_pod(
        "default", pod_body("web", volumes=[{"name": "s", "secret": {"secretName": "mine"}}])
    )
    kubelet = as_node(kube)
    shown = json.loads(kubelet.kubectl("get", "secret", "mine", "-o", "json").stdout)
    assert shown["metadata"]["name"] == "mine"
    result = kubelet.kubectl("get", "secret", "theirs", check=False)
    assert result.returncode == 1
    assert (
        'Error from server (Forbidden): secrets "theirs" is forbidden: User "system:node:n1" '
        f'cannot get resource "secrets" in API group "" in the namespace "default": '
        f"{NO_RELATIONSHIP}"
    ) in result.stderr
    names = kubelet.kubectl(
        "get", "pods", "-A", "--field-selector", "spec.nodeName=n1", "-o", "name"
    ).stdout.split()
    assert names == ["pod/web"]
    result = kubelet.kubectl("get", "pods", "-A", check=False)
    assert result.returncode == 1
    assert "can only list/watch pods with spec.nodeName field selector" in result.stderr
