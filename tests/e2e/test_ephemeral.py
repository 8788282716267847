"""``kubectl debug`` on a real pkletd (real containerd) joined to the real control plane: the
debug container joins its target's PID namespace, is attached to and its logs read through
the kubelet API, shows in ephemeralContainerStatuses, is never restarted; a target the API
does not know is the API's error, one that does not run is the kubelet's event, and the
pod goes on as it was."""

from __future__ import annotations

import os
import select
import subprocess
import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.containerd import list_containers
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for

pytestmark = pytest.mark.slow

APP = "trap 'exit 0' TERM; while true; do sleep 1; done"
DEBUG = ("debug", "web", "--image", BUSYBOX, "--profile", "legacy")


def web_pod(*containers: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "web", "namespace": "default"},
        "spec": {
            "nodeName": "testnode",
            "automountServiceAccountToken": False,
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "app", "image": BUSYBOX, "command": ["sh", "-c", APP]},
                *containers,
            ],
        },
    }


def statuses(kube: Kube, kind: str = "ephemeral_container_statuses") -> dict[str, Any]:
    pod = kube.core.read_namespaced_pod("web", "default")
    return {s.name: s for s in getattr(pod.status, kind) or []}


def ended(kube: Kube, name: str) -> Any:
    def check() -> Any:
        found = statuses(kube).get(name)
        return found if found is not None and found.state.terminated is not None else None

    return wait_for(f"{name} terminated in the API", check, timeout=60)


def app_running(kube: Kube) -> Any:
    def check() -> Any:
        app = statuses(kube, "container_statuses").get("app")
        return app if app is not None and app.ready else None

    return wait_for("app running and ready in the API", check, timeout=60)


def converse(
    kube: Kube, args: tuple[str, ...], say: str, until: str, meanwhile: Callable[[], None]
) -> str:
    """Run kubectl, type ``say`` as a person would (stdin stays open: an attach ends when
    it closes), read its output up to ``until``, do ``meanwhile``, then type ``exit``."""
    kubectl = subprocess.Popen(
        kube.kubectl_command(*args),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert kubectl.stdin is not None and kubectl.stdout is not None
    try:
        kubectl.stdin.write(say.encode())
        kubectl.stdin.flush()
        seen = read_until(kubectl.stdout.fileno(), until.encode(), time.monotonic() + 60)
        meanwhile()
        kubectl.stdin.write(b"exit\n")
        kubectl.stdin.close()
        assert kubectl.wait(30) == 0
        return seen
    finally:
        if kubectl.poll() is None:
            kubectl.kill()
            kubectl.wait()


def read_until(fd: int, marker: bytes, deadline: float) -> str:
    got = b""
    while marker not in got:
        left = deadline - time.monotonic()
        assert left > 0, f"no {marker!r} from kubectl, only {got!r}"
        ready, _, _ = select.select([fd], [], [], left)
        chunk = os.read(fd, 65536) if ready else b""
        assert chunk or not ready, f"kubectl ended before {marker!r}: {got!r}"
        got += chunk
    return got.decode()


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane) -> Pkletd:
    return join(pkletd, control_plane)


def test_kubectl_debug_sees_the_targets_processes_and_is_never_restarted(
    node: Pkletd, kube: Kube
) -> None:
    kube.core.create_namespaced_pod("default", web_pod())
    app = app_running(kube)

    # interactive: kubectl attaches (pods/attach through the kubelet API), one types
    args = (*DEBUG, "-i", "--target", "app", "--container", "debugger", "--", "sh")
    execs: list[str] = []

    def exec_in_debugger() -> None:
        execs.append(kube.kubectl("exec", "web", "-c", "debugger", "--", "echo", "ok").stdout)

    say, until = "ps; echo hi-from-debugger\n", "hi-from-debugger\n"
    seen = converse(kube, args, say, until, exec_in_debugger)
    assert "while true" in seen  # the target's shell, seen through PID namespace TARGET
    assert execs == ["ok\n"]  # kubectl exec reaches it too
    debugger = ended(kube, "debugger")
    assert debugger.state.terminated.exit_code == 0 and debugger.restart_count == 0
    assert debugger.ready is False and debugger.image == BUSYBOX
    logs = kube.kubectl("logs", "web", "-c", "debugger").stdout
    assert "hi-from-debugger" in logs and "while true" in logs

    # non-interactive, no target: its own PID namespace, as the pod gives every container
    kube.kubectl(*DEBUG, "--container", "idle", "--", "sh", "-c", "ps; echo own-namespace")
    ended(kube, "idle")
    own = kube.kubectl("logs", "web", "-c", "idle").stdout
    assert "own-namespace" in own and "while true" not in own

    # a sync ran for the second one: the first is still its one ended instance
    assert statuses(kube)["debugger"].container_id == debugger.container_id
    names = [c.metadata.name for c in list_containers(node.endpoint)]
    assert sorted(names) == ["app", "debugger", "idle"]
    pod = kube.core.read_namespaced_pod("web", "default")
    assert pod.status.phase == "Running"
    assert {c.type: c.status for c in pod.status.conditions}["Ready"] == "True"
    again = statuses(kube, "container_statuses")["app"]
    assert (again.container_id, again.restart_count) == (app.container_id, 0)
    (shown,) = node.pods().values()  # pkletd status
    assert [(c["name"], c["state"], c.get("ephemeral", False)) for c in shown["containers"]] == [
        ("app", "running", False),
        ("debugger", "terminated", True),
        ("idle", "terminated", True),
    ]


def test_a_target_the_api_does_not_know_is_refused_and_the_pod_untouched(
    node: Pkletd, kube: Kube
) -> None:
    kube.core.create_namespaced_pod("default", web_pod())
    app = app_running(kube)
    refused = kube.kubectl(*DEBUG, "--target", "nope", "--", "true", check=False)
    assert refused.returncode != 0
    assert 'spec.ephemeralContainers[0].targetContainerName: Not found: "nope"' in refused.stderr
    pod = kube.core.read_namespaced_pod("web", "default")
    assert not pod.spec.ephemeral_containers and pod.status.phase == "Running"
    assert statuses(kube, "container_statuses")["app"].container_id == app.container_id


def test_a_target_that_does_not_run_is_the_kubelets_event_and_the_pod_goes_on(
    node: Pkletd, kube: Kube
) -> None:
    late = {"name": "late", "image": "pkletd.local/absent:1", "imagePullPolicy": "Never"}
    kube.core.create_namespaced_pod("default", web_pod(late))
    app = app_running(kube)
    kube.kubectl(*DEBUG, "--target", "late", "--container", "debugger", "--", "true")

    def failed_event() -> Any:
        found = kube.core.list_namespaced_event("default").items
        return next(
            (
                e
                for e in found
                if e.reason == "Failed"
                and e.involved_object.field_path == "spec.ephemeralContainers{debugger}"
            ),
            None,
        )

    event = wait_for("the kubelet's Failed event", failed_event, timeout=60)
    assert (event.type, event.message) == ("Warning", "Error: unable to find target container late")

    def config_error() -> Any:
        debugger = statuses(kube).get("debugger")
        waiting = debugger.state.waiting if debugger is not None else None
        return waiting if waiting and waiting.reason == "CreateContainerConfigError" else None

    waiting = wait_for("the debugger's CreateContainerConfigError in the API", config_error)
    assert waiting.message == "unable to find target container late"
    again = statuses(kube, "container_statuses")["app"]
    assert (again.container_id, again.restart_count, again.ready) == (app.container_id, 0, True)
    assert kube.core.read_namespaced_pod("web", "default").status.phase == "Pending"  # late's
