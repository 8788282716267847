"""What a kubelet may do: the Node authorizer, then RBAC's bootstrap policy
(``--authorization-mode=Node,RBAC`` of kube-apiserver 1.32, whose default RBAC binds no role
to ``system:nodes``).

A user ``system:node:<n>`` in the group ``system:nodes`` is node ``n``. For it:

* secrets and configmaps: ``get``, ``list`` and ``watch`` of one named object that a pod bound
  to ``n`` references (``nodegraph``); a list or watch names its object with
  ``fieldSelector=metadata.name=<name>`` (the request's name then, as the real RequestInfo
  makes it), anything broader is ``No Object name found``; a secret named by the ``csi``
  source of such a claim's volume counts too. Persistent volume claims: ``get`` only,
  likewise; their ``status``: ``update``/``patch``. Persistent volumes bound
  (``spec.claimRef``) to such a claim and volume attachments whose ``spec.nodeName`` is ``n``:
  ``get`` only.
* serviceaccounts: only ``create`` of ``serviceaccounts/<sa>/token`` for the service account
  of a pod bound to ``n`` (NodeRestriction then checks the pod binding); no read at all.
* pods (``AuthorizeNodeWithSelectors``, on by default in 1.32): ``get`` of a pod bound to
  ``n``, ``list``/``watch`` only with ``fieldSelector=spec.nodeName=n`` (or of one such pod
  by name), ``create``/``delete`` (mirror pods, NodeRestriction limits them), ``status``
  ``update``/``patch``, ``eviction`` ``create``.
* nodes (same gate): ``get``/``list``/``watch`` of its own Node only (by name or
  ``metadata.name`` selector), ``create``/``update``/``patch``, ``status`` ``update``/``patch``.
* leases: ``get``/``create``/``update``/``patch``/``delete`` of its own Lease in
  ``kube-node-lease``; csinodes likewise (its own, named ``n``; NodeRestriction checks a
  create's name).
* the rest of ``bootstrappolicy.NodeRules()``: read services; ``get`` endpoints; ``create``,
  ``update``, ``patch`` core/v1 events (not events.k8s.io); ``create`` tokenreviews and
  (local)subjectaccessreviews; certificatesigningrequests; csidrivers, runtimeclasses.
* and what RBAC gives every authenticated user: discovery paths (``/api``, ``/apis``,
  ``/openapi``, ``/version``, health) and ``create`` of the self-subject reviews.

A denial is the 403 Status with the node authorizer's reason, e.g. ``secrets "x" is forbidden:
User "system:node:n1" cannot get resource "secrets" in API group "" in the namespace "ns": no
relationship found between node 'n1' and this object``. Other users are not the node
authorizer's business: they go to the next authorizer (by default, every authenticated user
is allowed, as ``system:masters`` would be)::

    authorizer = cluster_authorizer(NodeAuthorizer(store))
    decision = authorizer(attributes)
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from tests.harness.apiserver.auth import Attributes, Authorizer, Decision, default_authorizer
from tests.harness.apiserver.nodegraph import NodeGraph, Vertex
from tests.harness.apiserver.selectors import FieldSelector, SelectorError
from tests.harness.apiserver.store import Store

NODES_GROUP = "system:nodes"
NODE_USER_PREFIX = "system:node:"
NODE_LEASE_NAMESPACE = "kube-node-lease"
READ = ("get", "list", "watch")
ALLOW = Decision(True)


@dataclass(frozen=True)
class Rule:
    """One RBAC ``PolicyRule``: resources are ``resource`` or ``resource/subresource``;
    ``paths`` are non-resource URLs (a trailing ``*`` matches a prefix)."""

    verbs: tuple[str, ...]
    groups: tuple[str, ...] = ()
    resources: tuple[str, ...] = ()
    paths: tuple[str, ...] = ()

    def allows(self, a: Attributes) -> bool:
        if a.verb not in self.verbs:
            return False
        if not a.resource_request:
            return any(
                a.path == p or (p.endswith("*") and a.path.startswith(p[:-1])) for p in self.paths
            )
        resource = f"{a.resource}/{a.subresource}" if a.subresource else a.resource
        return a.api_group in self.groups and resource in self.resources


def _rules_allow(a: Attributes, rules: Sequence[Rule]) -> bool:
    return any(rule.allows(a) for rule in rules)


# bootstrappolicy.NodeRules() of 1.32 (DRA's rules are off with its API)
NODE_RULES = (
    Rule(("create",), ("authentication.k8s.io",), ("tokenreviews",)),
    Rule(
        ("create",),
        ("authorization.k8s.io",),
        ("subjectaccessreviews", "localsubjectaccessreviews"),
    ),
    Rule(READ, ("",), ("services",)),
    Rule(("create", "get", "list", "watch"), ("",), ("nodes",)),
    Rule(("update", "patch"), ("",), ("nodes/status", "nodes")),
    Rule(("create", "update", "patch"), ("",), ("events",)),
    Rule(READ, ("",), ("pods",)),
    Rule(("create", "delete"), ("",), ("pods",)),
    Rule(("update", "patch"), ("",), ("pods/status",)),
    Rule(("create",), ("",), ("pods/eviction",)),
    Rule(READ, ("",), ("secrets", "configmaps")),
    Rule(("get",), ("",), ("persistentvolumeclaims", "persistentvolumes")),
    Rule(("get",), ("",), ("endpoints",)),
    Rule(
        ("create", "get", "list", "watch"),
        ("certificates.k8s.io",),
        ("certificatesigningrequests",),
    ),
    Rule(("get", "create", "update", "patch", "delete"), ("coordination.k8s.io",), ("leases",)),
    Rule(("get",), ("storage.k8s.io",), ("volumeattachments",)),
    Rule(("create",), ("",), ("serviceaccounts/token",)),
    Rule(("get", "update", "patch"), ("",), ("persistentvolumeclaims/status",)),
    Rule(READ, ("storage.k8s.io",), ("csidrivers",)),
    Rule(("get", "create", "update", "patch", "delete"), ("storage.k8s.io",), ("csinodes",)),
    Rule(READ, ("node.k8s.io",), ("runtimeclasses",)),
)

# system:discovery, system:basic-user and system:public-info-viewer, bound to every
# authenticated user by the bootstrap policy
AUTHENTICATED_RULES = (
    Rule(
        ("get",),
        paths=(
            "/api",
            "/api/*",
            "/apis",
            "/apis/*",
            "/openapi",
            "/openapi/*",
            "/healthz",
            "/livez",
            "/readyz",
            "/version",
            "/version/",
        ),
    ),
    Rule(
        ("create",),
        ("authorization.k8s.io",),
        ("selfsubjectaccessreviews", "selfsubjectrulesreviews"),
    ),
    Rule(("create",), ("authentication.k8s.io",), ("selfsubjectreviews",)),
)


def node_identity(a: Attributes) -> str | None:
    """``NodeIdentity``: the node's name ("" if it has none), None if not a node."""
    user = a.user
    if NODES_GROUP not in user.groups or not user.name.startswith(NODE_USER_PREFIX):
        return None
    return user.name[len(NODE_USER_PREFIX) :]


def _no_opinion(reason: str = "") -> Decision:
    return Decision(False, reason)


class NodeAuthorizer:
    """The Node authorizer followed by the bootstrap RBAC roles, for node users."""

    def __init__(self, store: Store, with_selectors: bool = True) -> None:
        self.graph = NodeGraph(store)
        self.with_selectors = with_selectors
        self._handlers: dict[tuple[str, str], Callable[[str, Attributes], Decision]] = {
            ("", "secrets"): lambda n, a: self._read_namespaced(n, Vertex.SECRET, a),
            ("", "configmaps"): lambda n, a: self._read_namespaced(n, Vertex.CONFIGMAP, a),
            ("", "persistentvolumeclaims"): self._claim,
            ("", "persistentvolumes"): lambda n, a: self._get(n, Vertex.PV, a),
            ("resource.k8s.io", "resourceclaims"): lambda n, a: self._get(
                n, Vertex.RESOURCE_CLAIM, a
            ),
            ("storage.k8s.io", "volumeattachments"): lambda n, a: self._get(
                n, Vertex.VOLUME_ATTACHMENT, a
            ),
            ("", "serviceaccounts"): self._create_token,
            ("coordination.k8s.io", "leases"): self._lease,
            ("storage.k8s.io", "csinodes"): self._csi_node,
        }
        if with_selectors:
            self._handlers[("", "nodes")] = self._node
            self._handlers[("", "pods")] = self._pod

    def __call__(self, a: Attributes) -> Decision:
        decision = self.node_decision(a)
        if decision.allowed or _rules_allow(a, AUTHENTICATED_RULES):
            return ALLOW
        return decision

    def node_decision(self, a: Attributes) -> Decision:
        """The node authorizer's own answer (``Authorize``): allowed, or why not."""
        node = node_identity(a)
        if node is None:
            return _no_opinion()
        if not node:
            return _no_opinion(f'unknown node for user "{a.user.name}"')
        if a.resource_request:
            handler = self._handlers.get((a.api_group, a.resource))
            if handler is not None:
                return handler(node, a)
        return ALLOW if _rules_allow(a, NODE_RULES) else _no_opinion()

    # ----------------------------------------------------------------------- the graph

    def _related(self, node: str, vertex: Vertex, a: Attributes) -> Decision:
        if not a.name:
            return _no_opinion("No Object name found")
        if self.graph.related(node, vertex, a.namespace, a.name):
            return ALLOW
        return _no_opinion(f"no relationship found between node '{node}' and this object")

    def _read_namespaced(self, node: str, vertex: Vertex, a: Attributes) -> Decision:
        if a.verb not in READ:
            return _no_opinion("can only read resources of this type")
        if a.subresource:
            return _no_opinion("cannot read subresource")
        if not a.namespace:
            return _no_opinion("can only read namespaced object of this type")
        return self._related(node, vertex, a)

    def _get(self, node: str, vertex: Vertex, a: Attributes) -> Decision:
        if a.verb != "get":
            return _no_opinion("can only get individual resources of this type")
        if a.subresource:
            return _no_opinion("cannot get subresource")
        return self._related(node, vertex, a)

    def _claim(self, node: str, a: Attributes) -> Decision:
        if a.subresource != "status":
            return self._get(node, Vertex.PVC, a)
        if a.verb not in ("update", "patch"):
            return _no_opinion("can only get/update/patch this type")
        return self._related(node, Vertex.PVC, a)

    def _create_token(self, node: str, a: Attributes) -> Decision:
        if a.verb != "create" or not a.name:
            return _no_opinion("can only create tokens for individual service accounts")
        if a.subresource != "token":
            return _no_opinion("can only create token subresource of serviceaccount")
        return self._related(node, Vertex.SERVICEACCOUNT, a)

    # ----------------------------------------------------------------------- by name

    def _lease(self, node: str, a: Attributes) -> Decision:
        if a.verb not in ("get", "create", "update", "patch", "delete"):
            return _no_opinion("can only get, create, update, patch, or delete a node lease")
        if a.namespace != NODE_LEASE_NAMESPACE:
            return _no_opinion(
                f'can only access leases in the "{NODE_LEASE_NAMESPACE}" system namespace'
            )
        if a.verb != "create" and a.name != node:
            return _no_opinion(
                "can only access node lease with the same name as the requesting node"
            )
        return ALLOW

    def _csi_node(self, node: str, a: Attributes) -> Decision:
        if a.verb not in ("get", "create", "update", "patch", "delete"):
            return _no_opinion("can only get, create, update, patch, or delete a CSINode")
        if a.subresource:
            return _no_opinion("cannot authorize CSINode subresources")
        if a.verb != "create" and a.name != node:
            return _no_opinion("can only access CSINode with the same name as the requesting node")
        return ALLOW

    def _node(self, node: str, a: Attributes) -> Decision:
        if not a.subresource:
            if a.verb in ("create", "update", "patch"):
                return ALLOW
            if a.verb in READ:
                if a.name == node:
                    return ALLOW
                if not a.name:
                    return _no_opinion(
                        f"node '{node}' cannot read all nodes, only its own Node object"
                    )
                return _no_opinion(
                    f"node '{node}' cannot read '{a.name}', only its own Node object"
                )
        elif a.subresource == "status" and a.verb in ("update", "patch"):
            return ALLOW
        return _no_opinion()

    def _pod(self, node: str, a: Attributes) -> Decision:
        if not a.subresource:
            if a.verb == "get":
                return self._get(node, Vertex.POD, a)
            if a.verb in ("list", "watch"):
                if _selects(a.field_selector, "spec.nodeName", node):
                    return ALLOW
                if a.name:
                    return self._related(node, Vertex.POD, a)
                return _no_opinion("can only list/watch pods with spec.nodeName field selector")
            if a.verb in ("create", "delete"):
                return ALLOW
        elif a.subresource == "status" and a.verb in ("update", "patch"):
            return ALLOW
        elif a.subresource == "eviction" and a.verb == "create":
            return ALLOW
        return _no_opinion()


def _selects(raw: str, key: str, value: str) -> bool:
    """Whether a field selector requires ``key=value`` (``=`` or ``==``)."""
    try:
        selector = FieldSelector.parse(raw)
    except SelectorError:
        return False
    return any(t.key == key and not t.negated and t.value == value for t in selector.terms)


def cluster_authorizer(
    nodes: NodeAuthorizer, others: Authorizer = default_authorizer
) -> Authorizer:
    """Node users answered by ``nodes`` alone, everyone else by ``others``."""

    def authorize(a: Attributes) -> Decision:
        if node_identity(a) is not None:
            return nodes(a)
        return others(a)

    return authorize
