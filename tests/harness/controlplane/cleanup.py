"""Between two tests on one control plane: what the first made is taken away.

The control plane runs for the whole test session, so each test leaves it as it found it:
its workloads (Deployments and ReplicaSets first, so nothing makes pods again), its pods
(grace 0: their nodes are stopped already), its nodes (the garbage collector takes their
Leases and mirror pods), CSRs, storage objects, the namespaces, ClusterRoles and
ClusterRoleBindings it made, and in the namespaces the control plane keeps what the test
added there (ServiceAccounts, Roles, PodDisruptionBudgets, ConfigMaps...): only what was
not there before it (``snapshot``), so the control plane's own objects stay. Nothing waits
for a namespace's deletion to finish: tests name their namespaces apart.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

# Namespaced kinds a test may make in a namespace it keeps (default): (API, plural).
NAMESPACED = (
    ("AppsV1Api", "deployment"),
    ("AppsV1Api", "replica_set"),
    ("AppsV1Api", "daemon_set"),
    ("BatchV1Api", "job"),
    ("CoreV1Api", "pod"),
    ("CoreV1Api", "config_map"),
    ("CoreV1Api", "secret"),
    ("CoreV1Api", "service"),
    ("CoreV1Api", "persistent_volume_claim"),
    ("CoreV1Api", "event"),
    ("CoreV1Api", "service_account"),
    ("PolicyV1Api", "pod_disruption_budget"),
    ("RbacAuthorizationV1Api", "role"),
    ("RbacAuthorizationV1Api", "role_binding"),
)
CLUSTER_WIDE = (
    ("CoreV1Api", "node"),
    ("CoreV1Api", "persistent_volume"),
    ("CertificatesV1Api", "certificate_signing_request"),
    ("StorageV1Api", "storage_class"),
    ("StorageV1Api", "csi_driver"),
    ("StorageV1Api", "volume_attachment"),
    ("NodeV1Api", "runtime_class"),
)
# Cluster-wide kinds the control plane has its own of: only those a test made go.
RBAC = (
    ("RbacAuthorizationV1Api", "cluster_role"),
    ("RbacAuthorizationV1Api", "cluster_role_binding"),
)
SYSTEM_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")
# What the control plane makes for itself and a test must not take away.
KEPT = {
    ("service", "default", "kubernetes"),
    ("config_map", "*", "kube-root-ca.crt"),
    ("config_map", "kube-public", "cluster-info"),
}


def _kept(kind: str, namespace: str, name: str) -> bool:
    return (kind, namespace, name) in KEPT or (kind, "*", name) in KEPT


def namespaces(api: client.ApiClient) -> set[str]:
    return {ns.metadata.name for ns in client.CoreV1Api(api).list_namespace().items}


@dataclass(frozen=True)
class Snapshot:
    """The names, before a test, of what the control plane has of its own."""

    namespaces: set[str]
    rbac: dict[str, set[str]]
    # (kind, namespace, name) in the namespaces the control plane keeps: its own
    # ConfigMaps, ServiceAccounts and Roles there are never taken away
    system: set[tuple[str, str, str]]


def _names(api: client.ApiClient, api_name: str, kind: str) -> set[str]:
    typed = getattr(client, api_name)(api)
    return {item.metadata.name for item in getattr(typed, f"list_{kind}")().items}


def snapshot(api: client.ApiClient) -> Snapshot:
    rbac = {kind: _names(api, api_name, kind) for api_name, kind in RBAC}
    system = {
        (kind, namespace, name)
        for namespace in SYSTEM_NAMESPACES
        for kind, _, name in _namespaced(api, namespace)
    }
    return Snapshot(namespaces(api), rbac, system)


def _ignore_gone(call: Callable[..., Any], *args: Any, **kwargs: Any) -> None:
    try:
        call(*args, **kwargs)
    except ApiException as exc:
        if exc.status not in (404, 409):
            raise


def _namespaced(api: client.ApiClient, namespace: str) -> Iterator[tuple[str, Any, str]]:
    for api_name, kind in NAMESPACED:
        typed = getattr(client, api_name)(api)
        for item in getattr(typed, f"list_namespaced_{kind}")(namespace).items:
            if not _kept(kind, namespace, item.metadata.name):
                yield kind, typed, item.metadata.name


def clean(api: client.ApiClient, before: Snapshot) -> None:
    """Delete what a test made, leaving what the control plane makes for itself."""
    core = client.CoreV1Api(api)
    namespaces_before = before.namespaces
    for namespace in SYSTEM_NAMESPACES:
        for kind, typed, name in _namespaced(api, namespace):
            if (kind, namespace, name) in before.system:
                continue
            delete = getattr(typed, f"delete_namespaced_{kind}")
            _ignore_gone(delete, name, namespace, grace_period_seconds=0)
    for namespace in namespaces(api) - namespaces_before - set(SYSTEM_NAMESPACES):
        for pod in core.list_namespaced_pod(namespace).items:
            _ignore_gone(core.delete_namespaced_pod, pod.metadata.name, namespace,
                         grace_period_seconds=0)  # fmt: skip
        _ignore_gone(core.delete_namespace, namespace)
    for api_name, kind in CLUSTER_WIDE:
        typed = getattr(client, api_name)(api)
        for item in getattr(typed, f"list_{kind}")().items:
            with contextlib.suppress(ApiException):
                _strip_finalizers(typed, kind, item)
            _ignore_gone(getattr(typed, f"delete_{kind}"), item.metadata.name)
    for api_name, kind in RBAC:
        typed = getattr(client, api_name)(api)
        for name in _names(api, api_name, kind) - before.rbac[kind]:
            _ignore_gone(getattr(typed, f"delete_{kind}"), name)


def _strip_finalizers(typed: Any, kind: str, item: Any) -> None:
    """Volumes and attachments keep finalizers their controllers drop only once a node
    says they are released: the node is gone, so nothing would."""
    if kind in ("persistent_volume", "volume_attachment") and item.metadata.finalizers:
        getattr(typed, f"patch_{kind}")(item.metadata.name, {"metadata": {"finalizers": None}})
