"""exec, attach, port-forward and run on a real pkletd (real containerd) joined to the real
control plane: ``kubectl exec`` (output, exit status, piped stdin, a terminal), ``kubectl
attach``, ``kubectl port-forward``, the Python client's exec over WebSocket, all through
kube-apiserver's proxy to the node's kubelet port, ``/run``, and what a bad request gets,
while other requests go on being answered."""

from __future__ import annotations

import http.client
import re
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes.stream import stream

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for
from tests.workers.http.kubeletapi_helpers import (
    grant_kubelet_api,
    kubelet_get,
    kubelet_request,
    user_subject,
)

pytestmark = pytest.mark.slow

SITE = "mkdir -p /www && echo hello-from-pod > /www/index.html && exec httpd -f -p 8080 -h /www"
ECHO = "while read line; do echo got:$line; done"
PROMPT_S = 2.0  # what "promptly" means for a request made while streams are open


def box_pod() -> dict[str, Any]:
    """A pod on the pod network: ``web`` serves a page on 8080, ``echo`` answers each line
    of its stdin (kept open for attach)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "box", "namespace": "default"},
        "spec": {
            "nodeName": "testnode",
            "automountServiceAccountToken": False,
            "terminationGracePeriodSeconds": 1,
            "containers": [
                {"name": "web", "image": BUSYBOX, "command": ["sh", "-c", SITE]},
                {"name": "echo", "image": BUSYBOX, "command": ["sh", "-c", ECHO], "stdin": True},
            ],
        },
    }


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@dataclass
class Node:
    pkletd: Pkletd
    apiserver: ControlPlane
    kube: Kube
    uid: str

    def kubectl(self, *args: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
        return self.kube.kubectl(*args, **kwargs)

    def popen(self, *args: str) -> subprocess.Popen[str]:
        return subprocess.Popen(
            self.kube.kubectl_command(*args),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )

    def admin(self, method: str, path: str, **kwargs: Any) -> tuple[int, str]:
        reply = kubelet_request(self.pkletd, self.apiserver, method, path, user="ops", **kwargs)
        return reply.status, reply.text


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane, kube: Kube) -> Node:
    grant_kubelet_api(kube, "kubelet-api-streaming", [user_subject("ops")])  # not bob
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", box_pod())

    def both_running() -> bool:
        pod = pkletd.pods().get("box")
        return pod is not None and all(c["state"] == "running" for c in pod["containers"])

    wait_for("both containers of box running", both_running, timeout=60)
    wait_for("the page served", lambda: "hello" in exec_out(kube, "wget -qO- 127.0.0.1:8080"))
    uid = kube.core.read_namespaced_pod("box", "default").metadata.uid
    return Node(pkletd, control_plane, kube, uid)


def exec_out(kube: Kube, script: str) -> str:
    return kube.kubectl("exec", "box", "-c", "web", "--", "sh", "-c", script, check=False).stdout


def ended(process: subprocess.Popen[str], timeout: float = 20.0) -> tuple[int, str, str]:
    """Wait for a kubectl to end (its stdin closed by now or not); its exit status, stdout
    and stderr."""
    try:
        code = process.wait(timeout)
    except subprocess.TimeoutExpired:
        raise AssertionError(f"kubectl still running after {timeout}s") from None
    assert process.stdout is not None and process.stderr is not None
    return code, process.stdout.read(), process.stderr.read()


@pytest.fixture
def kubectls() -> Iterator[list[subprocess.Popen[str]]]:
    """kubectl processes a test starts; any still running at the end is killed."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
        process.wait(10)
        for pipe in (process.stdin, process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()


# --- exec ---------------------------------------------------------------------------------


def test_kubectl_exec_output_and_exit_status(node: Node) -> None:
    result = node.kubectl(
        "exec", "box", "-c", "web", "--", "sh", "-c", "echo out; echo err >&2; exit 3", check=False
    )
    assert (result.returncode, result.stdout) == (3, "out\n")
    assert "err\n" in result.stderr
    ok = node.kubectl("exec", "box", "-c", "web", "--", "cat", "/www/index.html")
    assert ok.stdout == "hello-from-pod\n"
    # kubectl asks kube-apiserver for WebSocket (GET, verb get) and kube-apiserver speaks
    # SPDY to the kubelet: one request each time, upgraded (the test API server made
    # kubectl fall back to SPDY, a POST after each refused GET)
    execs = node.apiserver.audit_events("pods", "exec")
    assert [(e["verb"], e["responseStatus"]["code"]) for e in execs[-2:]] == [  # type: ignore[index]
        ("get", 101),
        ("get", 101),
    ]


def test_kubectl_exec_with_stdin(node: Node) -> None:
    big = "".join(f"line {n} of the input\n" for n in range(20000))  # ~450 kB, past any buffer
    result = node.kubectl("exec", "-i", "box", "-c", "web", "--", "tr", "a-z", "A-Z", input=big)
    assert result.stdout == big.upper()


def test_kubectl_exec_with_a_terminal(node: Node) -> None:
    command = " ".join(node.kube.kubectl_command("exec", "-it", "box", "-c", "web", "--", "sh"))
    result = subprocess.run(
        ["script", "-qefc", command, "/dev/null"],
        input="tty; echo answer-$((40+2))\nexit 7\n",
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert "/dev/pts/" in result.stdout and "answer-42" in result.stdout
    assert result.returncode == 7


def test_exec_over_websocket_with_the_python_client(node: Node) -> None:
    session = stream(
        node.kube.core.connect_get_namespaced_pod_exec,
        "box",
        "default",
        container="web",
        command=["sh", "-c", "read x; echo ws-$x; echo oops >&2; exit 4"],
        stdin=True,
        stdout=True,
        stderr=True,
        tty=False,
        _preload_content=False,
    )
    try:
        session.write_stdin("42\n")
        session.run_forever(timeout=20)
        assert session.read_stdout() == "ws-42\n"
        assert session.read_stderr() == "oops\n"
        assert session.returncode == 4
    finally:
        session.close()
        session.sock.shutdown()  # close() leaves the socket open when the server closed first


# --- attach and port-forward ------------------------------------------------------------------


def test_kubectl_attach_talks_to_the_container(
    node: Node, kubectls: list[subprocess.Popen[str]]
) -> None:
    attach = node.popen("attach", "-i", "box", "-c", "echo")
    kubectls.append(attach)
    assert attach.stdin is not None and attach.stdout is not None
    for word in ("ping", "pong"):
        attach.stdin.write(f"{word}\n")
        attach.stdin.flush()
        assert attach.stdout.readline() == f"got:{word}\n"
    attach.terminate()
    assert attach.wait(10) is not None
    pod = node.pkletd.pods()["box"]
    assert all(c["state"] == "running" for c in pod["containers"])  # detaching stops nothing


def test_kubectl_port_forward_carries_requests(
    node: Node, kubectls: list[subprocess.Popen[str]]
) -> None:
    forward = node.popen("port-forward", "pod/box", ":8080")
    kubectls.append(forward)
    assert forward.stdout is not None
    line = forward.stdout.readline()
    found = re.search(r"127\.0\.0\.1:(\d+) -> 8080", line)
    assert found, line
    local = int(found.group(1))
    for n in range(20):
        connection = http.client.HTTPConnection("127.0.0.1", local, timeout=10)
        try:
            connection.request("GET", f"/index.html?n={n}")
            response = connection.getresponse()
            assert (response.status, response.read()) == (200, b"hello-from-pod\n")
        finally:
            connection.close()
    forward.terminate()
    assert forward.wait(10) is not None


# --- /run, bad requests, other requests meanwhile ----------------------------------------------


def test_run_answers_the_output(node: Node) -> None:
    base = "/run/default/box/web"
    assert node.admin("POST", f"{base}?cmd=echo+hello+run") == (200, "hello run\n")
    # split on spaces, as the kubelet splits it: no shell, no quoting
    status, text = node.admin("POST", f"/run/default/box/{node.uid}/web?cmd=ls+/www")
    assert (status, text) == (200, "index.html\n")
    assert node.admin("POST", f"{base}?cmd=false") == (500, "command 'false' exited with 1: ")
    assert node.admin("POST", "/run/default/missing/web?cmd=true") == (404, "pod does not exist")
    assert node.admin("POST", "/run/default/box/nope?cmd=true") == (
        500,
        'container not found ("nope")',
    )
    assert node.admin("GET", f"{base}?cmd=true")[0] == 405


def test_bad_requests_get_the_kubelets_answers(node: Node) -> None:
    upgrade = {"Connection": "Upgrade", "Upgrade": "SPDY/3.1"}
    websocket = {"Connection": "Upgrade", "Upgrade": "websocket"}
    streams = "command=ls&output=1"
    cases = [
        (f"/exec/default/missing/web?{streams}", upgrade, 404, "pod does not exist"),
        (f"/exec/default/box/nope?{streams}", upgrade, 500, 'container not found ("nope")'),
        (f"/exec/default/box/other-uid/web?{streams}", upgrade, 500, 'container not found ("web")'),
        ("/exec/default/box/web?command=ls", upgrade, 400, "you must specify at least 1 of stdin, "
         "stdout, stderr"),
        ("/exec/default/box/web?command=ls&output=true", upgrade, 400, "you must specify at least "
         "1 of stdin, stdout, stderr"),
        (f"/exec/default/box/web?{streams}", {}, 500, "Upgrade request required\n"),
        ("/attach/default/box/nope?output=1", upgrade, 500, "container nope not found in pod "
         "box_default"),
        ("/portForward/default/missing", upgrade, 404, "pod does not exist"),
        ("/portForward/default/box/other-uid", upgrade, 404, "pod not found"),
        ("/portForward/default/box", websocket, 400, 'query parameter "port" is required'),
        ("/portForward/default/box?port=0", websocket, 400, 'port "0" must be > 0'),
    ]  # fmt: skip
    for path, headers, status, text in cases:
        assert node.admin("POST", path, headers=headers) == (status, text), path
    # through the API server, which checks the container itself
    result = node.kubectl("exec", "box", "-c", "nope", "--", "ls", check=False)
    assert result.returncode == 1
    assert "container nope is not valid for pod box" in result.stderr
    # the filter in front of them
    path = f"/exec/default/box/web?{streams}"
    assert kubelet_get(node.pkletd, node.apiserver, path) == (401, "Unauthorized")
    assert kubelet_get(node.pkletd, node.apiserver, path, user="bob") == (
        403,
        "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)",
    )
    assert node.pkletd.all_running()


def test_open_streams_leave_other_requests_prompt(
    node: Node, kubectls: list[subprocess.Popen[str]]
) -> None:
    cats = [node.popen("exec", "-i", "box", "-c", "web", "--", "cat") for _ in range(3)]
    kubectls.extend(cats)
    forward = node.popen("port-forward", "pod/box", ":8080")
    kubectls.append(forward)
    for cat in cats:
        assert cat.stdin is not None and cat.stdout is not None
        cat.stdin.write("still here\n")
        cat.stdin.flush()
        assert cat.stdout.readline() == "still here\n"
    for path in ("/pods", "/healthz", "/runningpods/"):
        started = time.monotonic()
        status, _ = node.admin("GET", path)
        assert status == 200 and time.monotonic() - started < PROMPT_S, path
    assert node.kubectl("logs", "box", "-c", "web").returncode == 0
    # the client closing its stdin ends the command, and the stream with it
    for cat in cats:
        assert cat.stdin is not None
        cat.stdin.close()
        assert ended(cat)[0] == 0
    # the command ending ends the stream, stdin still open
    head = node.popen("exec", "-i", "box", "-c", "web", "--", "head", "-n1")
    kubectls.append(head)
    assert head.stdin is not None
    head.stdin.write("first\nsecond\n")
    head.stdin.flush()
    code, out, _ = ended(head)
    assert (code, out) == (0, "first\n")
