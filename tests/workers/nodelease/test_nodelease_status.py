"""Node status as the kubelet computes it: conditions, images, change detection, the patch."""

from __future__ import annotations

import copy

from pkletd.ipc.runtime.cri import ListedImage, RuntimeCondition
from pkletd.workers.nodelease.conditions import (
    Limits,
    ParentHealth,
    RuntimeState,
    after_status,
    aggregate,
)
from pkletd.workers.nodelease.nodestatus import (
    Observed,
    initial_node,
    node_images,
    reconciled,
    status_changed,
    status_patch,
    updated_node,
)
from pkletd.workers.nodelease.timing import go_duration, micro_time, rfc3339

from tests.harness.apiserver.strategic import strategic_merge
from tests.workers.nodelease.nodelease_helpers import (
    CNI_DOWN,
    READY_CONDITIONS,
    T0,
    conditions_of,
    template,
)

RUNNING = after_status(RuntimeState(), READY_CONDITIONS, now=0.0)


def observed(
    runtime: RuntimeState = RUNNING,
    parent: ParentHealth | None = None,
    at: float = 1.0,
    images: tuple[ListedImage, ...] | None = (),
    max_images: int = 50,
) -> Observed:
    return Observed(
        runtime=runtime,
        parent=parent or ParentHealth(alive_at=at),
        limits=Limits(),
        images=images,
        max_images=max_images,
        wall=T0 + at,
        mono=at,
    )


def ready(node: dict[str, object]) -> dict[str, str]:
    return conditions_of(node)["Ready"]  # type: ignore[arg-type]


# --- conditions ------------------------------------------------------------------------------


def test_a_healthy_node_is_ready_with_the_kubelets_words() -> None:
    node = initial_node(template(), observed())
    conditions = node["status"]["conditions"]
    assert [c["type"] for c in conditions] == [
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    ]
    by_type = conditions_of(node)
    assert by_type["Ready"]["status"] == "True"
    assert by_type["Ready"]["reason"] == "KubeletReady"
    assert by_type["Ready"]["message"] == "kubelet is posting ready status"
    assert (by_type["MemoryPressure"]["status"], by_type["MemoryPressure"]["reason"]) == (
        "False",
        "KubeletHasSufficientMemory",
    )
    assert by_type["MemoryPressure"]["message"] == "kubelet has sufficient memory available"
    assert by_type["DiskPressure"]["reason"] == "KubeletHasNoDiskPressure"
    assert by_type["DiskPressure"]["message"] == "kubelet has no disk pressure"
    assert by_type["PIDPressure"]["reason"] == "KubeletHasSufficientPID"
    assert by_type["PIDPressure"]["message"] == "kubelet has sufficient PID available"
    assert by_type["Ready"]["lastHeartbeatTime"] == rfc3339(T0 + 1)


def test_network_not_ready_is_worded_as_the_kubelet() -> None:
    runtime = after_status(RUNNING, (READY_CONDITIONS[0], CNI_DOWN), now=2.0)
    condition = ready(initial_node(template(), observed(runtime, at=2.0)))
    assert condition["status"] == "False"
    assert condition["reason"] == "KubeletNotReady"
    assert condition["message"] == (
        "container runtime network not ready: NetworkReady=false "
        "reason:NetworkPluginNotReady message:Network plugin returns error: "
        "cni plugin not initialized"
    )


def test_runtime_not_ready_then_down() -> None:
    not_ready = RuntimeCondition("RuntimeReady", False, "ContainerdNotReady", "starting")
    runtime = after_status(RUNNING, (not_ready, READY_CONDITIONS[1]), now=5.0)
    message = ready(initial_node(template(), observed(runtime, at=5.0)))["message"]
    assert message == (
        "container runtime not ready: RuntimeReady=false reason:ContainerdNotReady message:starting"
    )
    # No good Status for 30 s: the kubelet's "container runtime is down" joins in.
    message = ready(initial_node(template(), observed(runtime, at=31.0)))["message"]
    assert message == (
        "[container runtime is down, container runtime not ready: RuntimeReady=false "
        "reason:ContainerdNotReady message:starting]"
    )


def test_a_failing_status_call_changes_nothing_until_the_runtime_is_down() -> None:
    runtime = after_status(RUNNING, None, now=20.0)
    assert runtime == RUNNING
    assert ready(initial_node(template(), observed(runtime, at=20.0)))["status"] == "True"
    assert ready(initial_node(template(), observed(runtime, at=30.0)))["message"] == (
        "container runtime is down"
    )


def test_before_the_first_runtime_check() -> None:
    message = ready(initial_node(template(), observed(RuntimeState())))["message"]
    assert message == (
        "[container runtime status check may not have completed yet, network state unknown]"
    )


def test_pleg_unhealthy_makes_the_node_not_ready() -> None:
    parent = ParentHealth(alive_at=0.0).heard(10.0, sync_loop_ok=True, pleg_ok=False)
    parent = parent.heard(15.5, sync_loop_ok=True, pleg_ok=False)
    message = ready(initial_node(template(), observed(parent=parent, at=15.5)))["message"]
    assert message == (
        "PLEG is not healthy: pleg was last seen active 3m5.5s ago; threshold is 3m0s"
    )
    healthy = parent.heard(16.0, sync_loop_ok=True, pleg_ok=True)
    assert ready(initial_node(template(), observed(parent=healthy, at=16.0)))["status"] == "True"


def test_a_silent_or_slow_parent_makes_the_node_not_ready() -> None:
    parent = ParentHealth(alive_at=0.0)
    runtime = after_status(RUNNING, READY_CONDITIONS, now=44.0)
    message = ready(initial_node(template(), observed(runtime, parent, at=45.0)))["message"]
    assert message == (
        "syncloop is not healthy: the sync loop was last seen active 45s ago; threshold is 30s"
    )
    slow = parent.heard(46.0, sync_loop_ok=False, pleg_ok=True)
    message = ready(initial_node(template(), observed(runtime, slow, at=46.0)))["message"]
    assert message == "syncloop is not healthy: sync Loop took longer than expected"


def test_transition_time_moves_only_when_the_status_does() -> None:
    first = initial_node(template(), observed(at=1.0))
    same, changed = updated_node(first, template(), observed(at=11.0))
    assert not changed  # only heartbeats moved
    assert ready(same)["lastTransitionTime"] == rfc3339(T0 + 1)
    assert ready(same)["lastHeartbeatTime"] == rfc3339(T0 + 11)
    runtime = after_status(RUNNING, (READY_CONDITIONS[0], CNI_DOWN), now=21.0)
    down, changed = updated_node(same, template(), observed(runtime, at=21.0))
    assert changed
    assert ready(down)["lastTransitionTime"] == rfc3339(T0 + 21)
    pressure = conditions_of(down)["MemoryPressure"]
    assert pressure["lastTransitionTime"] == rfc3339(T0 + 1)
    assert pressure["lastHeartbeatTime"] == rfc3339(T0 + 21)


def test_pressure_the_parent_reports_sets_the_conditions_as_the_kubelet() -> None:
    calm = initial_node(template(), observed(at=1.0))
    assert conditions_of(calm)["MemoryPressure"]["reason"] == "KubeletHasSufficientMemory"
    parent = ParentHealth(alive_at=0.0).heard(
        11.0, sync_loop_ok=True, pleg_ok=True, pressure=["MemoryPressure", "DiskPressure"]
    )
    pressed, changed = updated_node(calm, template(), observed(parent=parent, at=11.0))
    assert changed
    found = conditions_of(pressed)
    assert {k: (c["status"], c["reason"], c["message"]) for k, c in found.items()} == {
        "MemoryPressure": (
            "True",
            "KubeletHasInsufficientMemory",
            "kubelet has insufficient memory available",
        ),
        "DiskPressure": ("True", "KubeletHasDiskPressure", "kubelet has disk pressure"),
        "PIDPressure": ("False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
        "Ready": ("True", "KubeletReady", "kubelet is posting ready status"),
    }
    assert found["MemoryPressure"]["lastTransitionTime"] == rfc3339(T0 + 11)
    relieved, _ = updated_node(pressed, template(), observed(at=21.0))
    assert conditions_of(relieved)["DiskPressure"]["status"] == "False"
    assert conditions_of(relieved)["DiskPressure"]["reason"] == "KubeletHasNoDiskPressure"


def test_aggregate_is_go_s_error_aggregate() -> None:
    assert aggregate(["a"]) == "a"
    assert aggregate(["a", "b", "a"]) == "[a, b]"


# --- images ----------------------------------------------------------------------------------


def image(size: int, tags: int = 1, digests: int = 1) -> ListedImage:
    return ListedImage(
        f"sha256:{size}",
        tuple(f"repo/img{size}:t{i}" for i in range(tags)),
        tuple(f"repo/img{size}@sha256:{i}" for i in range(digests)),
        size,
    )


def test_images_largest_first_with_at_most_five_names() -> None:
    found = node_images([image(10), image(300, tags=4, digests=3), image(20)], max_images=2)
    assert [i["sizeBytes"] for i in found] == [300, 20]
    assert found[0]["names"] == [
        "repo/img300@sha256:0",
        "repo/img300@sha256:1",
        "repo/img300@sha256:2",
        "repo/img300:t0",
        "repo/img300:t1",
    ]
    assert len(node_images([image(n) for n in range(60)], max_images=-1)) == 60
    assert node_images([image(1)], max_images=0) == []
    assert node_images(None, max_images=50) == []


def test_images_are_in_the_status_and_count_as_a_change() -> None:
    first = initial_node(template(), observed(images=(image(5),)))
    assert first["status"]["images"] == [
        {"names": ["repo/img5@sha256:0", "repo/img5:t0"], "sizeBytes": 5}
    ]
    _, changed = updated_node(first, template(), observed(images=(image(5), image(7)), at=9.0))
    assert changed


# --- change detection and the patch ----------------------------------------------------------


def test_change_detection_ignores_heartbeats_and_quantity_spelling() -> None:
    node = initial_node(template(), observed())
    other = copy.deepcopy(node["status"])
    other["capacity"]["memory"] = "15936Mi"  # a little less memory
    assert status_changed(node["status"], other)
    other["capacity"]["memory"] = "16710144000"  # the same bytes
    assert not status_changed(node["status"], other)
    other["conditions"][0]["lastHeartbeatTime"] = "2030-01-01T00:00:00Z"
    assert not status_changed(node["status"], other)
    other["conditions"][0]["message"] = "else"
    assert status_changed(node["status"], other)


def test_required_labels_are_restored() -> None:
    node = initial_node(template(), observed())
    del node["metadata"]["labels"]["kubernetes.io/arch"]
    fixed, changed = updated_node(node, template(), observed(at=5.0))
    assert changed
    assert fixed["metadata"]["labels"]["kubernetes.io/arch"] == "amd64"


def test_the_patch_takes_the_stored_node_to_the_wanted_one() -> None:
    stored = initial_node(template(), observed(images=(image(5),)))
    stored["status"]["addresses"].append({"type": "ExternalIP", "address": "1.2.3.4"})
    stored["status"]["capacity"]["example.com/gpu"] = "1"  # a device plugin's
    stored["status"]["nodeInfo"]["bootID"] = "old-boot"
    runtime = after_status(RUNNING, (READY_CONDITIONS[0], CNI_DOWN), now=9.0)
    wanted, changed = updated_node(stored, template(), observed(runtime, at=9.0, images=None))
    assert changed
    patch = status_patch(stored, wanted)
    assert "spec" not in patch
    assert patch["status"]["addresses"][-1] == {"$patch": "replace"}
    assert patch["status"]["nodeInfo"] == {"bootID": "b1"}  # only what changed
    assert patch["status"]["images"] is None  # the list failed: the kubelet drops them
    assert {c["type"] for c in patch["status"]["conditions"]} == {
        "MemoryPressure",
        "DiskPressure",
        "PIDPressure",
        "Ready",
    }
    merged = strategic_merge(stored, patch, "V1Node")
    assert merged["status"] == wanted["status"]
    assert merged["status"]["capacity"]["example.com/gpu"] == "1"


def test_an_unchanged_node_gives_an_empty_patch() -> None:
    node = initial_node(template(), observed())
    assert status_patch(node, copy.deepcopy(node)) == {}
    stored = copy.deepcopy(node)  # the server spells an amount its own way
    stored["status"]["allocatable"]["ephemeral-storage"] = "96636764000"
    assert status_patch(stored, node) == {}


# --- adopting an existing Node ---------------------------------------------------------------


def test_reconciling_an_existing_node_sets_what_the_kubelet_owns() -> None:
    initial = initial_node(template(), observed())
    existing = {
        "metadata": {
            "name": "node-a",
            "uid": "u1",
            "labels": {"kubernetes.io/hostname": "old", "team": "a"},
            "annotations": {"note": "kept"},
        },
        "spec": {"taints": [{"key": "someone", "effect": "NoExecute"}]},
        "status": {"capacity": {"cpu": "2", "hugepages-1Gi": "2Gi"}},
    }
    fixed = reconciled(initial, existing)
    assert fixed is not None
    labels = fixed["metadata"]["labels"]
    assert labels["kubernetes.io/hostname"] == "node-a"
    assert labels["kubernetes.io/os"] == "linux" and labels["beta.kubernetes.io/arch"] == "amd64"
    assert labels["team"] == "a" and "tier" not in labels  # --node-labels are not reconciled
    assert fixed["metadata"]["annotations"] == {
        "note": "kept",
        "volumes.kubernetes.io/controller-managed-attach-detach": "true",
    }
    assert fixed["spec"] == existing["spec"]  # taints are never touched
    assert fixed["status"]["capacity"] == {"cpu": "2", "hugepages-2Mi": "0"}
    assert fixed["status"]["allocatable"]["hugepages-2Mi"] == "0"
    patch = status_patch(existing, fixed)
    assert patch["metadata"]["labels"]["kubernetes.io/hostname"] == "node-a"
    assert patch["status"]["capacity"]["hugepages-1Gi"] is None


def test_a_node_that_matches_needs_no_reconciling() -> None:
    initial = initial_node(template(), observed())
    assert reconciled(initial, copy.deepcopy(initial)) is None


# --- formats ---------------------------------------------------------------------------------


def test_time_formats() -> None:
    assert rfc3339(T0 + 0.9) == "2023-11-14T22:13:20Z"
    assert micro_time(T0 + 0.123456) == "2023-11-14T22:13:20.123456Z"
    assert go_duration(180) == "3m0s"
    assert go_duration(185.5) == "3m5.5s"
    assert go_duration(0.25) == "250ms"
    assert go_duration(3725) == "1h2m5s"


def test_the_volumes_in_use_are_written_and_cleared() -> None:
    name = "kubernetes.io/csi/hostpath.csi.test^vol-1"
    health = ParentHealth(alive_at=1.0).heard(1.0, True, True, volumes_in_use=[name])
    node = initial_node(template(), observed(parent=health))
    assert node["status"]["volumesInUse"] == [name]
    cleared, changed = updated_node(node, template(), observed(parent=ParentHealth(alive_at=2.0)))
    assert changed and "volumesInUse" not in cleared["status"]
    assert status_patch(node, cleared)["status"]["volumesInUse"] is None
