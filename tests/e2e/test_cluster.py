"""Three pkletd nodes, each on its own containerd, join the real control plane
(kube-apiserver with the Node authorizer and NodeRestriction, kube-controller-manager,
kube-scheduler): what ``kubectl`` shows of them and their pods, and what survives outages
and killed workers."""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.conftest import CONTAINERD_TEST_DIR
from tests.harness.apiserver.client import Kube, found_or_none
from tests.harness.containerd import PrivateContainerd, list_pod_sandboxes, remove_all_pods
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

NODES = ("node-a", "node-b", "node-c")
RUN = "trap 'exit 0' TERM; while true; do sleep 1; done"


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def node_on(daemon: PrivateContainerd, control_plane: ControlPlane, name: str) -> Pkletd:
    """A pkletd (not started) joining the control plane, its kubelet API at 127.0.0.1."""
    agent = Pkletd(daemon.address, node=name).join_cluster(control_plane)
    agent.extra_args += ["--node-ip", "127.0.0.1"]
    return agent


@pytest.fixture
def cluster(
    clean_runtime: PrivateContainerd, control_plane: ControlPlane, kube: Kube
) -> Iterator[list[Pkletd]]:
    """Three nodes; the first on the session's containerd, the others on their own."""
    daemons = [clean_runtime] + [
        PrivateContainerd(Path(f"{CONTAINERD_TEST_DIR}-{name}")) for name in NODES[1:]
    ]
    agents = []
    try:
        for daemon in daemons[1:]:
            daemon.start()
        for daemon, name in zip(daemons, NODES, strict=True):
            agents.append(node_on(daemon, control_plane, name).start())
        yield agents
    finally:
        for agent in agents:
            agent.close()
        for daemon in daemons[1:]:
            remove_all_pods(daemon.address)
            daemon.stop()


def pod(name: str, node: str, grace: int = 2, network: bool = False) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "nodeName": node,
            "hostNetwork": not network,
            "automountServiceAccountToken": False,  # service account tokens: issue 10
            "terminationGracePeriodSeconds": grace,
            "containers": [
                {"name": "c", "image": BUSYBOX, "command": ["sh", "-c", RUN]},
            ],
        },
    }


def api_pod(kube: Kube, name: str) -> Any:
    """The pod in the API, None while there is none."""
    return found_or_none(kube.core.read_namespaced_pod, name, "default")


def running(kube: Kube, name: str) -> Any:
    def check() -> Any:
        found = api_pod(kube, name)
        ok = (
            found is not None
            and found.status.phase == "Running"
            and all(
                c.ready
                for c in found.status.container_statuses or [None]  # type: ignore[union-attr]
            )
        )
        return found if ok else None

    return wait_for(f"{name} Running and ready in the API", check, timeout=60)


def schedulable(kube: Kube, name: str) -> bool:
    """Ready, and without the ``node.kubernetes.io/not-ready`` taint kube-apiserver gives
    a new Node until kube-controller-manager's node lifecycle controller sees it Ready:
    until then the scheduler places nothing there that does not tolerate it."""
    node = kube.core.read_node(name)
    return node_ready(kube, name) and not any(
        t.key.startswith("node.kubernetes.io/") for t in node.spec.taints or []
    )


def node_ready(kube: Kube, name: str) -> bool:
    node = kube.core.read_node(name)
    return any(c.type == "Ready" and c.status == "True" for c in node.status.conditions or [])


def test_three_nodes_register_turn_ready_and_renew_their_leases(
    cluster: list[Pkletd], kube: Kube
) -> None:
    for name in NODES:
        wait_for(f"{name} Ready", lambda n=name: node_ready(kube, n), timeout=60)
    table = kube.kubectl("get", "nodes").stdout
    for name in NODES:
        assert any(line.split()[:2] == [name, "Ready"] for line in table.splitlines()), table

    def lease_of(node: str) -> Any:
        return kube.coordination.read_namespaced_lease(node, "kube-node-lease")

    for name in NODES:
        wait_for(f"{name}'s lease", lambda n=name: _exists(lambda: lease_of(n)), timeout=30)
    lease = lease_of("node-a")
    assert lease.spec.holder_identity == "node-a" and lease.spec.lease_duration_seconds == 40
    node = kube.core.read_node("node-a")
    assert [(o.kind, o.name, o.uid) for o in lease.metadata.owner_references] == [
        ("Node", "node-a", node.metadata.uid)
    ]
    described = kube.kubectl("describe", "node", "node-b").stdout
    for expected in (
        "kubernetes.io/hostname=node-b",
        "KubeletReady",
        "Capacity:",
        "Allocatable:",
        "InternalIP:",
        "Container Runtime Version:  containerd://",
        "Kubelet Version:",
    ):
        assert expected in described, (expected, described)
    assert cluster[0].status()["node"]["registered"] is True

    def renewed() -> bool:
        return bool(lease_of("node-a").spec.renew_time > lease.spec.renew_time)

    wait_for("the lease renewed", renewed, timeout=30)


def test_pods_run_on_their_node_and_kubectl_shows_them(cluster: list[Pkletd], kube: Kube) -> None:
    for name in NODES:
        kube.core.create_namespaced_pod("default", pod(f"web-{name}", name, network=True))
    for name in NODES:
        found = running(kube, f"web-{name}")
        assert found.status.pod_ip and found.status.host_ip
    for agent in cluster:
        assert sorted(agent.pods()) == [f"web-{agent.node}"]  # only its own
    wide = kube.kubectl("get", "pods", "-o", "wide").stdout.splitlines()
    rows = {line.split()[0]: line.split() for line in wide[1:]}
    for name in NODES:
        row = rows[f"web-{name}"]
        assert row[1:3] == ["1/1", "Running"] and name in row, wide


def test_update_and_graceful_delete(cluster: list[Pkletd], kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod("doomed", "node-a", grace=30))
    running(kube, "doomed")
    kube.core.patch_namespaced_pod("doomed", "default", {"metadata": {"labels": {"x": "y"}}})
    kube.kubectl("delete", "pod", "doomed", "--grace-period=5", "--wait=true", timeout=60)
    gone = kube.kubectl("get", "pod", "doomed", check=False)
    assert "NotFound" in gone.stderr
    assert "doomed" not in cluster[0].pods()


def test_mirror_pods_follow_static_pods(cluster: list[Pkletd], kube: Kube) -> None:
    agent = cluster[1]
    static = pod("static", agent.node)
    del static["spec"]["nodeName"]
    agent.put("static", static)
    mirror_name = f"static-{agent.node}"
    found = running(kube, mirror_name)
    annotations = found.metadata.annotations
    assert annotations["kubernetes.io/config.mirror"] == annotations["kubernetes.io/config.hash"]
    assert [o.kind for o in found.metadata.owner_references] == ["Node"]
    kube.core.delete_namespaced_pod(mirror_name, "default", grace_period_seconds=0)
    # the watch shows it deleted: made again at once, not at the next syncFrequency (1 min)
    wait_for("the mirror pod recreated", lambda: api_pod(kube, mirror_name), timeout=15)
    agent.remove("static")
    wait_for("the mirror pod removed", lambda: mirror_name not in _names(kube), timeout=60)


def test_events_reach_the_api_with_the_kubelets_source(cluster: list[Pkletd], kube: Kube) -> None:
    kube.core.create_namespaced_pod("default", pod("evented", "node-c"))
    running(kube, "evented")

    def reasons() -> set[str]:
        events = kube.core.list_namespaced_event(
            "default", field_selector="involvedObject.name=evented"
        ).items
        assert all(e.source.component == "kubelet" and e.source.host == "node-c" for e in events)
        found = {e.reason for e in events}
        return found if {"Pulled", "Created", "Started"} <= found else set()

    wait_for("the pod's events in the API", reasons, timeout=30)
    node_events = kube.kubectl("get", "events", "-A", "--field-selector",
                               "involvedObject.kind=Node").stdout  # fmt: skip
    assert "Starting" in node_events and "NodeReady" in node_events


def test_an_api_outage_changes_nothing_on_the_node(
    cluster: list[Pkletd], kube: Kube, control_plane: ControlPlane
) -> None:
    agent = cluster[0]
    kube.core.create_namespaced_pod("default", pod("steady", "node-a"))
    running(kube, "steady")
    before = agent.pods()["steady"]["containers"][0]["container_id"]
    apiserver = control_plane.components["kube-apiserver"]
    apiserver.stop()
    wait_for("the outage noticed", lambda: agent.status()["node"]["api_error"], timeout=60)
    agent.put("during", pod("during", agent.node))  # a static pod started meanwhile
    agent.wait_running("during")
    wait_for_seconds(60 - 20, agent)
    assert agent.pods()["steady"]["containers"][0]["container_id"] == before  # untouched
    control_plane.start()
    running(kube, f"during-{agent.node}")  # its mirror and status caught up
    wait_for("node Ready again", lambda: node_ready(kube, "node-a"), timeout=60)
    wait_for("no API error", lambda: not agent.status()["node"]["api_error"], timeout=60)


def test_killed_cluster_workers_lose_no_status(cluster: list[Pkletd], kube: Kube) -> None:
    agent = cluster[2]
    kube.core.create_namespaced_pod("default", pod("survivor", agent.node))
    running(kube, "survivor")
    for worker in ("api-watcher", "status-manager", "node-lease"):
        os.kill(agent.workers()[worker]["pid"], signal.SIGKILL)
        wait_for(f"{worker} back", agent.all_running, timeout=30)
        kube.core.create_namespaced_pod("default", pod(f"after-{worker}", agent.node))
        running(kube, f"after-{worker}")
    restarts = [c["restart_count"] for p in agent.pods().values() for c in p["containers"]]
    assert set(restarts) == {0}
    assert node_ready(kube, agent.node)


def _exists(read: Any) -> bool:
    return found_or_none(read) is not None


def _names(kube: Kube) -> list[str]:
    return [p.metadata.name for p in kube.core.list_namespaced_pod("default").items]


def wait_for_seconds(seconds: float, agent: Pkletd) -> None:
    """Let an outage last: the node must keep answering all along."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        assert agent.all_running()
        time.sleep(1.0)


def test_a_pod_the_node_cannot_take_is_failed_in_the_api(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    join(pkletd, control_plane)
    greedy = pod("greedy", pkletd.node)
    greedy["spec"]["containers"][0]["resources"] = {"requests": {"cpu": "1000"}}
    kube.core.create_namespaced_pod("default", greedy)

    def failed() -> Any:
        found = api_pod(kube, "greedy")
        return found if found is not None and found.status.phase == "Failed" else None

    found = wait_for("the rejected pod Failed in the API", failed, timeout=30)
    assert found.status.reason == "OutOfcpu"
    assert found.status.message.startswith("Pod was rejected: Node didn't have enough resource")


def test_a_restarted_parent_keeps_its_pods_and_cleans_up_what_the_api_removed(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    join(pkletd, control_plane)
    for name in ("kept", "removed"):
        kube.core.create_namespaced_pod("default", pod(name, pkletd.node))
        running(kube, name)
    kept_id = pkletd.pods()["kept"]["containers"][0]["container_id"]
    pkletd.kill()  # SIGKILL: the workers follow the parent, the pods stay
    kube.core.delete_namespaced_pod("removed", "default", grace_period_seconds=0)
    pkletd.start()

    def sandbox_names() -> list[str]:
        return [s.metadata.name for s in list_pod_sandboxes(pkletd.endpoint)]

    wait_for("the removed pod's sandbox gone", lambda: "removed" not in sandbox_names())
    wait_for("the kept pod seen running", lambda: pkletd.pods().get("kept"))
    assert pkletd.pods()["kept"]["containers"][0]["container_id"] == kept_id
    assert running(kube, "kept").status.container_statuses[0].restart_count == 0
    assert api_pod(kube, "removed") is None


def test_kubectl_run_lands_on_the_node_and_kubectl_delete_removes_it(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    join(pkletd, control_plane)
    wait_for("the node schedulable", lambda: schedulable(kube, pkletd.node), timeout=90)
    overrides = '{"spec": {"automountServiceAccountToken": false, "hostNetwork": true}}'
    kube.kubectl("run", "web", f"--image={BUSYBOX}", "--image-pull-policy=Never",
                 f"--overrides={overrides}", "--command", "--", "sh", "-c", RUN)  # fmt: skip
    found = running(kube, "web")  # bound by kube-scheduler
    assert found.spec.node_name == pkletd.node and found.status.pod_ip
    kube.kubectl("delete", "pod", "web", "--grace-period=2", timeout=60)
    assert api_pod(kube, "web") is None and "web" not in pkletd.pods()


def test_a_deployments_pods_run_on_the_node(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    join(pkletd, control_plane)
    wait_for("the node schedulable", lambda: schedulable(kube, pkletd.node), timeout=90)
    kube.kubectl("create", "deployment", "web", f"--image={BUSYBOX}", "--replicas=3",
                 "--", "sh", "-c", RUN)  # fmt: skip

    def available() -> bool:
        status = kube.apps.read_namespaced_deployment("web", "default").status
        return status.available_replicas == 3

    wait_for("the Deployment's 3 replicas available", available, timeout=90)
    pods = kube.core.list_namespaced_pod("default", label_selector="app=web").items
    assert {p.spec.node_name for p in pods} == {pkletd.node}
    assert sorted(n for n in pkletd.pods() if n.startswith("web-")) == sorted(
        p.metadata.name for p in pods
    )
