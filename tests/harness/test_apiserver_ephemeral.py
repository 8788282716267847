"""The test API server's ``pods/<name>/ephemeralcontainers``, as the real one serves it:
GET, PATCH (strategic merge, JSON patch) and PUT of the Pod; only additions, each validated
as a container; nothing else of the pod changes; a new resourceVersion and a watch event;
refused for mirror pods, on create, through the pod itself, and to nodes."""

from __future__ import annotations

from typing import Any

from kubernetes import watch

from tests.harness.apiserver.client import Kube, expect_failure

PATH = "/api/v1/namespaces/default/pods/web/ephemeralcontainers"
JSON_PATCH = "application/json-patch+json"


def pod_body(name: str = "web", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": name, **meta},
        "spec": {
            "nodeName": "n1",
            "automountServiceAccountToken": False,
            "initContainers": [{"name": "setup", "image": "busybox:1.36"}],
            "containers": [{"name": "app", "image": "busybox:1.36"}],
        },
    }


def debugger(name: str = "debugger", **fields: Any) -> dict[str, Any]:
    return {"name": name, "image": "busybox:1.36", "targetContainerName": "app", **fields}


def add(kube: Kube, *containers: dict[str, Any]) -> Any:
    patch = {"spec": {"ephemeralContainers": list(containers)}}
    return kube.core.patch_namespaced_pod_ephemeralcontainers("web", "default", patch)


def test_a_strategic_merge_patch_adds_one_and_changes_nothing_else(kube: Kube) -> None:
    created = kube.core.create_namespaced_pod("default", pod_body(labels={"a": "1"}))
    patch = {
        "metadata": {"labels": {"a": "2"}},
        "spec": {"ephemeralContainers": [debugger()], "activeDeadlineSeconds": 5},
        "status": {"phase": "Failed"},
    }
    pod = kube.core.patch_namespaced_pod_ephemeralcontainers("web", "default", patch)
    (added,) = pod.spec.ephemeral_containers
    assert (added.name, added.target_container_name) == ("debugger", "app")
    assert added.termination_message_policy == "File"  # defaulted as any container
    assert added.image_pull_policy == "IfNotPresent"
    assert pod.metadata.labels == {"a": "1"} and pod.spec.active_deadline_seconds is None
    assert pod.status.phase == "Pending"
    assert int(pod.metadata.resource_version) > int(created.metadata.resource_version)
    read = kube.core.read_namespaced_pod_ephemeralcontainers("web", "default")
    assert read.kind == "Pod" and read.spec.ephemeral_containers[0].name == "debugger"


def test_a_json_patch_and_a_put_add_more(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body())
    add(kube, debugger("one"))
    operation = [{"op": "add", "path": "/spec/ephemeralContainers/-", "value": debugger("two")}]
    code, pod, _ = kube.raw("PATCH", PATH, operation, JSON_PATCH)
    assert code == 200, pod
    assert [c["name"] for c in pod["spec"]["ephemeralContainers"]] == ["one", "two"]
    pod["spec"]["ephemeralContainers"].append(debugger("three"))
    code, pod, _ = kube.raw("PUT", PATH, pod)
    assert code == 200, pod
    assert [c["name"] for c in pod["spec"]["ephemeralContainers"]] == ["one", "two", "three"]


def test_a_watch_sees_the_addition(kube: Kube) -> None:
    created = kube.core.create_namespaced_pod("default", pod_body())
    add(kube, debugger())
    stream = watch.Watch().stream(
        kube.core.list_namespaced_pod,
        "default",
        resource_version=created.metadata.resource_version,
        timeout_seconds=1,
        field_selector="metadata.name=web",
    )
    seen = [(e["type"], e["raw_object"]["spec"].get("ephemeralContainers", [])) for e in stream]
    assert [(kind, [c["name"] for c in added]) for kind, added in seen] == [
        ("MODIFIED", ["debugger"])
    ]


def test_changing_or_removing_one_is_invalid(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body())
    add(kube, debugger())
    changed = expect_failure(add, kube, debugger(image="busybox:1.37"))
    assert (changed["code"], changed["reason"]) == (422, "Invalid")
    assert changed["message"].startswith(
        'Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral '
        'containers "debugger" may not be changed\n'
    )
    _, pod, _ = kube.raw("GET", PATH)
    pod["spec"]["ephemeralContainers"] = []
    code, body, _ = kube.raw("PUT", PATH, pod)
    assert (code, body["reason"]) == (422, "Invalid")
    assert body["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers: Forbidden: existing ephemeral '
        'containers "debugger" may not be removed\n'
    )


def test_each_one_is_validated_as_a_container(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body())
    body = expect_failure(add, kube, debugger(targetContainerName="nope"))
    assert body["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers[0].targetContainerName: Not found: "nope"'
    )
    body = expect_failure(add, kube, debugger(ports=[{"containerPort": 80}]))
    assert body["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers[0].ports: '
        "Forbidden: cannot be set for an Ephemeral Container"
    )
    body = expect_failure(add, kube, debugger(name="app"))
    assert body["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers[0].name: Duplicate value: "app"'
    )
    body = expect_failure(add, kube, {"name": "noimage"})
    assert body["details"]["causes"][0]["field"] == "spec.ephemeralContainers[0].image"
    assert add(kube, debugger(targetContainerName="setup")).spec.ephemeral_containers


def test_only_the_subresource_adds_them(kube: Kube) -> None:
    body = pod_body()
    body["spec"]["ephemeralContainers"] = [debugger()]
    refused = expect_failure(kube.core.create_namespaced_pod, "default", body)
    assert refused["message"] == (
        'Pod "web" is invalid: spec.ephemeralContainers: Forbidden: cannot be set on create'
    )
    kube.core.create_namespaced_pod("default", pod_body())
    patch = {"spec": {"ephemeralContainers": [debugger()]}}
    refused = expect_failure(kube.core.patch_namespaced_pod, "web", "default", patch)
    assert "pod updates may not change fields other than" in refused["message"]


def test_a_mirror_pod_may_not_have_any(kube: Kube) -> None:
    mirror = pod_body(annotations={"kubernetes.io/config.mirror": "abc"})
    kube.core.create_namespaced_pod("default", mirror)
    body = expect_failure(add, kube, debugger())
    assert body["message"] == (
        'Pod "web" is invalid: []: Forbidden: static pods do not support ephemeral containers'
    )


def test_a_node_may_not_write_them(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body())
    node = kube.as_user("system:node:n1", ["system:nodes"])
    body = expect_failure(add, node, debugger())
    assert (body["code"], body["reason"]) == (403, "Forbidden")
    assert body["message"].startswith(
        'pods "web" is forbidden: User "system:node:n1" cannot patch resource '
        '"pods/ephemeralcontainers" in API group "" in the namespace "default"'
    )
    assert not kube.core.read_namespaced_pod("web", "default").spec.ephemeral_containers


def test_an_ended_one_may_not_be_shown_running_again(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod_body())
    add(kube, debugger())
    ended = {"name": "debugger", "image": "busybox:1.36", "imageID": "", "ready": False,
             "restartCount": 0, "state": {"terminated": {"exitCode": 0}}}  # fmt: skip
    status = {"status": {"ephemeralContainerStatuses": [ended]}}
    kube.core.patch_namespaced_pod_status("web", "default", status)
    again = {**ended, "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}
    body = expect_failure(
        kube.core.patch_namespaced_pod_status,
        "web",
        "default",
        {"status": {"ephemeralContainerStatuses": [again]}},
    )
    assert body["message"] == (
        'Pod "web" is invalid: status.ephemeralContainerStatuses[0].state: '
        "Forbidden: may not be transitioned to non-terminated state"
    )
