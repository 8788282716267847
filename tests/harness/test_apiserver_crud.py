"""The test API server's object semantics, through the official client and real kubectl:
create/get/list/update/patch/delete, the error Statuses, validation, field validation,
the status subresource, selectors and paging."""

from __future__ import annotations

import json
from typing import Any

from kubernetes import client

from tests.harness.apiserver.client import Kube, expect_failure

SMP = "application/strategic-merge-patch+json"
MERGE = "application/merge-patch+json"


def make_pod(name: str, **labels: str) -> client.V1Pod:
    return client.V1Pod(
        metadata=client.V1ObjectMeta(name=name, labels=labels or None),
        spec=client.V1PodSpec(containers=[client.V1Container(name="app", image="busybox:1.36")]),
    )


def test_create_sets_system_fields_and_pod_defaults(kube: Kube) -> None:
    pod = kube.core.create_namespaced_pod("default", make_pod("web"))
    meta, spec = pod.metadata, pod.spec
    assert meta.uid and meta.creation_timestamp and int(meta.resource_version) > 1
    assert meta.generation is None  # pods have no generation in 1.32
    assert spec.restart_policy == "Always" and spec.termination_grace_period_seconds == 30
    assert spec.dns_policy == "ClusterFirst" and spec.scheduler_name == "default-scheduler"
    assert spec.service_account_name == "default" and spec.enable_service_links is True
    assert spec.priority == 0 and spec.preemption_policy == "PreemptLowerPriority"
    container = spec.containers[0]
    assert container.image_pull_policy == "IfNotPresent"
    assert container.termination_message_path == "/dev/termination-log"
    token_volume = spec.volumes[0]
    assert token_volume.name.startswith("kube-api-access-")
    assert [
        s.service_account_token.expiration_seconds
        for s in token_volume.projected.sources
        if s.service_account_token
    ] == [3607]
    assert container.volume_mounts[0].mount_path == "/var/run/secrets/kubernetes.io/serviceaccount"
    assert {t.key for t in spec.tolerations} == {
        "node.kubernetes.io/not-ready",
        "node.kubernetes.io/unreachable",
    }
    assert pod.status.phase == "Pending" and pod.status.qos_class == "BestEffort"


def test_generate_name_and_latest_tag_pull_policy(kube: Kube) -> None:
    body = {
        "metadata": {"generateName": "job-"},
        "spec": {
            "containers": [{"name": "c", "image": "nginx"}],
            "automountServiceAccountToken": False,
        },
    }
    pod = kube.core.create_namespaced_pod("default", body)
    assert pod.metadata.name.startswith("job-") and len(pod.metadata.name) == 9
    assert pod.spec.containers[0].image_pull_policy == "Always"
    assert not pod.spec.volumes


def test_already_exists_and_not_found_statuses(kube: Kube) -> None:
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}})
    body = expect_failure(
        kube.core.create_namespaced_config_map, "default", {"metadata": {"name": "cfg"}}
    )
    assert body == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": 'configmaps "cfg" already exists',
        "reason": "AlreadyExists",
        "details": {"name": "cfg", "kind": "configmaps"},
        "code": 409,
    }
    body = expect_failure(kube.core.read_namespaced_config_map, "nope", "default")
    assert (body["reason"], body["message"]) == ("NotFound", 'configmaps "nope" not found')
    body = expect_failure(kube.coordination.read_namespaced_lease, "nope", "default")
    assert body["message"] == 'leases.coordination.k8s.io "nope" not found'
    assert body["details"] == {"name": "nope", "group": "coordination.k8s.io", "kind": "leases"}
    body = expect_failure(
        kube.core.create_namespaced_config_map, "ghost", {"metadata": {"name": "x"}}
    )
    assert (body["code"], body["message"]) == (404, 'namespaces "ghost" not found')


def test_stale_update_is_a_conflict(kube: Kube) -> None:
    first = kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "cfg"}, "data": {"a": "1"}}
    )
    first.data = {"a": "2"}
    kube.core.replace_namespaced_config_map("cfg", "default", first)
    first.data = {"a": "3"}
    body = expect_failure(kube.core.replace_namespaced_config_map, "cfg", "default", first)
    assert body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on configmaps "cfg": the object has been modified; '
        "please apply your changes to the latest version and try again"
    )
    stale = {"metadata": {"resourceVersion": first.metadata.resource_version}, "data": {"a": "4"}}
    body = expect_failure(kube.core.patch_namespaced_config_map, "cfg", "default", stale)
    assert body["reason"] == "Conflict"


def test_unchanged_update_writes_nothing(kube: Kube) -> None:
    cfg = kube.core.create_namespaced_config_map("default", {"metadata": {"name": "cfg"}})
    same = kube.core.patch_namespaced_config_map("cfg", "default", {"metadata": {"labels": {}}})
    assert same.metadata.resource_version == cfg.metadata.resource_version


def test_validation_errors_are_422_with_causes(kube: Kube) -> None:
    body = expect_failure(
        kube.core.create_namespaced_pod,
        "default",
        {"metadata": {"name": "Bad_Name"}, "spec": {"containers": [{"name": "c"}]}},
    )
    assert body["reason"] == "Invalid" and body["details"]["kind"] == "Pod"
    fields = {c["field"]: c for c in body["details"]["causes"]}
    assert fields["spec.containers[0].image"]["reason"] == "FieldValueRequired"
    assert fields["metadata.name"]["message"].startswith('Invalid value: "Bad_Name": a lowercase')
    assert body["message"].startswith('Pod "Bad_Name" is invalid: [')
    body = expect_failure(
        kube.core.create_namespaced_pod,
        "default",
        {"metadata": {"name": "p"}, "spec": {"containers": []}},
    )
    assert body["message"] == 'Pod "p" is invalid: spec.containers: Required value'


def test_pod_spec_is_immutable_but_image_is_not(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", make_pod("web"))
    patch = {"spec": {"containers": [{"name": "app", "image": "busybox:1.37"}]}}
    pod = kube.core.patch_namespaced_pod("web", "default", patch)
    assert pod.spec.containers[0].image == "busybox:1.37"
    body = expect_failure(
        kube.core.patch_namespaced_pod, "web", "default", {"spec": {"nodeName": "elsewhere"}}
    )
    assert body["reason"] == "Invalid"
    assert body["details"]["causes"][0]["field"] == "spec"
    assert "pod updates may not change fields other than" in body["message"]


def test_wrong_types_and_unknown_fields(kube: Kube) -> None:
    path = "/api/v1/namespaces/default/configmaps"
    code, body, headers = kube.raw("POST", path, {"metadata": {"name": "a"}, "bogus": 1})
    assert code == 201 and "bogus" not in body
    assert headers["Warning"] == '299 - "unknown field \\"bogus\\""'
    code, body, _ = kube.raw(
        "POST", path + "?fieldValidation=Strict", {"metadata": {"name": "b", "bogus": 1}}
    )
    assert (code, body["reason"]) == (400, "BadRequest")
    assert body["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: '
        'strict decoding error: unknown field "metadata.bogus"'
    )
    code, body, _ = kube.raw("POST", path, {"metadata": {"name": "c"}, "data": {"a": 1}})
    assert code == 400 and body["message"] == (
        'ConfigMap in version "v1" cannot be handled as a ConfigMap: json: cannot unmarshal '
        "number into Go struct field ConfigMap.data.a of type string"
    )
    result = kube.kubectl(
        "create",
        "-f",
        "-",
        check=False,
        input=json.dumps(
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "d"}, "bogus": 1}
        ),
    )
    assert result.returncode == 1
    assert 'strict decoding error: unknown field "bogus"' in result.stderr


def test_status_subresource_isolation(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", make_pod("web"))
    pod = kube.core.patch_namespaced_pod(
        "web", "default", {"metadata": {"labels": {"x": "y"}}, "status": {"phase": "Running"}}
    )
    assert pod.status.phase == "Pending" and pod.metadata.labels == {"x": "y"}
    pod = kube.core.patch_namespaced_pod_status(
        "web",
        "default",
        {
            "spec": {"activeDeadlineSeconds": 5},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]},
        },
    )
    assert pod.status.phase == "Running" and pod.spec.active_deadline_seconds is None
    assert pod.status.conditions[0].last_probe_time is None
    pod = kube.core.patch_namespaced_pod_status(
        "web",
        "default",
        {
            "status": {
                "$setElementOrder/conditions": [{"type": "PodScheduled"}, {"type": "Ready"}],
                "conditions": [
                    {"type": "PodScheduled", "status": "True"},
                    {"type": "Ready", "status": "False"},
                ],
            }
        },
    )
    assert [(c.type, c.status) for c in pod.status.conditions] == [
        ("PodScheduled", "True"),
        ("Ready", "False"),
    ]


def test_strategic_merge_patch_keys_and_directives(kube: Kube) -> None:
    kube.core.create_namespaced_pod(
        "default",
        {
            "metadata": {"name": "web", "finalizers": ["a.example/x"]},
            "spec": {
                "containers": [
                    {"name": "app", "image": "busybox:1", "env": [{"name": "A", "value": "1"}]},
                    {"name": "side", "image": "busybox:1"},
                ]
            },
        },
    )
    pod = kube.core.patch_namespaced_pod(
        "web",
        "default",
        {
            "metadata": {"finalizers": ["b.example/y"]},
            "spec": {"containers": [{"name": "side", "image": "busybox:2"}]},
        },
    )
    assert [c.image for c in pod.spec.containers] == ["busybox:1", "busybox:2"]
    assert pod.spec.containers[0].env[0].value == "1"
    assert pod.metadata.finalizers == ["a.example/x", "b.example/y"]
    pod = kube.core.patch_namespaced_pod(
        "web",
        "default",
        {"metadata": {"$deleteFromPrimitiveList/finalizers": ["a.example/x", "b.example/y"]}},
    )
    assert pod.metadata.finalizers is None


def test_json_patch_test_operation(kube: Kube) -> None:
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c"}, "data": {"k": "v"}}
    )
    ops = [
        {"op": "test", "path": "/data/k", "value": "v"},
        {"op": "replace", "path": "/data/k", "value": "w"},
    ]
    assert kube.core.patch_namespaced_config_map("c", "default", ops).data == {"k": "w"}
    body = expect_failure(kube.core.patch_namespaced_config_map, "c", "default", ops)
    assert (body["code"], body["reason"]) == (422, "Invalid")
    assert body["message"] == "the server rejected our request due to an error in our request"
    result = kube.kubectl(
        "patch", "configmap", "c", "--type=merge", "-p", '{"data":{"k":null,"m":"n"}}'
    )
    assert "patched" in result.stdout
    assert kube.core.read_namespaced_config_map("c", "default").data == {"m": "n"}


def test_server_side_apply_is_refused(kube: Kube) -> None:
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    body = expect_failure(
        kube.core.patch_namespaced_config_map,
        "c",
        "default",
        {"data": {}},
        _content_type="application/apply-patch+yaml",
    )
    assert (body["code"], body["reason"]) == (415, "UnsupportedMediaType")


def test_list_selectors_and_paging(kube: Kube) -> None:
    for i in range(5):
        kube.core.create_namespaced_config_map(
            "default",
            {
                "metadata": {
                    "name": f"c{i}",
                    "labels": {"i": str(i), "even": str(i % 2 == 0).lower()},
                }
            },
        )
    names = [
        c.metadata.name
        for c in kube.core.list_namespaced_config_map(
            "default", label_selector="even=true,i notin (4)"
        ).items
    ]
    assert names == ["c0", "c2"]
    names = [
        c.metadata.name
        for c in kube.core.list_namespaced_config_map(
            "default", field_selector="metadata.name!=c1", label_selector="i"
        ).items
    ]
    assert names == ["c0", "c2", "c3", "c4"]
    page = kube.core.list_namespaced_config_map("default", limit=2, label_selector="i")
    assert [c.metadata.name for c in page.items] == ["c0", "c1"] and page.metadata._continue
    kube.core.delete_namespaced_config_map("c2", "default")
    rest = kube.core.list_namespaced_config_map(
        "default", limit=10, label_selector="i", _continue=page.metadata._continue
    )
    assert [c.metadata.name for c in rest.items] == ["c2", "c3", "c4"]  # the first page's view
    assert rest.metadata.resource_version == page.metadata.resource_version
    page = kube.core.list_namespaced_config_map("default", limit=1)
    assert page.metadata.remaining_item_count == 4  # c0 c1 c3 c4 kube-root-ca.crt
    body = expect_failure(kube.core.list_namespaced_pod, "default", field_selector="spec.bogus=1")
    assert (body["code"], body["message"]) == (400, "field label not supported: spec.bogus")


def test_pod_field_selectors(kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", make_pod("a"))
    kube.core.create_namespaced_pod(
        "default",
        {
            **make_pod("b").to_dict(),
            "spec": {"nodeName": "n1", "containers": [{"name": "app", "image": "busybox"}]},
        },
    )
    on_node = kube.core.list_pod_for_all_namespaces(field_selector="spec.nodeName=n1")
    assert [p.metadata.name for p in on_node.items] == ["b"]
    pending = kube.core.list_namespaced_pod(
        "default", field_selector="status.phase=Pending,spec.nodeName="
    )
    assert [p.metadata.name for p in pending.items] == ["a"]


def test_delete_returns_status_or_object(kube: Kube) -> None:
    cfg = kube.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    status = kube.core.delete_namespaced_config_map("c", "default")
    assert status == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "details": {"name": "c", "kind": "configmaps", "uid": cfg.metadata.uid},
    }
    kube.core.create_namespaced_config_map("default", {"metadata": {"name": "c"}})
    body = expect_failure(
        kube.core.delete_namespaced_config_map,
        "c",
        "default",
        body=client.V1DeleteOptions(preconditions=client.V1Preconditions(uid="x")),
    )
    assert body["reason"] == "Conflict"
    assert "Precondition failed: UID in precondition: x" in body["message"]


def test_finalizers_hold_an_object_until_emptied(kube: Kube) -> None:
    kube.core.create_namespaced_config_map(
        "default", {"metadata": {"name": "c", "finalizers": ["example.com/hold"]}}
    )
    held = kube.core.delete_namespaced_config_map("c", "default")
    assert held["kind"] == "ConfigMap" and held["metadata"]["deletionTimestamp"]
    cfg = kube.core.read_namespaced_config_map("c", "default")
    assert cfg.metadata.deletion_grace_period_seconds == 0
    body = expect_failure(
        kube.core.patch_namespaced_config_map,
        "c",
        "default",
        {"metadata": {"finalizers": ["example.com/new"]}},
    )
    assert "no new finalizers can be added if the object is being deleted" in body["message"]
    kube.core.patch_namespaced_config_map(
        "c", "default", {"metadata": {"finalizers": None}}, _content_type=MERGE
    )
    expect_failure(kube.core.read_namespaced_config_map, "c", "default")


def test_namespace_deletion_removes_its_objects(kube: Kube) -> None:
    kube.core.create_namespace({"metadata": {"name": "team"}})
    assert kube.core.read_namespaced_service_account("default", "team")
    assert kube.core.read_namespaced_config_map("kube-root-ca.crt", "team").data["ca.crt"]
    kube.core.create_namespaced_config_map("team", {"metadata": {"name": "c"}})
    kube.core.delete_namespace("team")
    expect_failure(kube.core.read_namespace, "team")
    body = expect_failure(kube.core.delete_namespace, "default")
    assert body["message"] == 'namespaces "default" is forbidden: this namespace may not be deleted'


def test_pod_generation_tracking_when_enabled(make_apiserver: Any) -> None:
    kube = Kube(make_apiserver(pod_generation=True))
    try:
        pod = kube.core.create_namespaced_pod("default", make_pod("web"))
        assert pod.metadata.generation == 1
        labelled = kube.core.patch_namespaced_pod(
            "web", "default", {"metadata": {"labels": {"a": "b"}}}
        )
        assert labelled.metadata.generation == 1
        status = kube.core.patch_namespaced_pod_status(
            "web", "default", {"status": {"phase": "Running"}}
        )
        assert status.metadata.generation == 1
        image = {"spec": {"containers": [{"name": "app", "image": "busybox:2"}]}}
        assert kube.core.patch_namespaced_pod("web", "default", image).metadata.generation == 2
    finally:
        kube.close()


def test_discovery_and_health(kube: Kube) -> None:
    assert kube.raw("GET", "/healthz", accept="*/*")[:2] == (200, "ok")
    code, version, _ = kube.raw("GET", "/version")
    assert code == 200 and version["gitVersion"].startswith("v1.32.")
    code, groups, _ = kube.raw("GET", "/apis")
    assert {g["name"] for g in groups["groups"]} >= {
        "coordination.k8s.io",
        "events.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
    }
    code, core, _ = kube.raw("GET", "/api/v1")
    pods = next(r for r in core["resources"] if r["name"] == "pods")
    assert pods["shortNames"] == ["po"] and "watch" in pods["verbs"]
    assert {
        "pods/status",
        "pods/log",
        "pods/exec",
        "pods/binding",
        "nodes/proxy",
        "serviceaccounts/token",
    } <= {r["name"] for r in core["resources"]}
    assert kube.raw("GET", "/api/v1/nope")[0] == 404
    resources = kube.kubectl("api-resources", "--api-group=coordination.k8s.io").stdout
    assert "leases" in resources


def test_kubectl_generators_send_protobuf(kube: Kube) -> None:
    kube.kubectl("create", "namespace", "team")
    kube.kubectl("create", "configmap", "cfg", "-n", "team", "--from-literal=a=b")
    kube.kubectl("create", "secret", "generic", "pw", "-n", "team", "--from-literal=p=q")
    kube.kubectl("create", "serviceaccount", "bot", "-n", "team")
    token = kube.kubectl("create", "token", "bot", "-n", "team", "--duration=15m").stdout
    assert token.count(".") == 2
    assert kube.core.read_namespaced_config_map("cfg", "team").data == {"a": "b"}
    secret = kube.core.read_namespaced_secret("pw", "team")
    assert secret.type == "Opaque" and secret.data == {"p": "cQ=="}


def test_kubectl_create_apply_and_get(kube: Kube) -> None:
    manifest = json.dumps(
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "app"}, "data": {"v": "1"}}
    )
    assert "created" in kube.kubectl("apply", "-f", "-", input=manifest).stdout
    assert (
        "configured"
        in kube.kubectl("apply", "-f", "-", input=manifest.replace('"1"', '"2"')).stdout
    )
    assert kube.core.read_namespaced_config_map("app", "default").data == {"v": "2"}
    listed = kube.kubectl("get", "configmaps").stdout.splitlines()
    assert listed[0].split() == ["NAME", "DATA", "AGE"]
    assert any(line.split()[:2] == ["app", "1"] for line in listed)
    yaml_out = kube.kubectl("get", "configmap", "app", "-o", "jsonpath={.data.v}").stdout
    assert yaml_out == "2"
