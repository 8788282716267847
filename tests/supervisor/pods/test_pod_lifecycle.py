"""The pod lifecycle on the real containerd: init containers, sidecars, hooks,
termination, deadlines and spec changes, as the kubelet runs them."""

from __future__ import annotations

import itertools
import statistics
import time
from typing import Any

import grpc
import pytest
from cri_api.v1 import api_pb2

from tests.harness.containerd import cri_channel, list_pod_sandboxes, runtime_service
from tests.harness.node import NODE, Pkletd, api_pod, condition, pod_manifest, wait_for

pytestmark = pytest.mark.slow

SLEEP = "trap 'exit 0' TERM; while true; do sleep 1; done"


def container(name: str, command: str, **extra: Any) -> dict[str, Any]:
    return {
        "name": name,
        "image": "pkletd.local/busybox:1",
        "command": ["sh", "-c", command],
        **extra,
    }


def manifest(
    name: str, containers: list[dict[str, Any]], init: list[dict[str, Any]] = (), **spec: Any
) -> dict[str, Any]:
    pod = pod_manifest(name)
    pod["spec"]["containers"] = containers
    if init:
        pod["spec"]["initContainers"] = list(init)
    pod["spec"].update(spec)
    return pod


def cri_containers(agent: Pkletd, name: str) -> dict[str, Any]:
    """The newest instance of each of the pod's containers, with status (ns times)."""
    full = f"{name}-{NODE}"
    with cri_channel(agent.endpoint) as channel:
        rt = runtime_service(channel)
        listed = rt.ListContainers(api_pb2.ListContainersRequest(), timeout=30).containers
        found: dict[str, Any] = {}
        for c in sorted(listed, key=lambda c: c.created_at):
            if c.labels.get("io.kubernetes.pod.name") != full:
                continue
            try:
                found[c.metadata.name] = rt.ContainerStatus(
                    api_pb2.ContainerStatusRequest(container_id=c.id), timeout=30
                ).status
            except grpc.RpcError as exc:  # pkletd removed an old instance since the list
                if exc.code() != grpc.StatusCode.NOT_FOUND:
                    raise
    return found


def statuses(agent: Pkletd, name: str, key: str = "containerStatuses") -> dict[str, Any]:
    pod = api_pod(agent, name)
    return {s["name"]: s for s in (pod or {}).get("status", {}).get(key, [])}


def test_init_containers_run_in_order_before_the_app(pkletd: Pkletd) -> None:
    pkletd.start()
    # "first" outlasts the time a sync waits for an init container: Pending is seen
    init = [container("first", "sleep 3"), container("second", "true")]
    pkletd.put("ordered", manifest("ordered", [container("app", SLEEP)], init))
    pending = wait_for(
        "initializing",
        lambda: (
            (p := api_pod(pkletd, "ordered")) and p["status"].get("initContainerStatuses") and p
        ),
    )
    assert pending["status"]["phase"] == "Pending"
    assert condition(pending, "Initialized") == "False"
    assert statuses(pkletd, "ordered")["app"]["state"]["waiting"]["reason"] == "PodInitializing"
    pkletd.wait_running("ordered")
    ran = cri_containers(pkletd, "ordered")
    assert ran["first"].finished_at <= ran["second"].started_at
    assert ran["second"].finished_at <= ran["app"].started_at
    pod = api_pod(pkletd, "ordered")
    assert condition(pod, "Initialized") == "True"
    init_states = statuses(pkletd, "ordered", "initContainerStatuses")
    assert all(s["state"]["terminated"]["reason"] == "Completed" for s in init_states.values())


def test_short_init_containers_follow_one_another_without_a_relist(pkletd: Pkletd) -> None:
    """The next container is created as soon as an init container exits: PLEG's
    1 s relist would make each gap half a second on average, and often more."""
    pkletd.start()
    order = ["i0", "i1", "i2", "i3", "app"]
    init = [container(name, "true") for name in order[:-1]]
    pkletd.put("quick", manifest("quick", [container("app", SLEEP)], init))
    pkletd.wait_running("quick")
    ran = cri_containers(pkletd, "quick")
    gaps = [(ran[b].created_at - ran[a].finished_at) / 1e9 for a, b in itertools.pairwise(order)]
    assert statistics.median(gaps) < 0.4, gaps


def test_failing_init_container_is_retried_unless_never(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("retry", manifest("retry", [container("app", SLEEP)], [container("init", "exit 1")]))
    pkletd.put(
        "never",
        manifest(
            "never", [container("app", SLEEP)], [container("init", "exit 1")], restartPolicy="Never"
        ),
    )
    wait_for(
        "init retried",
        lambda: statuses(pkletd, "retry", "initContainerStatuses")["init"]["restartCount"] >= 1,
    )
    failed = wait_for(
        "never pod failed",
        lambda: (p := api_pod(pkletd, "never")) and p["status"]["phase"] == "Failed" and p,
    )
    assert statuses(pkletd, "never", "initContainerStatuses")["init"]["restartCount"] == 0
    assert "app" not in cri_containers(pkletd, "never")
    assert (
        failed["status"]["containerStatuses"][0]["state"]["waiting"]["reason"] == "PodInitializing"
    )


def test_sidecar_starts_first_keeps_running_and_stops_last(pkletd: Pkletd) -> None:
    pkletd.start()
    sidecar = container("proxy", SLEEP, restartPolicy="Always")
    init = [sidecar, container("setup", "true")]
    pkletd.put(
        "side", manifest("side", [container("app", SLEEP)], init, terminationGracePeriodSeconds=5)
    )
    pkletd.wait_running("side")
    ran = cri_containers(pkletd, "side")
    assert ran["proxy"].started_at <= ran["setup"].started_at <= ran["app"].started_at
    assert ran["proxy"].state == api_pb2.CONTAINER_RUNNING
    assert condition(api_pod(pkletd, "side"), "Ready") == "True"

    first = ran["proxy"].id
    with cri_channel(pkletd.endpoint) as channel:  # the sidecar dies: it comes back
        runtime_service(channel).StopContainer(
            api_pb2.StopContainerRequest(container_id=first, timeout=0), timeout=30
        )
    wait_for(
        "sidecar restarted",
        lambda: (
            (c := cri_containers(pkletd, "side")["proxy"]).id != first
            and c.state == api_pb2.CONTAINER_RUNNING
        ),
    )

    pkletd.remove("side")
    wait_for("pod gone", lambda: pkletd.pod("side") is None, 30)
    log = pkletd.log()
    assert log.index("Stopping container app") < log.index("Stopping container proxy")


def test_hooks_run_at_start_and_stop(pkletd: Pkletd) -> None:
    pkletd.start()
    hooked = container(
        "app",
        SLEEP,
        lifecycle={
            "postStart": {"exec": {"command": ["sh", "-c", "echo post-start-ran > /proc/1/fd/1"]}},
            "preStop": {"exec": {"command": ["sh", "-c", "echo pre-stop-ran > /proc/1/fd/1"]}},
        },
    )
    pkletd.put("hooks", manifest("hooks", [hooked]))
    pod = pkletd.wait_running("hooks")
    log_file = pkletd.pod_logs / f"default_hooks-{NODE}_{pod['uid']}" / "app" / "0.log"
    wait_for("postStart output", lambda: "post-start-ran" in log_file.read_text())
    pkletd.remove("hooks")
    wait_for(
        "preStop output",
        lambda: (
            log_file.exists()
            and "pre-stop-ran" in log_file.read_text()
            or pkletd.pod("hooks") is None
        ),
    )
    assert "pre-stop-ran" in log_file.read_text()


def test_failed_post_start_hook_kills_and_restarts(pkletd: Pkletd) -> None:
    pkletd.start()
    bad = container("app", SLEEP, lifecycle={"postStart": {"exec": {"command": ["false"]}}})
    pkletd.put("badhook", manifest("badhook", [bad]))
    wait_for("restarted", lambda: statuses(pkletd, "badhook")["app"]["restartCount"] >= 1, 30)
    events = [e for e in pkletd.events() if e["object"] == f"default/badhook-{NODE}"]
    reasons = [e["reason"] for e in events]
    assert reasons[:5] == ["Pulled", "Created", "Started", "FailedPostStartHook", "Killing"]
    assert events[4]["message"] == "FailedPostStartHook"  # the kubelet's kill message


def test_term_ignored_is_killed_at_the_grace_deadline(pkletd: Pkletd) -> None:
    pkletd.start()
    stubborn = container("app", "trap '' TERM; while true; do sleep 1; done")
    pkletd.put("stubborn", manifest("stubborn", [stubborn], terminationGracePeriodSeconds=3))
    pkletd.wait_running("stubborn")
    started = time.monotonic()
    pkletd.remove("stubborn")
    wait_for("pod gone", lambda: pkletd.pod("stubborn") is None, 30)
    took = time.monotonic() - started
    assert 2.0 < took < 15.0, f"took {took:.1f}s, want about the 3s grace period"


def test_pre_stop_sleep_delays_termination(pkletd: Pkletd) -> None:
    pkletd.start()
    sleepy = container("app", SLEEP, lifecycle={"preStop": {"sleep": {"seconds": 2}}})
    pkletd.put("sleepy", manifest("sleepy", [sleepy], terminationGracePeriodSeconds=10))
    pkletd.wait_running("sleepy")
    started = time.monotonic()
    pkletd.remove("sleepy")
    wait_for("pod gone", lambda: pkletd.pod("sleepy") is None, 30)
    assert time.monotonic() - started >= 2.0


def test_active_deadline_fails_the_pod(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("short", manifest("short", [container("app", SLEEP)], activeDeadlineSeconds=3))
    pod = wait_for(
        "deadline exceeded",
        lambda: (p := api_pod(pkletd, "short")) and p["status"]["phase"] == "Failed" and p,
        30,
    )
    assert pod["status"]["reason"] == "DeadlineExceeded"
    assert (
        pod["status"]["message"] == "Pod was active on the node longer than the specified deadline"
    )
    wait_for(
        "containers stopped",
        lambda: all(
            c.state == api_pb2.CONTAINER_EXITED for c in cri_containers(pkletd, "short").values()
        ),
    )


def test_deleting_a_pod_that_is_still_starting(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put(
        "early", manifest("early", [container("app", SLEEP)], [container("init", "sleep 2")])
    )
    wait_for(
        "sandbox made",
        lambda: any(
            s.metadata.name == f"early-{NODE}" for s in list_pod_sandboxes(pkletd.endpoint)
        ),
    )
    pkletd.remove("early")
    wait_for("pod gone", lambda: pkletd.pod("early") is None, 30)
    wait_for(
        "nothing left",
        lambda: (
            not any(s.metadata.name == f"early-{NODE}" for s in list_pod_sandboxes(pkletd.endpoint))
        ),
    )


def test_spec_change_restarts_just_that_container(pkletd: Pkletd) -> None:
    pkletd.start()
    fixed = {"metadata": {"name": "two", "uid": "11111111-2222-3333-4444-555555555555"}}
    pod = manifest("two", [container("a", SLEEP), container("b", SLEEP)])
    pod["metadata"].update(fixed["metadata"])
    pkletd.put("two", pod)
    pkletd.wait_running("two")
    before = {n: c.id for n, c in cri_containers(pkletd, "two").items()}
    pod["spec"]["containers"][1]["command"] = ["sh", "-c", "echo changed; " + SLEEP]
    pkletd.put("two", pod)
    after = wait_for(
        "b replaced",
        lambda: (
            (
                now := {
                    n: c.id
                    for n, c in cri_containers(pkletd, "two").items()
                    if c.state == api_pb2.CONTAINER_RUNNING
                }
            )
            and now.get("b") not in (None, before["b"])
            and now
        ),
    )
    assert after["a"] == before["a"]
    wait_for("b restart counted", lambda: statuses(pkletd, "two")["b"]["restartCount"] == 1)
    killing = [e["message"] for e in pkletd.events() if e["reason"] == "Killing"]
    assert killing == ["Container b definition changed, will be restarted"]

    pod["spec"]["hostNetwork"] = False  # a new network namespace: a new sandbox
    pkletd.put("two", pod)
    wait_for(
        "new sandbox",
        lambda: any(
            s.metadata.name == f"two-{NODE}"
            and s.metadata.attempt == 1
            and s.state == api_pb2.SANDBOX_READY
            for s in list_pod_sandboxes(pkletd.endpoint)
        ),
        30,
    )
    wait_for(
        "pod network IP",
        lambda: api_pod(pkletd, "two")["status"].get("podIP", "").startswith("10.88."),
    )
    pkletd.wait_running("two")
