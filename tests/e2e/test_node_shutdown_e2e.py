"""Graceful node shutdown end to end: a real pkletd on real containerd, with its
DBUS_SYSTEM_BUS_ADDRESS on a private dbus-daemon where a logind stand-in serves
(``tests/harness/logind.py``).

The stand-in's InhibitDelayMaxSec is shorter than the grace period, so pkletd writes the
drop-in and has it reloaded; then it sends PrepareForShutdown and the test watches the
pods stop: regular ones first, each within its group's period (a pod that ignores
SIGTERM is killed when the period ends), critical ones after them; their status (Failed,
``Terminated``, the kubelet's message, DisruptionTarget), new pods refused, the lock
closed once the pods are down, and a cancellation that takes the lock again and admits
pods. Also: a SIGKILLed worker takes a new lock; no bus at all is one log line and the
rest of pkletd runs; a node joined to the real control plane turns NotReady and
kube-apiserver gets the pods' status. Times are measured from the signal, with generous bounds.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from tests.harness.apiserver.client import Kube, found_or_none
from tests.harness.controlplane import ControlPlane
from tests.harness.logind import Inhibitor, LogindStandIn, PrivateBus
from tests.harness.node import NODE, Pkletd, api_pod, join, pod_manifest, wait_for

pytestmark = pytest.mark.slow

MESSAGE = "Pod was terminated in response to imminent node shutdown."
WHY = "Kubelet needs time to handle node shutdown"
SLACK_S = 6.0  # a loaded 2-core machine: a sync, a StopContainer and a status read
IGNORES_TERM = "trap '' TERM; while true; do sleep 1; done"


@dataclass
class Logind:
    bus: PrivateBus
    standin: LogindStandIn
    conf_dir: Path

    def locks(self) -> list[Inhibitor]:
        return self.standin.inhibitors()

    def open_locks(self) -> list[Inhibitor]:
        return [lock for lock in self.locks() if lock.open]


@pytest.fixture
def logind() -> Iterator[Logind]:
    base = Path(tempfile.mkdtemp(prefix="lg-", dir="/tmp"))  # a short socket path
    bus = PrivateBus(base / "bus").start()
    conf_dir = base / "logind.conf.d"
    try:
        standin = LogindStandIn(bus.address, 5.0, conf_dir).start()
        try:
            yield Logind(bus, standin, conf_dir)
        finally:
            standin.stop()
    finally:
        bus.stop()
        shutil.rmtree(base, ignore_errors=True)


def with_shutdown(pkletd: Pkletd, logind: Logind, **fields: Any) -> Pkletd:
    pkletd.write_config(**fields)
    pkletd.extra_args += ["--logind-conf-dir", str(logind.conf_dir)]
    pkletd.env["DBUS_SYSTEM_BUS_ADDRESS"] = logind.bus.address
    return pkletd


def critical(manifest: dict[str, Any]) -> dict[str, Any]:
    manifest["spec"]["priorityClassName"] = "system-node-critical"
    return manifest


def watch_stops(pkletd: Pkletd, names: list[str], timeout: float) -> dict[str, float]:
    """Poll until every named pod has no running container; when each was first seen so."""
    seen: dict[str, float] = {}

    def check() -> bool:
        pods = pkletd.pods()
        for name in names:
            pod = pods.get(f"{name}-{NODE}")
            down = pod is not None and all(c["state"] != "running" for c in pod["containers"])
            if down and name not in seen:
                seen[name] = time.monotonic()
        return len(seen) == len(names)

    wait_for(f"pods {names} stopped", check, timeout, every=0.1)
    return seen


def terminated_by_shutdown(status: dict[str, Any]) -> bool:
    target = next((c for c in status["conditions"] if c["type"] == "DisruptionTarget"), {})
    return (
        (status["phase"], status.get("reason"), status.get("message"))
        == ("Failed", "Terminated", MESSAGE)
        and target.get("status") == "True"
        and target.get("reason") == "TerminationByKubelet"
        and target.get("message") == MESSAGE
    )


def ended_gauge(pkletd: Pkletd) -> float:
    url = f"http://127.0.0.1:{pkletd.read_only_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as reply:
        text = reply.read().decode()
    found = re.search(r"^kubelet_graceful_shutdown_end_time_seconds (\S+)$", text, re.MULTILINE)
    return float(found.group(1)) if found else 0.0


def rejected(pkletd: Pkletd, name: str) -> dict[str, Any] | None:
    status = (api_pod(pkletd, name) or {}).get("status") or {}
    return status if status.get("reason") == "NodeShutdown" else None


def test_regular_pods_stop_first_critical_ones_last_and_the_lock_is_released(
    pkletd: Pkletd, logind: Logind
) -> None:
    with_shutdown(pkletd, logind, shutdownGracePeriod="12s", shutdownGracePeriodCriticalPods="4s")
    pkletd.put("quick", pod_manifest("quick", grace=30))  # leaves on SIGTERM
    pkletd.put("stubborn", pod_manifest("stubborn", IGNORES_TERM, grace=30))
    pkletd.put("critical", critical(pod_manifest("critical", grace=30)))
    pkletd.start()
    for name in ("quick", "stubborn", "critical"):
        pkletd.wait_running(name)
    lock = wait_for("the delay lock", lambda: logind.open_locks(), timeout=15)[0]
    assert (lock.what, lock.who, lock.why, lock.mode) == ("shutdown", "kubelet", WHY, "delay")
    assert logind.standin.delay_s() == 12.0  # raised by the drop-in and a reload
    assert "InhibitDelayMaxSec=12\n" in (logind.conf_dir / "99-kubelet.conf").read_text()
    assert ("systemd-logind.service", "all", 1) in logind.standin.kills

    sent = logind.standin.prepare_for_shutdown(True)
    stops = watch_stops(pkletd, ["quick", "stubborn", "critical"], 12 + 2 * SLACK_S)
    after = {name: at - sent for name, at in stops.items()}
    assert after["quick"] < SLACK_S, after
    assert 8 - 1 <= after["stubborn"] < 8 + SLACK_S, after  # SIGKILL when the 8 s are over
    assert after["critical"] >= after["stubborn"], after  # the critical group comes after
    assert after["critical"] < 12 + SLACK_S, after
    closed = wait_for("the lock closed", lambda: logind.locks()[0].closed_at, timeout=SLACK_S)
    assert max(stops.values()) - 1 <= closed < sent + 12 + SLACK_S

    for name in ("quick", "stubborn", "critical"):
        pod = wait_for(f"{name} failed", lambda n=name: api_pod(pkletd, n), timeout=SLACK_S)
        assert terminated_by_shutdown(pod["status"]), pod["status"]
    shutdown = pkletd.status()["node"]["shutdown"]
    assert (shutdown["stage"], shutdown["inhibitor_held"]) == ("done", False)
    reasons = [(e["reason"], e["message"]) for e in pkletd.events()]
    assert ("NodeShutdown", "Shutdown manager detected shutdown event") in reasons
    assert (pkletd.root_dir / "graceful_node_shutdown_state").exists()
    wait_for("the shutdown's gauges", lambda: ended_gauge(pkletd) > 0, timeout=15)

    pkletd.put("late", pod_manifest("late"))  # the node is shutting down: refused
    refused = wait_for("late refused", lambda: rejected(pkletd, "late"))
    assert refused["phase"] == "Failed"
    assert refused["message"] == "Pod was rejected: Pod was rejected as the node is shutting down."

    # A worker restarted after the shutdown holds nothing back: the parent says release.
    worker = pkletd.workers()["node-shutdown"]
    asked = logind.standin.reads.count("PreparingForShutdown")
    os.kill(worker["pid"], signal.SIGKILL)
    wait_for(
        "the new worker connected",
        lambda: logind.standin.reads.count("PreparingForShutdown") > asked,
    )
    wait_for("no lock held", lambda: not logind.open_locks())
    locks = len(logind.locks())

    logind.standin.prepare_for_shutdown(False)  # cancelled: the lock again, pods admitted
    wait_for("a new lock", lambda: len(logind.locks()) == locks + 1 and logind.open_locks())
    wait_for("admitting again", lambda: pkletd.status()["node"]["shutdown"]["stage"] == "idle")
    pkletd.put("after", pod_manifest("after"))
    pkletd.wait_running("after")
    assert ("NodeShutdown", "Shutdown manager detected shutdown cancellation") in [
        (e["reason"], e["message"]) for e in pkletd.events()
    ]


def test_a_killed_worker_takes_the_lock_again(pkletd: Pkletd, logind: Logind) -> None:
    with_shutdown(pkletd, logind, shutdownGracePeriod="4s").start()
    wait_for("the delay lock", lambda: logind.open_locks(), timeout=15)
    worker = pkletd.workers()["node-shutdown"]
    os.kill(worker["pid"], signal.SIGKILL)
    wait_for("the first lock closed", lambda: not logind.locks()[0].open)
    wait_for("a second lock", lambda: len(logind.locks()) == 2 and logind.locks()[1].open)

    def restarted() -> bool:
        again = pkletd.workers()["node-shutdown"]
        return again["pid"] != worker["pid"] and again["state"] == "running"

    wait_for("the worker back", restarted)
    assert pkletd.status()["node"]["shutdown"]["inhibitor_held"]


def test_no_bus_is_one_clear_line_and_pods_still_run(pkletd: Pkletd) -> None:
    pkletd.write_config(shutdownGracePeriod="10s")
    missing = pkletd.base / "no-bus-here"
    pkletd.env["DBUS_SYSTEM_BUS_ADDRESS"] = f"unix:path={missing}"
    pkletd.put("web", pod_manifest("web"))
    pkletd.start()
    pkletd.wait_running("web")
    line = wait_for(
        "the log line", lambda: "logind not usable" in pkletd.log("node-shutdown"), timeout=15
    )
    assert line
    assert pkletd.log("node-shutdown").count("logind not usable") == 1
    error = pkletd.status()["node"]["shutdown"]["error"]
    assert "cannot connect to the system bus" in error and str(missing) in error
    assert pkletd.workers()["node-shutdown"]["restarts"] == 0


@pytest.fixture
def joined(cluster_kube: Kube, pkletd: Pkletd) -> Pkletd:
    """pkletd for the real control plane: stopped before the cluster is cleaned (it
    would register again)."""
    return pkletd


def in_api(kube: Kube, read: Any, *args: str) -> dict[str, Any]:
    """An object as the API server holds it, as JSON (``{}`` while there is none)."""
    found = found_or_none(read, *args)
    return {} if found is None else dict(kube.api.sanitize_for_serialization(found))


def ready_of(kube: Kube) -> dict[str, Any]:
    node = in_api(kube, kube.core.read_node, NODE)
    conditions = (node.get("status") or {}).get("conditions") or []
    return next((c for c in conditions if c["type"] == "Ready"), {})


def failed_in_api(kube: Kube, name: str) -> dict[str, Any] | None:
    pod = in_api(kube, kube.core.read_namespaced_pod, name, "default")
    status = pod.get("status") or {}
    return status if status.get("phase") == "Failed" else None


def test_a_joined_node_turns_not_ready_and_the_api_gets_the_pods_status(
    joined: Pkletd, logind: Logind, control_plane: ControlPlane, cluster_kube: Kube
) -> None:
    kube = cluster_kube
    with_shutdown(joined, logind)
    join(joined, control_plane, shutdownGracePeriod="6s", shutdownGracePeriodCriticalPods="2s")
    manifest = pod_manifest("api-web", grace=30)
    manifest["spec"]["nodeName"] = NODE
    manifest["spec"]["automountServiceAccountToken"] = False  # service account tokens: issue 10
    kube.core.create_namespaced_pod("default", manifest)
    joined.wait_api_pod("api-web")
    wait_for("the node Ready", lambda: ready_of(kube).get("status") == "True", timeout=30)
    wait_for("the delay lock", lambda: logind.open_locks(), timeout=15)

    logind.standin.prepare_for_shutdown(True)
    ready = wait_for(
        "the node NotReady",
        lambda: (r := ready_of(kube)).get("status") == "False" and r,
        timeout=2 * SLACK_S,
    )
    assert ready["reason"] == "KubeletNotReady" and ready["message"] == "node is shutting down"
    status = wait_for(
        "the API pod Failed", lambda: failed_in_api(kube, "api-web"), timeout=6 + 2 * SLACK_S
    )
    assert terminated_by_shutdown(status), status
    wait_for("the lock closed", lambda: not logind.open_locks(), timeout=SLACK_S)
