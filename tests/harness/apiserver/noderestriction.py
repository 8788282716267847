"""NodeRestriction: what a kubelet (user ``system:node:<n>`` in ``system:nodes``) may change.

As the admission plugin rules: a node may only create mirror pods (annotation
``kubernetes.io/config.mirror``) bound to itself, owned by its Node as controller, that
reference no service account, secret, configmap or claim; delete pods and update the status
of pods bound to itself (not their labels); modify only its own Node (no taints, no
restricted ``kubernetes.io``/``k8s.io`` labels); touch only its own Lease in kube-node-lease;
request tokens only for pods running on itself; create, update or delete only its own
CSINode; and change nothing of a claim through ``persistentvolumeclaims/status`` but
``status.capacity``/``conditions``/``allocatedResources``/``allocatedResourceStatuses``.
Errors are 403 Forbidden Statuses with
the plugin's wording, e.g. ``nodes "n2" is forbidden: node "n1" is not allowed to modify
node "n2"``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.auth import UserInfo
from tests.harness.apiserver.store import Store

if TYPE_CHECKING:
    from tests.harness.apiserver.admission import AdmissionRequest

Obj = dict[str, Any]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
NODE_LEASE_NAMESPACE = "kube-node-lease"
_KUBELET_LABELS = {
    "kubernetes.io/hostname",
    "kubernetes.io/arch",
    "kubernetes.io/os",
    "beta.kubernetes.io/arch",
    "beta.kubernetes.io/os",
    "beta.kubernetes.io/instance-type",
    "node.kubernetes.io/instance-type",
    "failure-domain.beta.kubernetes.io/region",
    "failure-domain.beta.kubernetes.io/zone",
    "topology.kubernetes.io/region",
    "topology.kubernetes.io/zone",
}


def node_name_of(user: UserInfo) -> str | None:
    if user.name.startswith("system:node:") and "system:nodes" in user.groups:
        return user.name[len("system:node:") :]
    return None


class NodeRestriction:
    def __init__(self, store: Store) -> None:
        self.store = store

    def admit(self, request: AdmissionRequest) -> None:
        node = node_name_of(request.user)
        if node is None:
            return
        if not node:
            raise request.forbid(f'could not determine node from user "{request.user.name}"')
        target = (request.group, request.resource)
        if target == ("", "pods"):
            self._pod(node, request)
        elif target == ("", "nodes"):
            self._node(node, request)
        elif target == ("", "serviceaccounts") and request.subresource == "token":
            self._token(node, request)
        elif target == ("coordination.k8s.io", "leases"):
            self._lease(node, request)
        elif target == ("storage.k8s.io", "csinodes"):
            self._csi_node(node, request)
        elif target == ("", "persistentvolumeclaims") and request.subresource == "status":
            self._claim_status(node, request)

    def _pod(self, node: str, request: AdmissionRequest) -> None:
        if request.subresource == "status":
            if request.operation != "UPDATE":
                raise request.forbid(f'unexpected operation "{request.operation}"')
            old, new = request.old or {}, request.obj or {}
            if (old.get("spec") or {}).get("nodeName") != node:
                raise request.forbid(
                    f'node "{node}" can only update pod status for pods with '
                    "spec.nodeName set to itself"
                )
            if old["metadata"].get("labels") != new["metadata"].get("labels"):
                raise request.forbid(f'node "{node}" cannot update labels through pod status')
            return
        if request.subresource == "eviction":
            pod = self.store.get("pods", request.namespace, request.name)
            if pod is not None and (pod.get("spec") or {}).get("nodeName") != node:
                raise request.forbid(
                    f"node {node} can only evict pods with spec.nodeName set to itself"
                )
            return
        if request.subresource:
            raise request.forbid(
                f'unexpected pod subresource "{request.subresource}", only '
                "'status' and 'eviction' are allowed"
            )
        if request.operation == "CREATE":
            self._mirror_pod(node, request)
        elif request.operation == "DELETE":
            pod = self.store.get("pods", request.namespace, request.name)
            if pod is None:
                raise errors.not_found("", "pods", request.name)
            if (pod.get("spec") or {}).get("nodeName") != node:
                raise request.forbid(
                    f'node "{node}" can only delete pods with spec.nodeName set to itself'
                )
        else:
            raise request.forbid(
                f'unexpected operation "{request.operation}", node "{node}" '
                "can only create and delete mirror pods"
            )

    def _mirror_pod(self, node: str, request: AdmissionRequest) -> None:
        pod = request.obj or {}
        spec = pod.get("spec") or {}
        if MIRROR_ANNOTATION not in (pod["metadata"].get("annotations") or {}):
            raise request.forbid(
                f'pod does not have "{MIRROR_ANNOTATION}" annotation, node '
                f'"{node}" can only create mirror pods'
            )
        if spec.get("nodeName") != node:
            raise request.forbid(
                f'node "{node}" can only create pods with spec.nodeName set to itself'
            )
        owners = pod["metadata"].get("ownerReferences") or []
        if len(owners) > 1:
            raise request.forbid(
                f'node "{node}" can only create pods with a single owner reference set to itself'
            )
        owner = owners[0] if owners else {}
        if (owner.get("apiVersion"), owner.get("kind"), owner.get("name")) != ("v1", "Node", node):
            raise request.forbid(
                f'node "{node}" can only create pods with an owner reference set to itself'
            )
        if not owner.get("controller"):
            raise request.forbid(
                f'node "{node}" can only create pods with a controller owner '
                "reference set to itself"
            )
        if owner.get("blockOwnerDeletion"):
            raise request.forbid(
                f'node "{node}" must not set blockOwnerDeletion on an owner reference'
            )
        node_obj = self.store.get("nodes", "", node)
        if node_obj is None:
            raise errors.not_found("", "nodes", node)
        if owner.get("uid") != node_obj["metadata"]["uid"]:
            raise request.forbid(
                f"node {node} UID mismatch: expected {owner.get('uid')} got "
                f"{node_obj['metadata']['uid']}"
            )
        if spec.get("serviceAccountName"):
            raise request.forbid(
                f'node "{node}" can not create pods that reference a service account'
            )
        for kind, word in (
            ("secret", "secrets"),
            ("configMap", "configmaps"),
            ("persistentVolumeClaim", "persistentvolumeclaims"),
        ):
            if any(v.get(kind) is not None for v in spec.get("volumes") or []):
                raise request.forbid(f'node "{node}" can not create pods that reference {word}')

    def _node(self, node: str, request: AdmissionRequest) -> None:
        name = request.name or ((request.obj or {}).get("metadata") or {}).get("name", "")
        if name != node:
            raise request.forbid(f'node "{node}" is not allowed to modify node "{name}"')
        new = (request.obj or {}).get("metadata", {}).get("labels") or {}
        if request.operation == "CREATE":
            forbidden = _forbidden_labels(new, {})
            if forbidden:
                raise request.forbid(
                    f'node "{node}" is not allowed to set the following '
                    f"labels: {', '.join(forbidden)}"
                )
        if request.operation == "UPDATE":
            old_obj = request.old or {}
            if ((request.obj or {}).get("spec") or {}).get("taints") != (
                (old_obj.get("spec") or {}).get("taints")
            ):
                raise request.forbid(f'node "{node}" is not allowed to modify taints')
            forbidden = _forbidden_labels(new, old_obj["metadata"].get("labels") or {})
            if forbidden:
                raise request.forbid(f"is not allowed to modify labels: {', '.join(forbidden)}")

    def _token(self, node: str, request: AdmissionRequest) -> None:
        ref = ((request.obj or {}).get("spec") or {}).get("boundObjectRef") or {}
        if ref.get("apiVersion") != "v1" or ref.get("kind") != "Pod" or not ref.get("name"):
            raise request.forbid("node requested token not bound to a pod")
        if not ref.get("uid"):
            raise request.forbid("node requested token with a pod binding without a uid")
        pod = self.store.get("pods", request.namespace, ref["name"])
        if pod is None:
            raise errors.not_found("", "pods", ref["name"])
        if ref["uid"] != pod["metadata"]["uid"]:
            raise request.forbid(
                f"the UID in the bound object reference ({ref['uid']}) does not "
                "match the UID in record. The object might have been deleted "
                "and then recreated"
            )
        if (pod.get("spec") or {}).get("nodeName") != node:
            raise request.forbid(
                "node requested token bound to a pod scheduled on a different node"
            )

    def _lease(self, node: str, request: AdmissionRequest) -> None:
        if request.namespace != NODE_LEASE_NAMESPACE:
            raise request.forbid(
                f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
            )
        name = request.name or ((request.obj or {}).get("metadata") or {}).get("name", "")
        if name != node:
            raise request.forbid(
                "can only access node lease with the same name as the requesting node"
            )

    def _csi_node(self, node: str, request: AdmissionRequest) -> None:
        name = request.name or ((request.obj or {}).get("metadata") or {}).get("name", "")
        if name != node:
            raise request.forbid(
                "can only access CSINode with the same name as the requesting node"
            )

    def _claim_status(self, node: str, request: AdmissionRequest) -> None:
        if request.operation != "UPDATE":
            raise request.forbid(f'unexpected operation "{request.operation}"')
        if _claim_without_resize(request.obj or {}) != _claim_without_resize(request.old or {}):
            raise request.forbid(
                f'node "{node}" is not allowed to update fields other than '
                "status.capacity and status.conditions"
            )


_RESIZE_STATUS = ("capacity", "conditions", "allocatedResources", "allocatedResourceStatuses")


def _claim_without_resize(claim: Obj) -> Obj:
    meta = {k: v for k, v in (claim.get("metadata") or {}).items() if k != "resourceVersion"}
    status = {k: v for k, v in (claim.get("status") or {}).items() if k not in _RESIZE_STATUS}
    return {**claim, "metadata": meta, "status": status}


def _forbidden_labels(new: dict[str, str], old: dict[str, str]) -> list[str]:
    modified = {k for k in set(new) | set(old) if new.get(k) != old.get(k)}
    forbidden = []
    for label in sorted(modified):
        namespace = label.split("/", 1)[0] if "/" in label else ""
        if namespace == "node-restriction.kubernetes.io" or namespace.endswith(
            ".node-restriction.kubernetes.io"
        ):
            forbidden.append(label)
        elif _is_kubernetes_label(namespace) and not _is_kubelet_label(label, namespace):
            forbidden.append(label)
    return forbidden


def _is_kubernetes_label(namespace: str) -> bool:
    return any(namespace == d or namespace.endswith("." + d) for d in ("kubernetes.io", "k8s.io"))


def _is_kubelet_label(label: str, namespace: str) -> bool:
    if label in _KUBELET_LABELS:
        return True
    return any(
        namespace == d or namespace.endswith("." + d)
        for d in ("kubelet.kubernetes.io", "node.kubernetes.io")
    )
