"""The test API server's ServiceAccount admission and image pull secrets, as the real one:
a pod that names none gets its service account's, one that names some keeps its own, and
a mirror pod may name none."""

from __future__ import annotations

from typing import Any

from tests.harness.apiserver.client import Kube, expect_failure


def pod_body(name: str, **spec: Any) -> dict[str, Any]:
    containers = [{"name": "app", "image": "registry.example/app:v1"}]
    return {"metadata": {"name": name}, "spec": {"containers": containers, **spec}}


def pull_secrets(kube: Kube, body: dict[str, Any]) -> list[str]:
    pod = kube.core.create_namespaced_pod("default", body)
    return [ref.name for ref in pod.spec.image_pull_secrets or []]


def test_a_pod_gets_its_service_accounts_pull_secrets_unless_it_names_some(kube: Kube) -> None:
    assert pull_secrets(kube, pod_body("bare")) == []
    kube.core.create_namespaced_service_account(
        "default",
        {"metadata": {"name": "puller"}, "imagePullSecrets": [{"name": "a"}, {"name": "b"}]},
    )
    assert pull_secrets(kube, pod_body("inherits", serviceAccountName="puller")) == ["a", "b"]
    own = pod_body("own", serviceAccountName="puller", imagePullSecrets=[{"name": "c"}])
    assert pull_secrets(kube, own) == ["c"]


def test_a_mirror_pod_may_not_name_pull_secrets(kube: Kube) -> None:
    mirror = pod_body("static-web", imagePullSecrets=[{"name": "a"}])
    mirror["metadata"]["annotations"] = {"kubernetes.io/config.mirror": "abc123"}
    body = expect_failure(kube.core.create_namespaced_pod, "default", mirror)
    refusal = 'pods "static-web" is forbidden: a mirror pod may not reference secrets'
    assert body["message"] == refusal
