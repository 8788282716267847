"""The objects ``kubeadm init`` creates for nodes to join, made through the official client.

- ``kubeadm:kubelet-bootstrap``: bootstrap tokens (group
  ``system:bootstrappers:kubeadm:default-node-token``) may create CSRs
  (``system:node-bootstrapper``);
- ``kubeadm:node-autoapprove-bootstrap``: their ``nodeclient`` CSRs are approved by the
  controller manager's csrapproving controller;
- ``kubeadm:node-autoapprove-certificate-rotation``: nodes' ``selfnodeclient`` CSRs too
  (client certificate rotation);
- ``pkletd:manual-approval-bootstrap``: tokens in another group (``kubeadm token create
  --groups``) may create CSRs too, but nothing approves them: a test decides;
- ``kubeadm:get-nodes``: bootstrap tokens may read Nodes (``kubeadm join`` checks one);
- ``kubeadm:cluster-admins``: the group kubeadm's admin and the API server's kubelet
  client are in, bound to ``cluster-admin``;
- the ``cluster-info`` ConfigMap in ``kube-public``, readable by ``system:anonymous``.

Nodes get no RBAC binding: the Node authorizer is what lets a node in, as with kubeadm
(``system:node`` is bound to no one). Kubelet serving certificates (``kubelet-serving``)
are not approved by anyone, as with kubeadm: a test approves them.
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

BOOTSTRAPPERS = "system:bootstrappers:kubeadm:default-node-token"
MANUAL_APPROVAL = "system:bootstrappers:pkletd:manual-approval"
CLUSTER_ADMINS = "kubeadm:cluster-admins"
CSR_ROLE = "system:certificates.k8s.io:certificatesigningrequests:"


def _binding(name: str, role: str, kind: str, subject: str) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": role},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": subject}],
    }


CLUSTER_ROLE_BINDINGS = (
    _binding("kubeadm:kubelet-bootstrap", "system:node-bootstrapper", "Group", BOOTSTRAPPERS),
    _binding("kubeadm:node-autoapprove-bootstrap", CSR_ROLE + "nodeclient", "Group", BOOTSTRAPPERS),
    _binding(
        "kubeadm:node-autoapprove-certificate-rotation",
        CSR_ROLE + "selfnodeclient",
        "Group",
        "system:nodes",
    ),
    _binding(
        "pkletd:manual-approval-bootstrap", "system:node-bootstrapper", "Group", MANUAL_APPROVAL
    ),
    _binding("kubeadm:get-nodes", "kubeadm:get-nodes", "Group", BOOTSTRAPPERS),
    _binding(CLUSTER_ADMINS, "cluster-admin", "Group", CLUSTER_ADMINS),
)
GET_NODES = {
    "metadata": {"name": "kubeadm:get-nodes"},
    "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
}
CLUSTER_INFO_READER = "kubeadm:bootstrap-signer-clusterinfo"


def _cluster_info(url: str, ca_pem: str) -> dict[str, Any]:
    kubeconfig = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "",
                "cluster": {
                    "server": url,
                    "certificate-authority-data": base64.b64encode(ca_pem.encode()).decode(),
                },
            }
        ],
        "contexts": [],
        "users": [],
    }
    return {
        "metadata": {"name": "cluster-info", "namespace": "kube-public"},
        "data": {"kubeconfig": yaml.safe_dump(kubeconfig)},
    }


def _create(create: Callable[..., Any], *args: Any) -> None:
    """Create, and take an object that is already there (a restarted control plane)."""
    try:
        create(*args)
    except ApiException as exc:
        if exc.status != 409:
            raise


def _admin(kubeconfig: Path) -> client.ApiClient:
    return config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]


def apply(kubeconfig: Path, url: str, ca_pem: str) -> None:
    """Create what ``kubeadm init`` creates for joining nodes (already there is fine)."""
    with _admin(kubeconfig) as api:
        rbac = client.RbacAuthorizationV1Api(api)
        _create(rbac.create_cluster_role, GET_NODES)
        for binding in CLUSTER_ROLE_BINDINGS:
            _create(rbac.create_cluster_role_binding, binding)
        core = client.CoreV1Api(api)
        _create(core.create_namespaced_config_map, "kube-public", _cluster_info(url, ca_pem))
        reader = {
            "metadata": {"name": CLUSTER_INFO_READER, "namespace": "kube-public"},
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": ["cluster-info"],
                    "verbs": ["get"],
                }
            ],
        }
        _create(rbac.create_namespaced_role, "kube-public", reader)
        role_binding = _binding(
            CLUSTER_INFO_READER, CLUSTER_INFO_READER, "User", "system:anonymous"
        )
        role_binding["roleRef"]["kind"] = "Role"
        _create(rbac.create_namespaced_role_binding, "kube-public", role_binding)


def controllers_ready(kubeconfig: Path) -> bool:
    """The controller manager has made what a pod in ``default`` needs: the ``default``
    ServiceAccount (admission refuses pods without it) and ``kube-root-ca.crt``."""
    with _admin(kubeconfig) as api:
        core = client.CoreV1Api(api)
        try:
            core.read_namespaced_service_account("default", "default")
            core.read_namespaced_config_map("kube-root-ca.crt", "default")
        except ApiException as exc:
            if exc.status != 404:
                raise
            return False
    return True


def add_token(kubeconfig: Path, token: str, auto_approve: bool = True) -> None:
    """The Secret ``kubeadm token create`` writes for ``<id>.<secret>``; without
    ``auto_approve`` its group is one whose CSRs nobody approves."""
    token_id, _, secret = token.partition(".")
    data = {
        "token-id": token_id,
        "token-secret": secret,
        "usage-bootstrap-authentication": "true",
        "usage-bootstrap-signing": "true",
        "auth-extra-groups": BOOTSTRAPPERS if auto_approve else MANUAL_APPROVAL,
    }
    body = {
        "metadata": {"name": f"bootstrap-token-{token_id}", "namespace": "kube-system"},
        "type": "bootstrap.kubernetes.io/token",
        "stringData": data,
    }
    with _admin(kubeconfig) as api:
        _create(client.CoreV1Api(api).create_namespaced_secret, "kube-system", body)
