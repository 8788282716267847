"""Invariants of the process model, on the real containerd:
a worker crash never touches a pod, hung is dead, the parent can die too."""

from __future__ import annotations

import os
import signal

import pytest

from tests.harness.containerd import cri_channel, runtime_service
from tests.harness.node import Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

PODS = 20


def containers_by_pod(agent: Pkletd) -> dict[str, tuple[str, int]]:
    return {
        name: (pod["containers"][0]["container_id"], pod["containers"][0]["restart_count"])
        for name, pod in agent.pods().items()
    }


def start_pods(agent: Pkletd, count: int) -> dict[str, tuple[str, int]]:
    for i in range(count):
        agent.put(f"p{i}", pod_manifest(f"p{i}"))
    for i in range(count):
        agent.wait_running(f"p{i}", timeout=60)
    return containers_by_pod(agent)


def kill_worker(agent: Pkletd, name: str, sig: int = signal.SIGKILL) -> int:
    old = agent.workers()[name]["pid"]
    os.kill(old, sig)

    def back() -> dict[str, object] | None:
        worker = agent.workers()[name]
        return worker if worker["state"] == "running" and worker["pid"] not in (0, old) else None

    worker = wait_for(f"{name} back with a new pid", back, timeout=30)
    return int(worker["pid"])


def stop_container(address: str, container_id: str) -> None:
    from cri_api.v1 import api_pb2

    with cri_channel(address) as channel:
        runtime_service(channel).StopContainer(
            api_pb2.StopContainerRequest(container_id=container_id, timeout=0), timeout=30
        )


def test_sigkill_of_each_worker_touches_no_pod(pkletd: Pkletd) -> None:
    pkletd.start()
    before = start_pods(pkletd, PODS)
    for name in ("pleg", "http", "file-source"):
        kill_worker(pkletd, name)
        worker = pkletd.workers()[name]
        assert worker["restarts"] == 1
        assert worker["last_exit"] == "killed by SIGKILL; not expected"
        assert containers_by_pod(pkletd) == before
    assert "exited: pleg (killed by SIGKILL; not expected)" in pkletd.log()


def test_updates_during_a_worker_outage_are_not_lost(pkletd: Pkletd) -> None:
    pkletd.start()
    before = start_pods(pkletd, 3)
    pleg_pid = pkletd.workers()["pleg"]["pid"]
    source_pid = pkletd.workers()["file-source"]["pid"]
    os.kill(pleg_pid, signal.SIGSTOP)  # PLEG sees nothing while stopped...
    os.kill(source_pid, signal.SIGSTOP)  # ...and the file source reads nothing.
    try:
        victim_id, _ = before["p0-testnode"]
        stop_container(pkletd.endpoint, victim_id)  # an exit nobody but PLEG can notice
        pkletd.put("late", pod_manifest("late"))
        pkletd.remove("p1")
    finally:
        os.kill(pleg_pid, signal.SIGKILL)
        os.kill(source_pid, signal.SIGKILL)

    def restarted() -> bool:
        pod = pkletd.pod("p0")
        return (
            pod is not None
            and pod["containers"][0]["restart_count"] == 1
            and pod["containers"][0]["state"] == "running"
        )

    wait_for("p0 restarted after PLEG came back", restarted, timeout=30)
    pkletd.wait_running("late", timeout=30)
    wait_for(
        "p1 removed after the file source came back", lambda: pkletd.pod("p1") is None, timeout=30
    )
    assert containers_by_pod(pkletd)["p2-testnode"] == before["p2-testnode"]


@pytest.mark.parametrize("pkletd", [{"heartbeat_timeout": "2s"}], indirect=True)
def test_hung_worker_is_killed_and_restarted(pkletd: Pkletd) -> None:
    pkletd.start()
    kill_worker(pkletd, "pleg", signal.SIGSTOP)
    worker = pkletd.workers()["pleg"]
    assert worker["last_exit"] == "killed by SIGKILL; not expected (heartbeat timeout)"
    assert "worker hung; killing worker=pleg" in pkletd.log()


def test_restart_worker_is_graceful(pkletd: Pkletd) -> None:
    pkletd.start()
    old = pkletd.workers()["pleg"]["pid"]
    result = pkletd.cli("restart-worker", "pleg")
    assert result.returncode == 0, result.stderr
    worker = wait_for(
        "pleg restarted",
        lambda: (w := pkletd.workers()["pleg"])["state"] == "running" and w["pid"] != old and w,
    )
    assert worker["last_exit"] == "exit status 0; expected (restart requested)"


def test_parent_sigkill_then_start_readopts_pods(pkletd: Pkletd) -> None:
    pkletd.start()
    before = start_pods(pkletd, 5)
    pkletd.kill(signal.SIGKILL)
    wait_for("workers died with the parent", lambda: not pkletd.processes(), timeout=15)
    pkletd.start()
    wait_for(
        "all pods known again",
        lambda: (
            len(pkletd.pods()) == 5 and all(p["phase"] == "Running" for p in pkletd.pods().values())
        ),
    )
    assert containers_by_pod(pkletd) == before
    assert "sandbox started" not in pkletd.log().split("supervisor started")[-1]
