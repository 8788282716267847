"""What the soak looks at: the runtime's own view of the pods, and whether every view of
their status (pkletd's, the API server's, the kubelet API's ``/pods``) agrees with it.

``Fingerprint`` is the runtime's containers and sandboxes of the stable pods, by pod
UID: a container or sandbox that appears later is a restart someone caused, a running
container that stops is one too. ``disagreements`` compares, for every pod pkletd has,
each app container's ID, running or not, and restart count with the runtime's newest
container of that name, then the same fields (and ready, and the phase) in the API
server's pod and in ``/pods``: a status update that was lost shows as a difference
that never goes away.
"""

from __future__ import annotations

import json
import sys
import time
import urllib.request
from dataclasses import dataclass
from typing import Any

from cri_api.v1 import api_pb2

from tests.harness.apiserver.client import Kube
from tests.harness.containerd import cri_channel, runtime_service
from tests.harness.node import Pkletd, wait_for

UID_LABEL = "io.kubernetes.pod.uid"
CONVERGE_S = 90.0  # the status manager's periodic list (syncFrequency, 1 min) repairs by then
SLOW_S = 5.0


@dataclass(frozen=True)
class Container:
    id: str
    name: str
    attempt: int
    running: bool


def runtime_containers(address: str) -> dict[str, list[Container]]:
    """Every container of the runtime, by pod UID."""
    with cri_channel(address) as channel:
        reply = runtime_service(channel).ListContainers(api_pb2.ListContainersRequest(), timeout=30)
    found: dict[str, list[Container]] = {}
    for c in reply.containers:
        running = c.state == api_pb2.CONTAINER_RUNNING
        entry = Container(c.id, c.metadata.name, c.metadata.attempt, running)
        found.setdefault(c.labels.get(UID_LABEL, ""), []).append(entry)
    return found


def runtime_sandboxes(address: str) -> dict[str, set[str]]:
    with cri_channel(address) as channel:
        reply = runtime_service(channel).ListPodSandbox(api_pb2.ListPodSandboxRequest(), timeout=30)
    found: dict[str, set[str]] = {}
    for s in reply.items:
        found.setdefault(s.metadata.uid, set()).add(s.id)
    return found


@dataclass(frozen=True)
class Fingerprint:
    containers: dict[str, list[Container]]
    sandboxes: dict[str, set[str]]

    @classmethod
    def of(cls, address: str, uids: set[str]) -> Fingerprint:
        containers = runtime_containers(address)
        sandboxes = runtime_sandboxes(address)
        return cls(
            {u: containers.get(u, []) for u in uids}, {u: sandboxes.get(u, set()) for u in uids}
        )

    def restarts_since(self, before: Fingerprint) -> list[str]:
        """What changed for the same pods: new containers or sandboxes, stopped ones."""
        found = []
        for uid, now in self.containers.items():
            was = {c.id: c for c in before.containers.get(uid, [])}
            found += [
                f"pod {uid}: new container {c.name} attempt {c.attempt}"
                for c in now
                if c.id not in was
            ]
            found += [
                f"pod {uid}: {c.name} stopped"
                for c in now
                if c.id in was and was[c.id].running and not c.running
            ]
            new_sandboxes = self.sandboxes[uid] - before.sandboxes.get(uid, set())
            found += [f"pod {uid}: new sandbox {s[:13]}" for s in sorted(new_sandboxes)]
        return found


# --------------------------------------------------------------------------- agreement


def _newest(containers: list[Container]) -> dict[str, Container]:
    newest: dict[str, Container] = {}
    for c in sorted(containers, key=lambda c: c.attempt):
        newest[c.name] = c
    return newest


def _api_view(pod: dict[str, Any]) -> dict[str, tuple[str, bool, int, bool]]:
    """An API pod's containers: name -> (id, running, restart count, ready)."""
    return {
        s["name"]: (
            s.get("containerID", "").split("://")[-1],
            "running" in s.get("state", {}),
            s["restartCount"],
            s["ready"],
        )
        for s in pod.get("status", {}).get("containerStatuses", [])
    }


def _compare(pod: dict[str, Any], newest: dict[str, Container], views: dict[str, Any]) -> list[str]:
    name = pod["name"]
    found = []
    mine = {
        c["name"]: (c["container_id"], c["state"] == "running", c["restart_count"], c["ready"])
        for c in pod["containers"]
    }
    for cname, (cid, running, restarts, _) in mine.items():
        runtime = newest.get(cname)
        have = (runtime.id, runtime.running, runtime.attempt) if runtime else ("", False, 0)
        if (cid, running, restarts) != have and (cid or runtime):
            found.append(
                f"{name}/{cname}: pkletd {(cid[:13], running, restarts)}, runtime "
                f"{(have[0][:13], have[1], have[2])}"
            )
    for view, pods in views.items():
        other = pods.get(name)
        if other is None:
            found.append(f"{name}: missing from {view}")
        elif _api_view(other) != mine or other["status"].get("phase") != pod["phase"]:
            found.append(
                f"{name}: {view} says {other['status'].get('phase')} "
                f"{_api_view(other)}, pkletd {pod['phase']} {mine}"
            )
    return found


def api_pods(kube: Kube, node: str) -> dict[str, dict[str, Any]]:
    """The API server's pods bound to ``node``, by name (a static pod's mirror included)."""
    reply = kube.core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={node}", _preload_content=False
    )
    return {p["metadata"]["name"]: p for p in json.loads(reply.data)["items"]}


def served_pods(agent: Pkletd) -> dict[str, dict[str, Any]]:
    """``/pods`` of the read-only port, by name."""
    url = f"http://127.0.0.1:{agent.read_only_port}/pods"
    with urllib.request.urlopen(url, timeout=10) as reply:
        return {p["metadata"]["name"]: p for p in json.load(reply)["items"]}


def disagreements(agent: Pkletd, kube: Kube) -> list[str]:
    pods = agent.pods()
    containers = runtime_containers(agent.endpoint)
    views = {"the API server": api_pods(kube, agent.node), "/pods": served_pods(agent)}
    found = []
    for _, pod in sorted(pods.items()):
        found += _compare(pod, _newest(containers.get(pod["uid"], [])), views)
    for view, held in views.items():
        found += [f"{n}: in {view}, not in pkletd" for n in sorted(held.keys() - pods.keys())]
    return found


def converge(agent: Pkletd, kube: Kube, timeout: float = CONVERGE_S) -> float:
    """Seconds until every view agrees; fails with the differences left. Differences that
    last ``SLOW_S`` are printed to stderr as they were then."""
    started = time.monotonic()
    last: list[str] = []
    told = False

    def agreed() -> bool:
        nonlocal told
        last[:] = disagreements(agent, kube)
        if last and not told and time.monotonic() - started > SLOW_S:
            told = True
            print(
                f"soak: still different after {SLOW_S:g} s: {'; '.join(last[:10])}", file=sys.stderr
            )
        return not last

    try:
        wait_for("every status view to agree with the runtime", agreed, timeout, every=0.5)
    except AssertionError as exc:
        raise AssertionError(f"{exc}; still different: {'; '.join(last[:10])}") from None
    return time.monotonic() - started
