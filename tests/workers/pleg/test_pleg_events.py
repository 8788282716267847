"""PLEG on containerd's event stream, end to end: a container killed outside pkletd
(its process, or ``ctr task kill``) is in the pod's status well within a second while
the relist is 5 minutes away; its exit code is in ``/pods`` before its restart, on
events as relisting; an OOM kill shows ``OOMKilled``; a containerd restart makes
PLEG fall back to relisting every second, with its log lines, and come back; with
``--pleg-runtime-events=false`` it only relists."""

from __future__ import annotations

import datetime
import os
import re
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.harness.containerd import PrivateContainerd
from tests.harness.node import REPO, Pkletd, api_pod, pod_manifest, wait_for

pytestmark = pytest.mark.slow

KILL_SEEN_S = 1.0  # the relist is 300 s away: only the events can be this quick
FALLBACK = "falling back to relisting"
BACK = "runtime events back"
FAILED_RELISTS = 3  # seen while containerd is down, one a second


def pleg(agent: Pkletd) -> dict[str, Any]:
    found: dict[str, Any] = agent.status()["node"]["pleg"]
    return found


def wait_evented(agent: Pkletd) -> None:
    wait_for("PLEG evented", lambda: pleg(agent)["mode"] == "evented")


def task_pid(daemon: PrivateContainerd, container_id: str) -> int:
    listing = subprocess.run(
        ["ctr", "--address", daemon.ctr_address, "-n", "k8s.io", "task", "ls"],
        capture_output=True,
        text=True,
        check=True,
        timeout=30,
    ).stdout
    for line in listing.splitlines():
        task, pid, *_ = line.split()
        if task == container_id:
            return int(pid)
    raise AssertionError(f"no task {container_id} in:\n{listing}")


def kill_process(daemon: PrivateContainerd, container_id: str) -> None:
    os.kill(task_pid(daemon, container_id), signal.SIGKILL)


def ctr_task_kill(daemon: PrivateContainerd, container_id: str) -> None:
    subprocess.run(
        ["ctr", "--address", daemon.ctr_address, "-n", "k8s.io"]
        + ["task", "kill", "--signal", "SIGKILL", container_id],
        check=True,
        capture_output=True,
        timeout=30,
    )


def start_pod(agent: Pkletd, name: str, **spec: Any) -> str:
    """A pod whose one container is never restarted; its container id once it runs."""
    manifest = pod_manifest(name, restart_policy="Never")
    manifest["spec"]["containers"][0].update(spec)
    agent.put(name, manifest)
    return str(agent.wait_running(name)["containers"][0]["container_id"])


def seen_terminated(agent: Pkletd, name: str, timeout: float = 30.0) -> float:
    """Poll ``pkletd status`` until the pod's container is terminated; when that was."""

    def terminated() -> bool:
        pod = agent.pod(name)
        return pod is not None and pod["containers"][0]["state"] == "terminated"

    wait_for(f"pod {name}'s container terminated", terminated, timeout, every=0.005)
    return time.monotonic()


def terminated_state(agent: Pkletd, name: str) -> dict[str, Any]:
    """The container's terminated state as the read-only port's /pods serves it."""
    pod = api_pod(agent, name)
    assert pod is not None
    state: dict[str, Any] = pod["status"]["containerStatuses"][0]["state"]["terminated"]
    return state


def kill_is_seen_within(agent: Pkletd, daemon: PrivateContainerd, name: str) -> float:
    container_id = start_pod(agent, name)
    killed = time.monotonic()
    kill_process(daemon, container_id)
    return seen_terminated(agent, name) - killed


@pytest.mark.parametrize("kill", [kill_process, ctr_task_kill], ids=["process", "ctr-task-kill"])
def test_a_container_killed_outside_pkletd_is_seen_at_once(
    pkletd: Pkletd, clean_runtime: PrivateContainerd, kill: Any
) -> None:
    pkletd.start()
    container_id = start_pod(pkletd, "victim")
    wait_evented(pkletd)
    killed = time.monotonic()
    kill(clean_runtime, container_id)
    took = seen_terminated(pkletd, "victim") - killed
    assert took < KILL_SEEN_S, f"the kill reached the pod's status after {took:.3f}s"
    assert terminated_state(pkletd, "victim")["exitCode"] == 137
    assert pleg(pkletd)["mode"] == "evented"


def test_an_oom_killed_container_shows_oomkilled(
    pkletd: Pkletd, clean_runtime: PrivateContainerd
) -> None:
    pkletd.start()
    wait_evented(pkletd)
    limits = {"limits": {"memory": "16Mi"}}
    manifest = pod_manifest("hog", "sleep 1; tail /dev/zero", restart_policy="Never")
    manifest["spec"]["containers"][0]["resources"] = limits
    pkletd.put("hog", manifest)
    seen_terminated(pkletd, "hog")
    state = terminated_state(pkletd, "hog")
    assert (state["reason"], state["exitCode"]) == ("OOMKilled", 137)


def container_states(agent: Pkletd, name: str, until_restarts: int) -> list[tuple[int, str, int]]:
    """Read ``/pods`` in a tight loop until the pod's container restarted; each distinct
    (restartCount, state, exit code) it showed, in order."""
    seen: list[tuple[int, str, int]] = []

    def restarted() -> bool:
        pod = api_pod(agent, name)
        assert pod is not None
        status = pod["status"]["containerStatuses"][0]
        kind, detail = next(iter(status["state"].items()))
        shown = (status["restartCount"], kind, detail.get("exitCode", -1))
        if not seen or seen[-1] != shown:
            seen.append(shown)
        return bool(status["restartCount"] >= until_restarts)

    wait_for(f"pod {name} restarted", restarted, every=0.005)
    return seen


@pytest.mark.parametrize(
    "mode", [[], ["--pleg-runtime-events=false"]], ids=["evented", "relisting"]
)
def test_a_killed_containers_exit_code_is_in_pods_before_its_restart(
    pkletd: Pkletd, clean_runtime: PrivateContainerd, mode: list[str]
) -> None:
    """The parent publishes the exit PLEG read before the sync that restarts the container
    writes to the runtime. The restart's own status comes after its postStart hook (a
    second), so no poll can miss the exit in between; before, the status went from
    running to the restarted container directly."""
    pkletd.extra_args += mode
    pkletd.start()
    manifest = pod_manifest("phoenix")  # restartPolicy Always
    manifest["spec"]["containers"][0]["lifecycle"] = {
        "postStart": {"exec": {"command": ["sleep", "1"]}}
    }
    pkletd.put("phoenix", manifest)
    container_id = pkletd.wait_running("phoenix")["containers"][0]["container_id"]
    if not mode:
        wait_evented(pkletd)
    kill_process(clean_runtime, container_id)
    seen = container_states(pkletd, "phoenix", until_restarts=1)
    assert (0, "terminated", 137) in seen, f"/pods showed {seen}"
    restart = next(i for i, (restarts, _, _) in enumerate(seen) if restarts == 1)
    assert seen.index((0, "terminated", 137)) < restart, f"/pods showed {seen}"
    restarted = api_pod(pkletd, "phoenix")
    assert restarted is not None
    last = restarted["status"]["containerStatuses"][0]["lastState"]["terminated"]
    assert (last["exitCode"], last["reason"]) == (137, "Error")


def restart_containerd(daemon: PrivateContainerd, while_down: Callable[[], None]) -> None:
    """Stop containerd, call ``while_down``, start it again; as a service manager would,
    so the new daemon is not this process's child (the harness's CLI starts it)."""
    daemon.stop_daemon()
    try:
        while_down()
    finally:
        harness = REPO / "tests" / "harness" / "containerd.py"
        up = [sys.executable, str(harness), "up", "--dir", str(daemon.base_dir)]
        subprocess.run(up, check=True, capture_output=True, timeout=120)


def log_times(text: str, phrase: str) -> list[float]:
    """The times (seconds) of the log lines that say ``phrase``."""
    stamp = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")
    found = []
    for line in text.splitlines():
        match = stamp.match(line)
        if match and phrase in line:
            when = datetime.datetime.strptime(match[1], "%Y-%m-%d %H:%M:%S,%f")
            found.append(when.timestamp())
    return found


def test_a_containerd_restart_falls_back_to_relisting_and_back(
    pkletd: Pkletd, clean_runtime: PrivateContainerd
) -> None:
    pkletd.start()
    start_pod(pkletd, "steady")
    wait_evented(pkletd)
    seen: list[dict[str, Any]] = []

    def relisting_while_down() -> None:
        wait_for(FALLBACK, lambda: FALLBACK in pkletd.log("pleg"))
        seen.append(pleg(pkletd))
        wait_for(
            f"{FAILED_RELISTS} relists failed",
            lambda: len(log_times(pkletd.log("pleg"), "relist failed")) >= FAILED_RELISTS,
        )

    restart_containerd(clean_runtime, relisting_while_down)
    assert seen[0]["mode"] == "relisting" and "UNAVAILABLE" in seen[0]["reason"]
    failed = log_times(pkletd.log("pleg"), "relist failed")
    gaps = [b - a for a, b in zip(failed, failed[1:], strict=False)]
    assert all(0.8 < gap < 1.6 for gap in gaps), f"relists {gaps} apart, not every second"
    wait_for(BACK, lambda: BACK in pkletd.log("pleg"), timeout=60)
    wait_evented(pkletd)
    assert pkletd.pod("steady")["containers"][0]["state"] == "running"
    took = kill_is_seen_within(pkletd, clean_runtime, "after")
    assert took < KILL_SEEN_S, f"after the restart, a kill was seen after {took:.3f}s"
    text = pkletd.log("pleg")
    assert text.count(FALLBACK) == 1 and text.count(BACK) == 1


def test_without_runtime_events_pleg_relists_every_period(
    pkletd: Pkletd, clean_runtime: PrivateContainerd
) -> None:
    pkletd.extra_args += ["--pleg-runtime-events=false"]
    pkletd.start()
    shown = pleg(pkletd)
    assert (shown["mode"], shown["reason"]) == ("relisting", "runtime events off")
    took = kill_is_seen_within(pkletd, clean_runtime, "relisted")
    assert took < 3.0, f"the relist saw a kill after {took:.3f}s"
    assert "runtime events" not in pkletd.log("pleg").replace("runtime events off", "")
