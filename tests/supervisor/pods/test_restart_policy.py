"""restartPolicy and CrashLoopBackOff on containers that exit at once."""

from __future__ import annotations

import time

import pytest

from tests.harness.node import Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow


@pytest.mark.parametrize(
    ("policy", "command", "phase"),
    [
        ("Never", "exit 3", "Failed"),
        ("Never", "exit 0", "Succeeded"),
        ("OnFailure", "exit 0", "Succeeded"),
    ],
)
def test_finished_pods_are_not_restarted(
    pkletd: Pkletd, policy: str, command: str, phase: str
) -> None:
    pkletd.start()
    pkletd.put("once", pod_manifest("once", command, restart_policy=policy))
    pod = pkletd.wait_phase("once", phase)
    (container,) = pod["containers"]
    assert container["state"] == "terminated"
    assert container["restart_count"] == 0


@pytest.mark.parametrize("policy", ["Always", "OnFailure"])
def test_crash_loop_backs_off_from_ten_seconds(pkletd: Pkletd, policy: str) -> None:
    pkletd.start()
    pkletd.put("crash", pod_manifest("crash", "exit 1", restart_policy=policy))

    def restarts() -> int:
        pod = pkletd.pod("crash")
        return pod["containers"][0]["restart_count"] if pod else -1

    # The first restart is immediate; then the container waits in CrashLoopBackOff.
    wait_for("first restart", lambda: restarts() >= 1, timeout=15)
    backoff = wait_for(
        "CrashLoopBackOff",
        lambda: (
            (p := pkletd.pod("crash")) and p["containers"][0]["state"] == "CrashLoopBackOff" and p
        ),
        timeout=15,
    )
    assert backoff["phase"] == "Running"  # the kubelet reports a restarting pod as Running
    uid = backoff["uid"]
    warning = f"Back-off restarting failed container c0 in pod crash-testnode_default({uid})"
    assert ("Warning", "BackOff", warning) in [
        (e["type"], e["reason"], e["message"]) for e in pkletd.events()
    ]
    entered = time.monotonic()
    wait_for("second restart", lambda: restarts() >= 2, timeout=30)
    waited = time.monotonic() - entered
    assert 5.0 < waited < 15.0, f"second restart after {waited:.1f}s, want about 10s"
