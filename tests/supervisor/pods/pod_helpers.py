"""Helpers for the pod-spec end-to-end tests: the manifest corpus, container ids, states."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from tests.harness.node import Pkletd, api_pod, wait_for

MANIFESTS = Path(__file__).resolve().parent / "manifests"


def manifest(name: str, **replace: str) -> dict[str, Any]:
    """A manifest of ``tests/manifests/<name>.yaml``, with placeholder words replaced."""
    text = (MANIFESTS / f"{name}.yaml").read_text()
    for word, value in replace.items():
        text = text.replace(word, value)
    loaded: dict[str, Any] = yaml.safe_load(text)
    return loaded


def container_ids(agent: Pkletd, pod: str) -> dict[str, str]:
    found = agent.pod(pod)
    assert found is not None, f"pod {pod} unknown"
    return {c["name"]: c["container_id"] for c in found["containers"]}


def container_status(agent: Pkletd, pod: str, container: str) -> dict[str, Any] | None:
    found = api_pod(agent, pod)
    if found is None:
        return None
    statuses = found["status"].get("containerStatuses", [])
    return next((s for s in statuses if s["name"] == container), None)


def wait_waiting(
    agent: Pkletd, pod: str, container: str, reason: str, timeout: float = 30.0
) -> dict[str, Any]:
    """Wait until the container waits with this reason; its ``waiting`` state."""

    def check() -> dict[str, Any] | None:
        status = container_status(agent, pod, container)
        state = (status or {}).get("state", {}).get("waiting") or {}
        return state if state.get("reason") == reason else None

    return wait_for(f"{pod}/{container} waiting with {reason}", check, timeout)


def wait_running_container(agent: Pkletd, pod: str, container: str) -> str:
    """Wait until one container of the pod runs (others may wait); its id."""

    def check() -> str | None:
        found = agent.pod(pod)
        for c in (found or {}).get("containers", []):
            if c["name"] == container and c["state"] == "running":
                return str(c["container_id"])
        return None

    return wait_for(f"{pod}/{container} running", check)


def proc_status(agent: Pkletd, container_id: str) -> dict[str, str]:
    """``/proc/1/status`` of the container as a mapping (PID 1 is its own process)."""
    from tests.harness.node import exec_in

    text = exec_in(agent, container_id, "cat", "/proc/1/status")
    return dict(line.split(":\t", 1) for line in text.splitlines() if ":\t" in line)
