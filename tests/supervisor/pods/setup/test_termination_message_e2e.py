"""Termination messages on the real containerd: what a container writes at its
terminationMessagePath, and the end of its log under FallbackToLogsOnError, in its
terminated state (``kubectl describe pod``'s Message)."""

from __future__ import annotations

from typing import Any

import pytest

from tests.harness.node import Pkletd, pod_manifest, wait_for
from tests.supervisor.pods.pod_helpers import container_status

pytestmark = pytest.mark.slow


def ended(name: str, command: str, **container: Any) -> dict[str, Any]:
    pod = pod_manifest(name, command, restart_policy="Never")
    pod["spec"]["containers"][0].update(container)
    return pod


def terminated(agent: Pkletd, pod: str) -> dict[str, Any]:
    def check() -> dict[str, Any] | None:
        status = container_status(agent, pod, "c0") or {}
        found: dict[str, Any] | None = status.get("state", {}).get("terminated")
        return found

    return wait_for(f"{pod} terminated", check)


def test_termination_messages(pkletd: Pkletd) -> None:
    pkletd.put(
        "written", ended("written", "echo -n 'done: 42 rows' > /dev/termination-log; exit 3")
    )
    pkletd.put(
        "custom",
        ended("custom", "echo bye > /tmp/why", terminationMessagePath="/tmp/why"),
    )
    pkletd.put(
        "fallback",
        ended(
            "fallback",
            "echo starting; echo 'cannot open db' >&2; exit 1",
            terminationMessagePolicy="FallbackToLogsOnError",
        ),
    )
    pkletd.put(
        "succeeded",
        ended("succeeded", "echo fine", terminationMessagePolicy="FallbackToLogsOnError"),
    )
    pkletd.start()

    state = terminated(pkletd, "written")
    assert (state["exitCode"], state["message"]) == (3, "done: 42 rows")
    assert terminated(pkletd, "custom")["message"] == "bye\n"
    # both streams, each line as written (their order in the log is the runtime's)
    fallback = terminated(pkletd, "fallback")["message"]
    assert fallback.endswith("\n")
    assert sorted(fallback.splitlines()) == ["cannot open db", "starting"]
    assert "message" not in terminated(pkletd, "succeeded")  # exit 0: the log is not read
