"""What a node agent does against the test API server, as a ``system:node:<name>`` user:
register its Node, heartbeat through ``nodes/status`` and its Lease, see pods bound to it,
write pod status, finish graceful deletions, create mirror pods and events; and what kubectl
shows of all that (server-side tables, describe, events)."""

from __future__ import annotations

import datetime as dt
import json
from typing import Any

from kubernetes import client, watch

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube, eventually, expect_failure

NODE = "n1"
NODE_GROUPS = ["system:nodes"]


def now(micro: bool = False) -> str:
    stamp = dt.datetime.now(dt.UTC)
    return stamp.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if micro else "%Y-%m-%dT%H:%M:%SZ")


def node_body(name: str = NODE, ready: str = "True", port: int = 10250) -> dict[str, Any]:
    return {
        "metadata": {
            "name": name,
            "labels": {"kubernetes.io/hostname": name, "kubernetes.io/os": "linux"},
        },
        "status": {
            "conditions": [
                {
                    "type": "Ready",
                    "status": ready,
                    "reason": "KubeletReady",
                    "message": "kubelet is posting ready status",
                    "lastHeartbeatTime": now(),
                    "lastTransitionTime": now(),
                }
            ],
            "addresses": [
                {"type": "InternalIP", "address": "127.0.0.1"},
                {"type": "Hostname", "address": name},
            ],
            "capacity": {"cpu": "2", "memory": "4096Mi", "pods": "110"},
            "daemonEndpoints": {"kubeletEndpoint": {"Port": port}},
            "nodeInfo": {
                "kubeletVersion": "v1.32.0-pkletd",
                "osImage": "Debian GNU/Linux 12",
                "kernelVersion": "6.1.0",
                "containerRuntimeVersion": "containerd://1.7",
                "operatingSystem": "linux",
                "architecture": "amd64",
                "bootID": "b",
                "machineID": "m",
                "systemUUID": "s",
                "kubeProxyVersion": "",
            },
        },
    }


def as_node(kube: Kube, name: str = NODE) -> Kube:
    return kube.as_user(f"system:node:{name}", NODE_GROUPS)


def pod_body(name: str, node: str = "", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "metadata": {"name": name},
        "spec": {"containers": [{"name": "app", "image": "busybox:1.36"}], **spec},
    }
    if node:
        body["spec"]["nodeName"] = node
    return body


def test_node_registers_and_heartbeats(kube: Kube) -> None:
    kubelet = as_node(kube)
    node = kubelet.core.create_node(node_body())
    assert node.status.allocatable == {"cpu": "2", "memory": "4Gi", "pods": "110"}
    code, raw, _ = kubelet.raw("GET", f"/api/v1/nodes/{NODE}")
    assert code == 200 and raw["status"]["conditions"][0]["reason"] == "KubeletReady"
    heartbeat = {
        "status": {
            "$setElementOrder/conditions": [{"type": "Ready"}],
            "conditions": [{"type": "Ready", "lastHeartbeatTime": "2030-01-01T00:00:00Z"}],
        }
    }
    updated = kubelet.core.patch_node_status(NODE, heartbeat)
    assert updated.status.conditions[0].reason == "KubeletReady"
    assert updated.metadata.resource_version != node.metadata.resource_version
    lease = kubelet.coordination.create_namespaced_lease(
        "kube-node-lease",
        {
            "metadata": {
                "name": NODE,
                "ownerReferences": [
                    {"apiVersion": "v1", "kind": "Node", "name": NODE, "uid": node.metadata.uid}
                ],
            },
            "spec": {"holderIdentity": NODE, "leaseDurationSeconds": 40, "renewTime": now(True)},
        },
    )
    lease.spec.renew_time = dt.datetime.now(dt.UTC)
    renewed = kubelet.coordination.replace_namespaced_lease(NODE, "kube-node-lease", lease)
    assert renewed.spec.renew_time.microsecond == lease.spec.renew_time.microsecond
    kube.core.create_node(node_body("n2"))
    body = expect_failure(kubelet.core.patch_node, "n2", {"metadata": {"labels": {"a": "b"}}})
    assert (
        body["message"] == 'nodes "n2" is forbidden: node "n1" is not allowed to modify node "n2"'
    )
    body = expect_failure(
        kubelet.coordination.create_namespaced_lease,
        "default",
        {"metadata": {"name": NODE}, "spec": {}},
    )
    assert "can only access leases in the" in body["message"]
    body = expect_failure(
        kubelet.core.patch_node, NODE, {"spec": {"taints": [{"key": "k", "effect": "NoSchedule"}]}}
    )
    assert body["message"].endswith('node "n1" is not allowed to modify taints')


def test_unset_required_fields_come_back_as_zero_values(kube: Kube) -> None:
    body = node_body("bare")
    body["status"]["nodeInfo"] = {"kubeletVersion": "v1"}
    code, node, _ = kube.raw("POST", "/api/v1/nodes", body)
    assert code == 201 and node["status"]["nodeInfo"]["machineID"] == ""
    assert kube.core.read_node("bare").status.node_info.kubelet_version == "v1"


def test_micro_time_fields_need_microseconds(kube: Kube) -> None:
    code, body, _ = kube.raw(
        "POST",
        "/apis/coordination.k8s.io/v1/namespaces/default/leases",
        {"metadata": {"name": "l"}, "spec": {"renewTime": "2024-01-01T00:00:00+00:00"}},
    )
    assert code == 400
    assert body["message"].endswith(
        'parsing time "2024-01-01T00:00:00+00:00" as '
        '"2006-01-02T15:04:05.000000Z07:00": cannot parse '
        '"+00:00" as ".000000"'
    )


def test_status_writes_by_the_node_and_graceful_deletion(kube: Kube) -> None:
    kubelet = as_node(kube)
    kubelet.core.create_node(node_body())
    pod = kube.core.create_namespaced_pod("default", pod_body("web", NODE))
    status = {
        "metadata": {"uid": pod.metadata.uid},
        "status": {
            "phase": "Running",
            "podIP": "10.88.0.5",
            "podIPs": [{"ip": "10.88.0.5"}],
            "conditions": [{"type": "Ready", "status": "True", "lastTransitionTime": now()}],
            "containerStatuses": [
                {
                    "name": "app",
                    "ready": True,
                    "restartCount": 0,
                    "image": "busybox:1.36",
                    "imageID": "sha256:1",
                    "state": {"running": {"startedAt": now()}},
                }
            ],
        },
    }
    running = kubelet.core.patch_namespaced_pod_status("web", "default", status)
    assert running.status.phase == "Running" and running.status.qos_class == "BestEffort"
    stream = watch.Watch().stream(
        kube.core.list_namespaced_pod,
        "default",
        timeout_seconds=2,
        resource_version=running.metadata.resource_version,
    )
    deleting = kube.core.delete_namespaced_pod("web", "default")
    assert deleting.metadata.deletion_grace_period_seconds == 30
    assert kube.core.read_namespaced_pod("web", "default").metadata.deletion_timestamp
    shorter = kube.core.delete_namespaced_pod("web", "default", grace_period_seconds=60)
    assert shorter.metadata.deletion_grace_period_seconds == 30  # may only shorten
    # With a body, the server reads DeleteOptions from it and ignores the query parameters,
    # so the grace period goes in the body, as the kubelet sends it.
    kubelet.core.delete_namespaced_pod(
        "web",
        "default",
        body=client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=pod.metadata.uid)
        ),
    )
    seen = [
        (e["type"], e["raw_object"]["metadata"].get("deletionGracePeriodSeconds")) for e in stream
    ]
    assert seen == [("MODIFIED", 30), ("MODIFIED", 0), ("DELETED", 0)]


def test_node_may_only_touch_its_own_pods(kube: Kube) -> None:
    kube.core.create_node(node_body("n2"))
    kube.core.create_namespaced_pod("default", pod_body("theirs", "n2"))
    kubelet = as_node(kube)
    body = expect_failure(
        kubelet.core.patch_namespaced_pod_status,
        "theirs",
        "default",
        {"status": {"phase": "Running"}},
    )
    assert body["message"] == (
        'pods "theirs" is forbidden: node "n1" can only update pod status'
        " for pods with spec.nodeName set to itself"
    )
    body = expect_failure(kubelet.core.delete_namespaced_pod, "theirs", "default")
    assert body["reason"] == "Forbidden"


def test_node_evicts_its_own_pod(kube: Kube) -> None:
    kubelet = as_node(kube)
    kubelet.core.create_node(node_body())
    kube.core.create_namespaced_pod("default", pod_body("web", NODE))
    answer = kubelet.core.create_namespaced_pod_eviction(
        "web",
        "default",
        {
            "metadata": {"name": "web", "namespace": "default"},
            "deleteOptions": {"gracePeriodSeconds": 5},
        },
        _preload_content=False,
    )
    assert answer.status == 201 and json.loads(answer.read())["status"] == "Success"
    pod = kube.core.read_namespaced_pod("web", "default")
    assert pod.metadata.deletion_grace_period_seconds == 5


def test_mirror_pods(kube: Kube) -> None:
    kubelet = as_node(kube)
    node = kubelet.core.create_node(node_body())
    owner = {
        "apiVersion": "v1",
        "kind": "Node",
        "name": NODE,
        "uid": node.metadata.uid,
        "controller": True,
    }
    mirror = pod_body("static-web-n1", NODE)
    mirror["metadata"].update(
        annotations={"kubernetes.io/config.mirror": "abc123"}, ownerReferences=[owner]
    )
    created = kubelet.core.create_namespaced_pod("default", mirror)
    assert created.spec.service_account_name is None and not created.spec.volumes
    plain = pod_body("plain", NODE)
    body = expect_failure(kubelet.core.create_namespaced_pod, "default", plain)
    assert body["message"] == (
        'pods "plain" is forbidden: pod does not have '
        '"kubernetes.io/config.mirror" annotation, node "n1" can only '
        "create mirror pods"
    )
    elsewhere = {
        **mirror,
        "metadata": {**mirror["metadata"], "name": "x"},
        "spec": {**mirror["spec"], "nodeName": "n2"},
    }
    body = expect_failure(kubelet.core.create_namespaced_pod, "default", elsewhere)
    assert body["message"].endswith("can only create pods with spec.nodeName set to itself")


def test_pods_bound_to_a_node_and_binding(kube: Kube) -> None:
    kube.core.create_node(node_body())
    kube.core.create_namespaced_pod("default", pod_body("web"))
    # The answer is a Success Status, which the client cannot read as the V1Binding it
    # declares (as against a real server), so the raw response is taken.
    answer = kube.core.create_namespaced_pod_binding(
        "web",
        "default",
        {"metadata": {"name": "web"}, "target": {"kind": "Node", "name": NODE}},
        _preload_content=False,
    )
    assert json.loads(answer.read()) == {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Success",
        "code": 201,
    }
    pod = kube.core.read_namespaced_pod("web", "default")
    assert pod.spec.node_name == NODE
    assert [(c.type, c.status) for c in pod.status.conditions] == [("PodScheduled", "True")]
    body = expect_failure(
        kube.core.create_namespaced_pod_binding,
        "web",
        "default",
        {"metadata": {"name": "web"}, "target": {"kind": "Node", "name": "n2"}},
    )
    assert body["message"] == (
        'Operation cannot be fulfilled on pods/binding "web": pod web is '
        'already assigned to node "n1"'
    )
    mine = as_node(kube).core.list_pod_for_all_namespaces(field_selector=f"spec.nodeName={NODE}")
    assert [p.metadata.name for p in mine.items] == ["web"]


def test_scheduler_places_kubectl_run_on_the_ready_node(make_apiserver: Any) -> None:
    server: ApiServer = make_apiserver(scheduler=True)
    kube = Kube(server)
    try:
        kube.core.create_node(node_body("notready", ready="False"))
        kube.core.create_node(node_body())
        kube.kubectl("run", "web", "--image=nginx:1.25")
        pod = eventually(
            lambda: (p := kube.core.read_namespaced_pod("web", "default")).spec.node_name and p,
            what="the pod to be scheduled",
        )
        assert pod.spec.node_name == NODE
        events = kube.kubectl("get", "events").stdout
        assert "Successfully assigned default/web to n1" in events
        wide = kube.kubectl("get", "pods", "-o", "wide").stdout.splitlines()
        assert wide[0].split()[:7] == ["NAME", "READY", "STATUS", "RESTARTS", "AGE", "IP", "NODE"]
        assert wide[1].split()[:3] == ["web", "0/1", "Pending"] and NODE in wide[1].split()
    finally:
        kube.close()


def test_kubectl_shows_nodes_and_pods_as_the_real_printers(kube: Kube) -> None:
    as_node(kube).core.create_node(node_body())
    kube.core.patch_node(NODE, {"metadata": {"labels": {"node-role.kubernetes.io/worker": ""}}})
    nodes = kube.kubectl("get", "nodes", "-o", "wide").stdout.splitlines()
    assert nodes[0].split() == [
        "NAME",
        "STATUS",
        "ROLES",
        "AGE",
        "VERSION",
        "INTERNAL-IP",
        "EXTERNAL-IP",
        "OS-IMAGE",
        "KERNEL-VERSION",
        "CONTAINER-RUNTIME",
    ]
    cells = nodes[1].split()
    assert cells[:3] == ["n1", "Ready", "worker"] and "v1.32.0-pkletd" in cells
    kube.core.patch_node(NODE, {"spec": {"unschedulable": True}})
    assert kube.kubectl("get", "nodes").stdout.splitlines()[1].split()[1] == (
        "Ready,SchedulingDisabled"
    )
    kube.core.create_namespaced_pod("default", pod_body("crash", NODE))
    kube.core.patch_namespaced_pod_status(
        "crash",
        "default",
        {
            "status": {
                "phase": "Running",
                "containerStatuses": [
                    {
                        "name": "app",
                        "ready": False,
                        "restartCount": 3,
                        "image": "busybox",
                        "imageID": "",
                        "state": {"waiting": {"reason": "CrashLoopBackOff"}},
                        "lastState": {"terminated": {"exitCode": 1, "finishedAt": now()}},
                    }
                ],
            }
        },
    )
    kube.core.delete_namespaced_pod("crash", "default", grace_period_seconds=10)
    row = kube.kubectl("get", "pods").stdout.splitlines()[1].split()
    assert row[:4] == ["crash", "0/1", "Terminating", "3"]
    describe = kube.kubectl("describe", "node", NODE).stdout
    assert "Ready            True" in describe.replace("Ready   True", "Ready            True")
    assert "InternalIP:  127.0.0.1" in describe


def test_kubelet_events_and_events_api(kube: Kube) -> None:
    kubelet = as_node(kube)
    node = kubelet.core.create_node(node_body())
    ref = {"kind": "Node", "name": NODE, "uid": NODE}
    event = kubelet.core.create_namespaced_event(
        "default",
        {
            "metadata": {"name": f"{NODE}.17a8"},
            "involvedObject": ref,
            "reason": "Starting",
            "message": "Starting kubelet.",
            "type": "Normal",
            "count": 1,
            "source": {"component": "kubelet", "host": NODE},
            "firstTimestamp": now(),
            "lastTimestamp": now(),
        },
    )
    assert event.event_time is None
    bumped = kubelet.core.patch_namespaced_event(
        f"{NODE}.17a8", "default", {"count": 2, "lastTimestamp": now()}
    )
    assert bumped.count == 2
    # events.k8s.io/v1 shows the same object; eventTime is null for a core-style event (which
    # the client's EventsV1Event model refuses, as against a real server), so read it raw.
    code, same, _ = kube.raw("GET", f"/apis/events.k8s.io/v1/namespaces/default/events/{NODE}.17a8")
    assert code == 200 and same["eventTime"] is None
    assert (same["note"], same["deprecatedCount"], same["regarding"]["name"]) == (
        "Starting kubelet.",
        2,
        NODE,
    )
    listed = kube.core.list_namespaced_event(
        "default",
        field_selector=f"involvedObject.kind=Node,involvedObject.name={NODE},source=kubelet",
    )
    assert [e.metadata.name for e in listed.items] == [f"{NODE}.17a8"]
    body = expect_failure(
        kube.events.create_namespaced_event,
        "default",
        {
            "metadata": {"name": "new"},
            "regarding": ref,
            "reason": "X",
            "type": "Normal",
            "eventTime": now(micro=True),
        },
    )
    assert body["details"]["kind"] == "Event" and body["details"]["group"] == "events.k8s.io"
    text = kube.kubectl("get", "events").stdout.splitlines()
    assert text[0].split() == ["LAST", "SEEN", "TYPE", "REASON", "OBJECT", "MESSAGE"]
    assert text[1].split()[1:4] == ["Normal", "Starting", f"node/{NODE}"]
    del node
