"""The table of served resources: one ``ResourceType`` row per group/version/resource.

A row names the resource as discovery shows it (kind, verbs, short names, subresources),
where it is stored (bucket and etcd key prefix, which appears in some real error texts),
the strategies that default and validate it, and how its wire form maps to the stored
form (events.k8s.io/v1 Events are stored as core/v1 Events). Adding a resource is adding
a row in ``build_resources``::

    table = build_resources(store, pod_generation=False)
    pods = table.find("", "v1", "pods")
    table.by_kind("", "Pod")
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from tests.harness.apiserver.kinds.base import StatusStrategy, Strategy
from tests.harness.apiserver.kinds.certificates import (
    CsrApprovalStrategy,
    CsrStatusStrategy,
    CsrStrategy,
)
from tests.harness.apiserver.kinds.core import (
    ConfigMapStrategy,
    EndpointsStrategy,
    NamespaceStatusStrategy,
    NamespaceStrategy,
    SecretStrategy,
    ServiceAccountStrategy,
    ServiceStatusStrategy,
    ServiceStrategy,
)
from tests.harness.apiserver.kinds.events import (
    EVENTS_FIELD_LABELS,
    EventStrategy,
    LeaseStrategy,
    to_core_v1,
    to_events_v1,
)
from tests.harness.apiserver.kinds.nodes import NodeStatusStrategy, NodeStrategy
from tests.harness.apiserver.kinds.pod_ephemeral import PodEphemeralContainersStrategy
from tests.harness.apiserver.kinds.pods import PodStatusStrategy, PodStrategy
from tests.harness.apiserver.kinds.runtimeclasses import RuntimeClassStrategy
from tests.harness.apiserver.kinds.storage import (
    CsiDriverStrategy,
    CsiNodeStrategy,
    StorageClassStrategy,
    VolumeAttachmentStatusStrategy,
    VolumeAttachmentStrategy,
)
from tests.harness.apiserver.kinds.volumes import (
    PersistentVolumeClaimStatusStrategy,
    PersistentVolumeClaimStrategy,
    PersistentVolumeStatusStrategy,
    PersistentVolumeStrategy,
)
from tests.harness.apiserver.store import Store

Obj = dict[str, Any]
ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
NO_COLLECTION_DELETE = tuple(v for v in ALL_VERBS if v != "deletecollection")
CONNECT_VERBS = ("create", "delete", "get", "patch", "update")


def _same(obj: Obj) -> Obj:
    return obj


@dataclass(frozen=True)
class Subresource:
    name: str
    kind: str
    verbs: tuple[str, ...]
    group: str = ""  # when the subresource's kind lives in another group (discovery)
    version: str = ""


@dataclass
class ResourceType:
    group: str
    version: str
    plural: str
    singular: str
    kind: str
    namespaced: bool
    strategy: Strategy
    model: str  # the client model of the wire form
    bucket: str
    etcd_prefix: str
    verbs: tuple[str, ...] = ALL_VERBS
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    subresources: tuple[Subresource, ...] = ()
    status_strategy: Strategy | None = None
    # other subresources that read and write the object itself, each with its strategy
    object_subresources: dict[str, Strategy] = field(default_factory=dict)
    to_wire: Callable[[Obj], Obj] = _same
    from_wire: Callable[[Obj], Obj] = _same
    field_label_renames: dict[str, str] = field(default_factory=dict)

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    def subresource(self, name: str) -> Subresource | None:
        return next((s for s in self.subresources if s.name == name), None)

    def storage_key(self, namespace: str, name: str) -> str:
        return (
            f"{self.etcd_prefix}/{namespace}/{name}" if namespace else f"{self.etcd_prefix}/{name}"
        )

    def field_labels(self) -> set[str]:
        labels = {"metadata.name"} | ({"metadata.namespace"} if self.namespaced else set())
        labels |= set(self.strategy.field_labels)
        return labels | {k for k, v in self.field_label_renames.items() if v in labels}


class ResourceTable:
    def __init__(self, rows: list[ResourceType]) -> None:
        self.rows = rows

    def find(self, group: str, version: str, plural: str) -> ResourceType | None:
        return next(
            (r for r in self.rows if (r.group, r.version, r.plural) == (group, version, plural)),
            None,
        )

    def by_kind(self, group: str, kind: str) -> ResourceType | None:
        return next((r for r in self.rows if (r.group, r.kind) == (group, kind)), None)

    def group_versions(self) -> list[tuple[str, str]]:
        seen: list[tuple[str, str]] = []
        for row in self.rows:
            if (row.group, row.version) not in seen:
                seen.append((row.group, row.version))
        return seen

    def in_group_version(self, group: str, version: str) -> list[ResourceType]:
        return [r for r in self.rows if (r.group, r.version) == (group, version)]


def build_resources(store: Store, pod_generation: bool = False) -> ResourceTable:
    def used_cluster_ips() -> set[str]:
        return {s.get("spec", {}).get("clusterIP", "") for s in store.items("services")}

    pods = PodStrategy(tracks_generation=pod_generation)
    nodes = NodeStrategy()
    namespaces = NamespaceStrategy()
    services = ServiceStrategy(used_cluster_ips)
    csrs = CsrStrategy()
    return ResourceTable(
        [
            ResourceType(
                "",
                "v1",
                "pods",
                "pod",
                "Pod",
                True,
                pods,
                "V1Pod",
                "pods",
                "/registry/pods",
                short_names=("po",),
                categories=("all",),
                status_strategy=PodStatusStrategy(pods),
                object_subresources={
                    "ephemeralcontainers": PodEphemeralContainersStrategy(pods),
                },
                subresources=(
                    Subresource("attach", "PodAttachOptions", ("create", "get")),
                    Subresource("binding", "Binding", ("create",)),
                    Subresource("ephemeralcontainers", "Pod", ("get", "patch", "update")),
                    Subresource("eviction", "Eviction", ("create",), "policy", "v1"),
                    Subresource("exec", "PodExecOptions", ("create", "get")),
                    Subresource("log", "Pod", ("get",)),
                    Subresource("portforward", "PodPortForwardOptions", ("create", "get")),
                    Subresource("status", "Pod", ("get", "patch", "update")),
                ),
            ),
            ResourceType(
                "",
                "v1",
                "nodes",
                "node",
                "Node",
                False,
                nodes,
                "V1Node",
                "nodes",
                "/registry/minions",
                short_names=("no",),
                status_strategy=NodeStatusStrategy(nodes),
                subresources=(
                    Subresource("proxy", "NodeProxyOptions", CONNECT_VERBS),
                    Subresource("status", "Node", ("get", "patch", "update")),
                ),
            ),
            ResourceType(
                "",
                "v1",
                "namespaces",
                "namespace",
                "Namespace",
                False,
                namespaces,
                "V1Namespace",
                "namespaces",
                "/registry/namespaces",
                verbs=NO_COLLECTION_DELETE,
                short_names=("ns",),
                status_strategy=NamespaceStatusStrategy(namespaces),
                subresources=(
                    Subresource("finalize", "Namespace", ("update",)),
                    Subresource("status", "Namespace", ("get", "patch", "update")),
                ),
            ),
            ResourceType(
                "",
                "v1",
                "events",
                "event",
                "Event",
                True,
                EventStrategy(),
                "CoreV1Event",
                "events",
                "/registry/events",
                short_names=("ev",),
            ),
            ResourceType(
                "",
                "v1",
                "configmaps",
                "configmap",
                "ConfigMap",
                True,
                ConfigMapStrategy(),
                "V1ConfigMap",
                "configmaps",
                "/registry/configmaps",
                short_names=("cm",),
            ),
            ResourceType(
                "",
                "v1",
                "secrets",
                "secret",
                "Secret",
                True,
                SecretStrategy(),
                "V1Secret",
                "secrets",
                "/registry/secrets",
            ),
            ResourceType(
                "",
                "v1",
                "services",
                "service",
                "Service",
                True,
                services,
                "V1Service",
                "services",
                "/registry/services/specs",
                short_names=("svc",),
                categories=("all",),
                status_strategy=ServiceStatusStrategy(services),
                subresources=(Subresource("status", "Service", ("get", "patch", "update")),),
            ),
            ResourceType(
                "",
                "v1",
                "serviceaccounts",
                "serviceaccount",
                "ServiceAccount",
                True,
                ServiceAccountStrategy(),
                "V1ServiceAccount",
                "serviceaccounts",
                "/registry/serviceaccounts",
                short_names=("sa",),
                subresources=(
                    Subresource(
                        "token", "TokenRequest", ("create",), "authentication.k8s.io", "v1"
                    ),
                ),
            ),
            ResourceType(
                "",
                "v1",
                "endpoints",
                "endpoints",
                "Endpoints",
                True,
                EndpointsStrategy(),
                "V1Endpoints",
                "endpoints",
                "/registry/services/endpoints",
                short_names=("ep",),
            ),
            ResourceType(
                "coordination.k8s.io",
                "v1",
                "leases",
                "lease",
                "Lease",
                True,
                LeaseStrategy(),
                "V1Lease",
                "leases",
                "/registry/leases",
            ),
            ResourceType(
                "events.k8s.io",
                "v1",
                "events",
                "event",
                "Event",
                True,
                EventStrategy(strict=True),
                "EventsV1Event",
                "events",
                "/registry/events",
                short_names=("ev",),
                to_wire=to_events_v1,
                from_wire=to_core_v1,
                field_label_renames=dict(EVENTS_FIELD_LABELS),
            ),
            ResourceType(
                "node.k8s.io",
                "v1",
                "runtimeclasses",
                "runtimeclass",
                "RuntimeClass",
                False,
                RuntimeClassStrategy(),
                "V1RuntimeClass",
                "runtimeclasses",
                "/registry/runtimeclasses",
            ),
            ResourceType(
                "certificates.k8s.io",
                "v1",
                "certificatesigningrequests",
                "certificatesigningrequest",
                "CertificateSigningRequest",
                False,
                csrs,
                "V1CertificateSigningRequest",
                "certificatesigningrequests",
                "/registry/certificatesigningrequests",
                short_names=("csr",),
                status_strategy=CsrStatusStrategy(csrs),
                object_subresources={"approval": CsrApprovalStrategy(csrs)},
                subresources=(
                    Subresource(
                        "approval", "CertificateSigningRequest", ("get", "patch", "update")
                    ),
                    Subresource("status", "CertificateSigningRequest", ("get", "patch", "update")),
                ),
            ),
            *_storage_rows(),
            _review("authentication.k8s.io", "tokenreviews", "TokenReview", "V1TokenReview"),
            _review(
                "authorization.k8s.io",
                "subjectaccessreviews",
                "SubjectAccessReview",
                "V1SubjectAccessReview",
            ),
        ]
    )


def _status(kind: str) -> tuple[Subresource, ...]:
    return (Subresource("status", kind, ("get", "patch", "update")),)


def _storage_rows() -> list[ResourceType]:
    """PersistentVolumes, claims and the storage.k8s.io kinds (``kinds/volumes.py``,
    ``kinds/storage.py``)."""
    pvs, pvcs = PersistentVolumeStrategy(), PersistentVolumeClaimStrategy()
    attachments = VolumeAttachmentStrategy()
    storage = "storage.k8s.io"
    return [
        ResourceType(
            "",
            "v1",
            "persistentvolumes",
            "persistentvolume",
            "PersistentVolume",
            False,
            pvs,
            "V1PersistentVolume",
            "persistentvolumes",
            "/registry/persistentvolumes",
            short_names=("pv",),
            status_strategy=PersistentVolumeStatusStrategy(pvs),
            subresources=_status("PersistentVolume"),
        ),
        ResourceType(
            "",
            "v1",
            "persistentvolumeclaims",
            "persistentvolumeclaim",
            "PersistentVolumeClaim",
            True,
            pvcs,
            "V1PersistentVolumeClaim",
            "persistentvolumeclaims",
            "/registry/persistentvolumeclaims",
            short_names=("pvc",),
            status_strategy=PersistentVolumeClaimStatusStrategy(pvcs),
            subresources=_status("PersistentVolumeClaim"),
        ),
        ResourceType(
            storage,
            "v1",
            "storageclasses",
            "storageclass",
            "StorageClass",
            False,
            StorageClassStrategy(),
            "V1StorageClass",
            "storageclasses",
            "/registry/storageclasses",
            short_names=("sc",),
        ),
        ResourceType(
            storage,
            "v1",
            "csidrivers",
            "csidriver",
            "CSIDriver",
            False,
            CsiDriverStrategy(),
            "V1CSIDriver",
            "csidrivers",
            "/registry/csidrivers",
        ),
        ResourceType(
            storage,
            "v1",
            "csinodes",
            "csinode",
            "CSINode",
            False,
            CsiNodeStrategy(),
            "V1CSINode",
            "csinodes",
            "/registry/csinodes",
        ),
        ResourceType(
            storage,
            "v1",
            "volumeattachments",
            "volumeattachment",
            "VolumeAttachment",
            False,
            attachments,
            "V1VolumeAttachment",
            "volumeattachments",
            "/registry/volumeattachments",
            status_strategy=VolumeAttachmentStatusStrategy(attachments),
            subresources=_status("VolumeAttachment"),
        ),
    ]


def _review(group: str, plural: str, kind: str, model: str) -> ResourceType:
    strategy = Strategy()
    strategy.kind, strategy.group, strategy.namespaced = kind, group, False
    return ResourceType(
        group, "v1", plural, "", kind, False, strategy, model, "", "", verbs=("create",)
    )


def status_strategy(resource: ResourceType) -> StatusStrategy:
    assert isinstance(resource.status_strategy, StatusStrategy)
    return resource.status_strategy
