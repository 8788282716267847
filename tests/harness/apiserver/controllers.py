"""The controllers a fresh cluster has that a node agent relies on, run inline on writes.

* bootstrap: namespaces ``default``, ``kube-system``, ``kube-public``, ``kube-node-lease``; the
  ``default/kubernetes`` Service (10.96.0.1:443) and its Endpoints (this server).
* serviceaccount controller: a ``default`` ServiceAccount in every namespace.
* root-ca-publisher: a ``kube-root-ca.crt`` ConfigMap (the cluster CA) in every namespace.
* csrapproving and csrsigning (``csrsigning.py``): node client CSRs approved and signed.
* the storage controllers (``storagecontrollers.py``): ephemeral volumes, claims owned by
  pods collected, PV phases, attach/detach.
* namespace controller: a Terminating namespace has its objects deleted (pods gracefully,
  so pods bound to a node stay until their kubelet confirms), then is finalized and removed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from tests.harness.apiserver.auth import UserInfo
from tests.harness.apiserver.calls import Call, Query
from tests.harness.apiserver.csrsigning import CsrSigning
from tests.harness.apiserver.resources import ResourceTable, ResourceType
from tests.harness.apiserver.rest import Registry
from tests.harness.apiserver.storagecontrollers import StorageControllers

Obj = dict[str, Any]
SYSTEM = UserInfo("system:apiserver", ("system:masters", "system:authenticated"))
ROOT_CA = "kube-root-ca.crt"
ROOT_CA_DESCRIPTION = (
    "Contains a CA bundle that can be used to verify the kube-apiserver when using internal "
    "endpoints such as the internal service IP or kubernetes.default.svc. No other usage is "
    "guaranteed across distributions of Kubernetes clusters."
)
CSRS = ("certificates.k8s.io", "certificatesigningrequests")
BOOT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class Controllers:
    def __init__(self, table: ResourceTable, ca_pem: str) -> None:
        self.table = table
        self.ca_pem = ca_pem
        self.registry: Registry | None = None
        self.deleter: Any = None  # deletion.Deleter, set by the server
        self._finalizing: set[str] = set()
        self.csrs: CsrSigning | None = None  # the CSR approver and signer, set by the server
        self.storage: StorageControllers | None = None  # set by the server

    def _call(self, plural: str, namespace: str = "", name: str = "", group: str = "") -> Call:
        resource = self.table.find(group, "v1", plural)
        assert resource is not None
        return Call(resource, namespace, name, SYSTEM, Query())

    def bootstrap(self, port_of: Callable[[], int]) -> None:
        assert self.registry is not None
        for name in BOOT_NAMESPACES:
            if self.registry.store.get("namespaces", "", name) is None:
                self.registry.create(self._call("namespaces"), {"metadata": {"name": name}})
        if self.registry.store.get("services", "default", "kubernetes") is None:
            self.registry.create(
                self._call("services", "default"),
                {
                    "metadata": {
                        "name": "kubernetes",
                        "labels": {"component": "apiserver", "provider": "kubernetes"},
                    },
                    "spec": {
                        "clusterIP": "10.96.0.1",
                        "type": "ClusterIP",
                        "ports": [
                            {
                                "name": "https",
                                "port": 443,
                                "protocol": "TCP",
                                "targetPort": port_of(),
                            }
                        ],
                    },
                },
            )
            self.registry.create(
                self._call("endpoints", "default"),
                {
                    "metadata": {
                        "name": "kubernetes",
                        "labels": {"endpointslice.kubernetes.io/skip-mirror": "true"},
                    },
                    "subsets": [
                        {
                            "addresses": [{"ip": "127.0.0.1"}],
                            "ports": [{"name": "https", "port": port_of(), "protocol": "TCP"}],
                        }
                    ],
                },
            )

    # ----------------------------------------------------------------------- hooks

    def created(self, resource: ResourceType, obj: Obj) -> None:
        if (resource.group, resource.plural) == ("", "namespaces"):
            self._populate(obj["metadata"]["name"])
        if (resource.group, resource.plural) == CSRS and self.csrs is not None:
            self.csrs.written(obj)
        if self.storage is not None:
            self.storage.written(resource, obj)

    def updated(self, resource: ResourceType, obj: Obj) -> None:
        if (resource.group, resource.plural) == CSRS and self.csrs is not None:
            self.csrs.written(obj)
        if self.storage is not None:
            self.storage.written(resource, obj)

    def deleted(self, resource: ResourceType, obj: Obj) -> None:
        if self.storage is not None:
            self.storage.deleted(resource, obj)
        namespace = obj["metadata"].get("namespace", "")
        if namespace:
            self._maybe_finalize(namespace)

    def namespace_terminating(self, name: str) -> None:
        self._empty(name)
        self._maybe_finalize(name)

    # ----------------------------------------------------------------------- work

    def _populate(self, namespace: str) -> None:
        assert self.registry is not None
        store = self.registry.store
        if store.get("serviceaccounts", namespace, "default") is None:
            self.registry.create(
                self._call("serviceaccounts", namespace), {"metadata": {"name": "default"}}
            )
        if store.get("configmaps", namespace, ROOT_CA) is None:
            self.registry.create(
                self._call("configmaps", namespace),
                {
                    "metadata": {
                        "name": ROOT_CA,
                        "annotations": {"kubernetes.io/description": ROOT_CA_DESCRIPTION},
                    },
                    "data": {"ca.crt": self.ca_pem},
                },
            )

    def _empty(self, namespace: str) -> None:
        assert self.registry is not None and self.deleter is not None
        for resource in self.table.rows:
            if not resource.namespaced or resource.group == "events.k8s.io":
                continue
            for obj in self.registry.store.items(resource.bucket, namespace):
                meta = obj["metadata"]
                if meta.get("deletionTimestamp"):
                    continue
                self.deleter.delete(Call(resource, namespace, meta["name"], SYSTEM, Query()), {})

    def _maybe_finalize(self, namespace: str) -> None:
        assert self.registry is not None
        store = self.registry.store
        ns = store.get("namespaces", "", namespace)
        if (
            ns is None
            or not ns["metadata"].get("deletionTimestamp")
            or namespace in self._finalizing
        ):
            return
        buckets = {r.bucket for r in self.table.rows if r.namespaced}
        if any(store.items(bucket, namespace) for bucket in buckets):
            return
        self._finalizing.add(namespace)
        try:
            if (ns.get("spec") or {}).get("finalizers"):
                ns["spec"]["finalizers"] = []
                store.update("namespaces", ns)
            if not ns["metadata"].get("finalizers"):
                store.delete("namespaces", "", namespace)
        finally:
            self._finalizing.discard(namespace)
