"""RuntimeClasses on the test API server as a kubelet and kubectl meet them on a real cluster:
``node.k8s.io/v1``, cluster-scoped, validated (a DNS-label handler that may not change),
listed and watched by a node (the ``system:node`` rules allow it), printed by ``kubectl get``;
and the RuntimeClass admission plugin: a pod's class must exist, its overhead becomes the
pod's, a pod's own overhead must match it."""

from __future__ import annotations

import json
from typing import Any

import kubernetes.client
from kubernetes import watch

from tests.harness.apiserver.client import Kube, expect_failure

NODE_GROUPS = ["system:nodes"]


def runtime_class(name: str, handler: str, **extra: Any) -> dict[str, Any]:
    return {
        "apiVersion": "node.k8s.io/v1",
        "kind": "RuntimeClass",
        "metadata": {"name": name},
        "handler": handler,
        **extra,
    }


def pod(name: str, class_name: str, **spec: Any) -> dict[str, Any]:
    container = {"name": "c", "image": "busybox"}
    return {
        "metadata": {"name": name},
        "spec": {"runtimeClassName": class_name, "containers": [container], **spec},
    }


def test_a_class_is_created_validated_and_printed(kube: Kube) -> None:
    node_api = kubernetes.client.NodeV1Api(kube.api)
    created = node_api.create_runtime_class(runtime_class("sandboxed", "runsc"))
    assert created.metadata.namespace is None and created.handler == "runsc"
    body = expect_failure(node_api.create_runtime_class, runtime_class("bad", "Not_A_Label"))
    assert body["code"] == 422
    assert body["message"].startswith('RuntimeClass.node.k8s.io "bad" is invalid: handler: ')
    body = expect_failure(node_api.patch_runtime_class, "sandboxed", {"handler": "kata"})
    assert body["message"] == (
        'RuntimeClass.node.k8s.io "sandboxed" is invalid: handler: Invalid value: "kata": '
        "field is immutable"
    )
    shown = kube.kubectl("get", "runtimeclass").stdout.split()
    assert shown[:3] == ["NAME", "HANDLER", "AGE"] and shown[3:5] == ["sandboxed", "runsc"]


def test_a_node_lists_and_watches_every_class(kube: Kube) -> None:
    node = kube.as_user("system:node:n1", NODE_GROUPS)
    node_api = kubernetes.client.NodeV1Api(node.api)
    kubernetes.client.NodeV1Api(kube.api).create_runtime_class(runtime_class("fast", "runc"))
    listed = node_api.list_runtime_class()
    assert [c.metadata.name for c in listed.items] == ["fast"]
    stream = watch.Watch().stream(
        node_api.list_runtime_class,
        resource_version=listed.metadata.resource_version,
        timeout_seconds=5,
    )
    kubernetes.client.NodeV1Api(kube.api).create_runtime_class(runtime_class("slow", "runc"))
    event = next(stream)
    assert (event["type"], event["object"].metadata.name) == ("ADDED", "slow")
    body = expect_failure(node_api.delete_runtime_class, "fast")
    assert body["code"] == 403


def test_admission_refuses_an_unknown_class_and_sets_the_overhead(kube: Kube) -> None:
    body = expect_failure(kube.core.create_namespaced_pod, "default", pod("p", "missing"))
    assert body["code"] == 403
    assert body["message"] == (
        'pods "p" is forbidden: pod rejected: RuntimeClass "missing" not found'
    )
    overhead = {"podFixed": {"cpu": "250m", "memory": "64Mi"}}
    scheduling = {"nodeSelector": {"sandbox": "yes"}}
    kubernetes.client.NodeV1Api(kube.api).create_runtime_class(
        runtime_class("kata", "kata", overhead=overhead, scheduling=scheduling)
    )
    created = kube.core.create_namespaced_pod("default", pod("p", "kata"))
    assert created.spec.overhead == {"cpu": "250m", "memory": "64Mi"}
    assert created.spec.node_selector == {"sandbox": "yes"}
    other = pod("q", "kata", overhead={"cpu": "1"})
    body = expect_failure(kube.core.create_namespaced_pod, "default", other)
    assert body["message"].endswith(
        "pod rejected: Pod's Overhead doesn't match RuntimeClass's defined Overhead"
    )


def test_kubectl_applies_a_class_from_a_manifest(kube: Kube) -> None:
    manifest = json.dumps(runtime_class("test", "runc-test"))
    kube.kubectl("apply", "-f", "-", input=manifest)
    shown = json.loads(kube.kubectl("get", "runtimeclass", "test", "-o", "json").stdout)
    assert shown["handler"] == "runc-test" and shown["apiVersion"] == "node.k8s.io/v1"
