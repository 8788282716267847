"""The soak's pods: a mix of what a node runs, some restarting on purpose.

Every 20 pods hold, in this order (``CYCLE``):

- ``plain``: one busybox loop (host network);
- ``exec``: readiness and liveness exec probes (host network);
- ``http``: busybox httpd on the pod network, readiness and liveness ``httpGet``;
- ``tcp``: the same server, readiness and liveness ``tcpSocket``;
- ``init``: two init containers, then the loop (host network);
- ``api``: a pod created through the API server (not a static pod) reading a ConfigMap
  as a volume and as environment, so the pod-objects worker has something to follow;
- ``crash`` (on purpose): exits 1 three seconds after each start (CrashLoopBackOff);
- ``sick`` (on purpose): fails its liveness probe five seconds after each start.

The last two restart by design: the soak leaves them out of "restarts caused" and uses
them to see that status updates are not lost (their restart counts keep moving).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.harness.node import BUSYBOX, NODE, pod_manifest

SLEEP = "trap 'exit 0' TERM; while true; do sleep 1; done"
HTTPD = "mkdir -p /www && echo ok > /www/healthz && exec httpd -f -p 8080 -h /www"
CRASH = "echo starting; sleep 3; echo crashing on purpose; exit 1"
SICK = f"touch /tmp/alive; sleep 5; rm /tmp/alive; {SLEEP}"
CONFIG_MAP = "soak-config"
ON_PURPOSE = ("crash", "sick")
CYCLE = (
    "plain", "exec", "http", "tcp", "init", "api", "plain", "exec", "http", "tcp",
    "init", "api", "plain", "exec", "init", "api", "plain", "api", "crash", "sick",
)  # fmt: skip


def _probe(handler: dict[str, Any], period: int) -> dict[str, Any]:
    return {**handler, "periodSeconds": period, "timeoutSeconds": 2}


def plain(name: str) -> dict[str, Any]:
    return pod_manifest(name, SLEEP)


def exec_probed(name: str) -> dict[str, Any]:
    manifest = pod_manifest(name, f"touch /tmp/ready; {SLEEP}")
    container = manifest["spec"]["containers"][0]
    container["readinessProbe"] = _probe({"exec": {"command": ["cat", "/tmp/ready"]}}, 10)
    container["livenessProbe"] = _probe({"exec": {"command": ["true"]}}, 10)
    return manifest


def _served(name: str, handler: dict[str, Any]) -> dict[str, Any]:
    manifest = pod_manifest(name, HTTPD, host_network=False)
    container = manifest["spec"]["containers"][0]
    container["ports"] = [{"name": "http", "containerPort": 8080}]
    container["readinessProbe"] = _probe(handler, 5)
    container["livenessProbe"] = _probe(handler, 10)
    return manifest


def http_probed(name: str) -> dict[str, Any]:
    return _served(name, {"httpGet": {"path": "/healthz", "port": "http"}})


def tcp_probed(name: str) -> dict[str, Any]:
    return _served(name, {"tcpSocket": {"port": 8080}})


def with_init(name: str) -> dict[str, Any]:
    manifest = plain(name)
    manifest["spec"]["initContainers"] = [
        {"name": f"i{i}", "image": BUSYBOX, "command": ["sh", "-c", f"echo init {i}"]}
        for i in range(2)
    ]
    return manifest


def api_pod(name: str) -> dict[str, Any]:
    """A pod for the API server, bound to the node, reading ``CONFIG_MAP`` two ways."""
    manifest = plain(name)
    spec = manifest["spec"]
    spec["nodeName"] = NODE
    spec["automountServiceAccountToken"] = False
    spec["volumes"] = [{"name": "config", "configMap": {"name": CONFIG_MAP}}]
    container = spec["containers"][0]
    container["volumeMounts"] = [{"name": "config", "mountPath": "/config"}]
    container["envFrom"] = [{"configMapRef": {"name": CONFIG_MAP}}]
    return manifest


def crashing(name: str) -> dict[str, Any]:
    return pod_manifest(name, CRASH)


def sick(name: str) -> dict[str, Any]:
    manifest = pod_manifest(name, SICK)
    liveness = {"exec": {"command": ["cat", "/tmp/alive"]}, "failureThreshold": 1}
    manifest["spec"]["containers"][0]["livenessProbe"] = _probe(liveness, 2)
    return manifest


BUILDERS: dict[str, Callable[[str], dict[str, Any]]] = {
    "plain": plain,
    "exec": exec_probed,
    "http": http_probed,
    "tcp": tcp_probed,
    "init": with_init,
    "api": api_pod,
    "crash": crashing,
    "sick": sick,
}


def config_map() -> dict[str, Any]:
    return {"metadata": {"name": CONFIG_MAP}, "data": {"GREETING": "hello from the soak"}}


@dataclass
class PodSet:
    """The mix's manifests by pod name: static ones (files) and API ones."""

    static: dict[str, dict[str, Any]] = field(default_factory=dict)
    api: dict[str, dict[str, Any]] = field(default_factory=dict)
    on_purpose: set[str] = field(default_factory=set)  # as pkletd status names them

    @classmethod
    def of(cls, count: int) -> PodSet:
        pods = cls()
        for i in range(count):
            kind = CYCLE[i % len(CYCLE)]
            name = f"soak-{kind}-{i:02d}"
            manifest = BUILDERS[kind](name)
            (pods.api if kind == "api" else pods.static)[name] = manifest
            if kind in ON_PURPOSE:
                pods.on_purpose.add(status_name(name, kind == "api"))
        return pods

    def status_names(self) -> set[str]:
        """Every pod as ``pkletd status`` names it (a static pod carries the node's name)."""
        return {status_name(n, False) for n in self.static} | set(self.api)

    def stable(self) -> set[str]:
        """The pods that must never restart."""
        return self.status_names() - self.on_purpose


def status_name(name: str, from_api: bool) -> str:
    return name if from_api else f"{name}-{NODE}"


def fuzz_bases() -> list[dict[str, Any]]:
    """Valid static pods the manifest fuzzer mutates (host network: no CNI per try)."""
    return [copy.deepcopy(BUILDERS[kind]("base")) for kind in ("plain", "exec", "init")]
