"""The kubelet API of a real pkletd joined to the real control plane: HTTPS with client
certificates and service-account tokens, which kube-apiserver reviews (TokenReview,
SubjectAccessReview against RBAC), ``kubectl logs`` through the API server's proxy
(``-f``, ``--tail``, ``--previous``, ``--since``), and bad requests that leave every
worker running. The API server's ``nodes/<node>/proxy`` alone stays on the test API
server: kube-apiserver refuses to proxy to a node at a loopback address, and nodes here
must be at 127.0.0.1."""

from __future__ import annotations

import datetime as dt
import json
import socket
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import kubernetes.client
import pytest

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, join, wait_for
from tests.workers.http.kubeletapi_helpers import grant_kubelet_api, kubelet_get, user_subject

pytestmark = pytest.mark.slow

COUNTER = (
    "n=$(cat /data/n 2>/dev/null || echo 0); echo $((n+1)) > /data/n; echo attempt-$n; "
    'if [ "$n" -eq 0 ]; then exit 1; fi; '
    "i=0; while true; do echo tick-$i; i=$((i+1)); sleep 0.3; done"
)


TOKENS_NAMESPACE = "kubelet-api-tokens"
REVIEWS = ("tokenreviews", "subjectaccessreviews")


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


def service_account_token(kube: Kube, name: str) -> str:
    """A token of the service account ``name`` (made now) from the TokenRequest API."""
    account = {"metadata": {"name": name}}
    kube.core.create_namespaced_service_account(TOKENS_NAMESPACE, account)
    request = {"spec": {"expirationSeconds": 3600}}
    made = kube.core.create_namespaced_service_account_token(name, TOKENS_NAMESPACE, request)
    return str(made.status.token)


def counter_pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "nodeName": "testnode",
            "automountServiceAccountToken": False,
            "hostNetwork": True,
            "terminationGracePeriodSeconds": 1,
            "volumes": [{"name": "data", "emptyDir": {}}],
            "containers": [
                {
                    "name": "c",
                    "image": BUSYBOX,
                    "imagePullPolicy": "Never",
                    "command": ["sh", "-c", COUNTER],
                    "volumeMounts": [{"name": "data", "mountPath": "/data"}],
                }
            ],
        },
    }


def test_kubelet_api_authenticates_and_asks_the_api_server(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    kube.core.create_namespace({"metadata": {"name": TOKENS_NAMESPACE}})
    alice, bob = (service_account_token(kube, name) for name in ("alice", "bob"))
    alice_account = {"kind": "ServiceAccount", "name": "alice", "namespace": TOKENS_NAMESPACE}
    grant_kubelet_api(kube, "kubelet-api-e2e", [user_subject("ops"), alice_account])
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", counter_pod("counter"))
    pkletd.wait_api_pod("counter")
    reviews_before = {r: len(control_plane.audit_events(r)) for r in REVIEWS}

    status, body = kubelet_get(pkletd, control_plane, "/pods", user="ops")
    assert status == 200
    pods = kubernetes.client.ApiClient().deserialize(body, "V1PodList", "application/json")
    assert [p.metadata.name for p in pods.items] == ["counter"]
    assert kubelet_get(pkletd, control_plane, "/pods") == (401, "Unauthorized")
    assert kubelet_get(pkletd, control_plane, "/pods", token=alice)[0] == 200
    bob_user = f"system:serviceaccount:{TOKENS_NAMESPACE}:bob"
    assert kubelet_get(pkletd, control_plane, "/pods", token=bob) == (
        403,
        f"Forbidden (user={bob_user}, verb=get, resource=nodes, subresource=proxy)",
    )
    assert kubelet_get(pkletd, control_plane, "/pods", token="nobody")[0] == 401
    cert, key = control_plane.client_cert("ops", ["ops"])
    assert curl(pkletd, "--cert", str(cert), "--key", str(key)) == "200"
    assert curl(pkletd) == "401"
    assert curl(pkletd, "-H", f"Authorization: Bearer {bob}") == "403"
    node_user = f"system:node:{pkletd.node}"
    for resource in REVIEWS:  # asked as the node itself
        reviews = control_plane.audit_events(resource)[reviews_before[resource] :]
        assert reviews and all(r["user"]["username"] == node_user for r in reviews), resource  # type: ignore[index]
    configz = json.loads(kubelet_get(pkletd, control_plane, "/configz", user="ops")[1])
    assert configz["kubeletconfig"]["port"] == pkletd.port
    assert configz["kubeletconfig"]["authorization"]["mode"] == "Webhook"
    assert (Path(pkletd.root_dir) / "pki" / "kubelet.crt").exists()


def test_the_api_servers_node_proxy_reaches_the_kubelet_api(
    pkletd: Pkletd, make_apiserver: Callable[..., ApiServer]
) -> None:
    """On the test API server: kube-apiserver refuses ``nodes/<node>/proxy`` to a node
    whose address is loopback ("address not allowed"), and nodes here must be at
    127.0.0.1, so the real one cannot show this."""
    apiserver = make_apiserver()
    join(pkletd, apiserver)
    own = Kube(apiserver)
    try:
        own.core.create_namespaced_pod("default", counter_pod("counter"))
        pkletd.wait_api_pod("counter")
        # the API server's own proxy, with its kubelet-client certificate
        raw = own.kubectl("get", "--raw", "/api/v1/nodes/testnode/proxy/pods").stdout
        assert [p["metadata"]["name"] for p in json.loads(raw)["items"]] == ["counter"]
    finally:
        own.close()


def curl(pkletd: Pkletd, *args: str) -> str:
    """The status code the real curl gets for ``/pods`` on the kubelet API."""
    url = f"https://127.0.0.1:{pkletd.port}/pods"
    done = subprocess.run(
        ["curl", "-sk", "-o", "/dev/null", "-w", "%{http_code}", *args, url],
        capture_output=True, text=True, timeout=30, check=True,
    )  # fmt: skip
    return done.stdout


def test_kubectl_logs_through_the_api_server(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", counter_pod("counter"))

    def restarted_and_ticking() -> bool:
        pod = pkletd.pods().get("counter")
        if pod is None or pod["phase"] != "Running":
            return False
        logs = kube.kubectl("logs", "counter", check=False).stdout
        return "tick-1" in logs

    wait_for("the second attempt ticking", restarted_and_ticking, timeout=60)

    assert kube.kubectl("logs", "counter", "--previous").stdout == "attempt-0\n"
    current = kube.kubectl("logs", "counter").stdout
    assert current.startswith("attempt-1\ntick-0\n")
    last = kube.kubectl("logs", "counter", "--tail=1").stdout
    assert last.count("\n") == 1 and last.startswith("tick-")
    assert kube.kubectl("logs", "counter", "--since=1h").stdout.startswith("attempt-1\n")
    future = (dt.datetime.now(dt.UTC) + dt.timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    assert kube.kubectl("logs", "counter", f"--since-time={future}").stdout == ""
    stamped = kube.kubectl("logs", "counter", "--tail=1", "--timestamps").stdout
    assert stamped[:4].isdigit() and " tick-" in stamped

    follow = subprocess.Popen(
        kube.kubectl_command("logs", "-f", "--tail=1", "counter"),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        assert follow.stdout is not None
        seen = [follow.stdout.readline() for _ in range(3)]
        numbers = [int(line.decode().strip().split("-")[1]) for line in seen]
        assert numbers == sorted(numbers) and len(set(numbers)) == 3  # new lines as they come
    finally:
        follow.kill()
        follow.wait(10)
        if follow.stdout is not None:
            follow.stdout.close()

    missing = kube.kubectl("logs", "counter", "-c", "nope", check=False)
    assert missing.returncode != 0


def test_bad_requests_leave_the_node_serving(
    pkletd: Pkletd, control_plane: ControlPlane, kube: Kube
) -> None:
    grant_kubelet_api(kube, "kubelet-api-e2e", [user_subject("ops")])
    join(pkletd, control_plane)
    kube.core.create_namespaced_pod("default", counter_pod("counter"))
    pkletd.wait_api_pod("counter")
    for path, status in [
        ("/containerLogs/default/missing/c", 404),
        ("/containerLogs/default/counter/nope", 404),
        ("/containerLogs/default/counter/c?tailLines=x", 400),
        ("/logs/%2e%2e/%2e%2e/etc/passwd", 400),
        ("/pods?" + "x" * 20000, 400),
    ]:
        assert kubelet_get(pkletd, control_plane, path, user="ops")[0] in (status, 414), path
    idle = [socket.create_connection(("127.0.0.1", pkletd.port), timeout=10) for _ in range(50)]
    try:
        for sock in idle[:10]:
            sock.sendall(b"\x16\x03\x01 garbage, not a TLS hello")
        assert kubelet_get(pkletd, control_plane, "/healthz", user="ops") == (200, "ok")
    finally:
        for sock in idle:
            sock.close()
    assert pkletd.all_running()
