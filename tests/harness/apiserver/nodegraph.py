"""Which objects a node may read: the Node authorizer's graph, asked of the store each time.

kube-apiserver keeps a graph fed by a pod informer: a pod bound to a node (``spec.nodeName``)
gets an edge to that node, and every secret, configmap, persistentvolumeclaim and the service
account it names gets an edge to the pod (a mirror pod gets only its own edge). Binding,
rebinding and deletion change the edges; nothing else about a bound pod can. Here the same
question ("is there a path from this object to node N?") is answered from the stored pods at
the moment it is asked, so a deletion or a rebinding counts from the very next request::

    graph = NodeGraph(store)
    graph.related("n1", Vertex.SECRET, "default", "db-password")   # True or False

What a pod names is what ``podutil.VisitPodSecretNames``/``VisitPodConfigmapNames`` visit:
``imagePullSecrets``; ``env[].valueFrom.secretKeyRef``/``configMapKeyRef`` and
``envFrom[].secretRef``/``configMapRef`` of init, app and ephemeral containers; ``secret``,
``configMap`` and ``projected`` volume sources and the secret refs of the volume plugins
(azureFile, cephfs, cinder, flexVolume, rbd, scaleIO, iscsi, storageos, csi); claims of
``persistentVolumeClaim`` volumes and the ``<pod>-<volume>`` claim of ``ephemeral`` ones.
As the PV and VolumeAttachment informers add: a persistent volume whose ``spec.claimRef``
names such a claim, the secrets its ``csi`` source gives the kubelet (``nodeStageSecretRef``,
``nodePublishSecretRef``, ``nodeExpandSecretRef``; not the controller ones), and a volume
attachment whose ``spec.nodeName`` is the node. Resource claims are not served here, so no
node is ever related to one.
"""

from __future__ import annotations

import enum
from collections.abc import Iterator
from typing import Any

from tests.harness.apiserver.store import Store

Obj = dict[str, Any]
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# volume plugin -> the key of its secret reference ({"name": ...} unless noted)
_PLUGIN_SECRET_REFS = (
    ("cephfs", "secretRef"),
    ("cinder", "secretRef"),
    ("flexVolume", "secretRef"),
    ("rbd", "secretRef"),
    ("scaleIO", "secretRef"),
    ("iscsi", "secretRef"),
    ("storageos", "secretRef"),
    ("csi", "nodePublishSecretRef"),
)
# the secrets of a PV's csi source the kubelet uses (``VisitPVSecretNames``, kubeletVisible)
PV_NODE_SECRET_REFS = ("nodeStageSecretRef", "nodePublishSecretRef", "nodeExpandSecretRef")


class Vertex(enum.Enum):
    """The kinds of object the graph knows (``vertexType``)."""

    POD = "pod"
    SECRET = "secret"
    CONFIGMAP = "configmap"
    PVC = "pvc"
    PV = "pv"
    SERVICEACCOUNT = "serviceAccount"
    VOLUME_ATTACHMENT = "volumeAttachment"
    RESOURCE_CLAIM = "resourceclaim"


def _containers(spec: Obj) -> Iterator[Obj]:
    for key in ("initContainers", "containers", "ephemeralContainers"):
        yield from spec.get(key) or []


def _name_of(ref: Any) -> str:
    return str(ref.get("name") or "") if isinstance(ref, dict) else ""


def secret_names(pod: Obj) -> set[str]:
    """The secrets a pod names (``VisitPodSecretNames``)."""
    spec = pod.get("spec") or {}
    names = {_name_of(ref) for ref in spec.get("imagePullSecrets") or []}
    for container in _containers(spec):
        names |= {_name_of(e.get("secretRef")) for e in container.get("envFrom") or []}
        names |= {
            _name_of((e.get("valueFrom") or {}).get("secretKeyRef"))
            for e in container.get("env") or []
        }
    for volume in spec.get("volumes") or []:
        if volume.get("secret") is not None:
            names.add(str(volume["secret"].get("secretName") or ""))
        if volume.get("azureFile") is not None:
            names.add(str(volume["azureFile"].get("secretName") or ""))
        for plugin, key in _PLUGIN_SECRET_REFS:
            if volume.get(plugin) is not None:
                names.add(_name_of(volume[plugin].get(key)))
        for source in (volume.get("projected") or {}).get("sources") or []:
            names.add(_name_of(source.get("secret")))
    names.discard("")
    return names


def configmap_names(pod: Obj) -> set[str]:
    """The configmaps a pod names (``VisitPodConfigmapNames``)."""
    spec = pod.get("spec") or {}
    names: set[str] = set()
    for container in _containers(spec):
        names |= {_name_of(e.get("configMapRef")) for e in container.get("envFrom") or []}
        names |= {
            _name_of((e.get("valueFrom") or {}).get("configMapKeyRef"))
            for e in container.get("env") or []
        }
    for volume in spec.get("volumes") or []:
        names.add(_name_of(volume.get("configMap")))
        for source in (volume.get("projected") or {}).get("sources") or []:
            names.add(_name_of(source.get("configMap")))
    names.discard("")
    return names


def claim_names(pod: Obj) -> set[str]:
    """The persistent volume claims a pod's volumes use (an ephemeral volume's is generated)."""
    pod_name = (pod.get("metadata") or {}).get("name", "")
    names = set()
    for volume in (pod.get("spec") or {}).get("volumes") or []:
        if volume.get("persistentVolumeClaim") is not None:
            names.add(str(volume["persistentVolumeClaim"].get("claimName") or ""))
        elif volume.get("ephemeral") is not None:
            names.add(f"{pod_name}-{volume.get('name', '')}")
    names.discard("")
    return names


def _service_account_names(pod: Obj) -> set[str]:
    name = (pod.get("spec") or {}).get("serviceAccountName") or ""
    return {name} if name else set()


_NAMED_BY = {
    Vertex.SECRET: secret_names,
    Vertex.CONFIGMAP: configmap_names,
    Vertex.PVC: claim_names,
    Vertex.SERVICEACCOUNT: _service_account_names,
}


def is_mirror(pod: Obj) -> bool:
    return MIRROR_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})


class NodeGraph:
    def __init__(self, store: Store) -> None:
        self.store = store

    def related(self, node: str, vertex: Vertex, namespace: str, name: str) -> bool:
        """Whether a path leads from the object to ``node`` (``hasPathFrom``)."""
        if not node or not name:
            return False
        if vertex is Vertex.POD:
            pod = self.store.get("pods", namespace, name)
            return pod is not None and (pod.get("spec") or {}).get("nodeName") == node
        if vertex is Vertex.VOLUME_ATTACHMENT:
            attachment = self.store.get("volumeattachments", "", name)
            return attachment is not None and (attachment.get("spec") or {}).get("nodeName") == node
        if vertex is Vertex.PV:
            return self._pv_related(node, name)
        if vertex is Vertex.SECRET and self._secret_of_pv(node, namespace, name):
            return True
        return self._named_by_pod(node, vertex, namespace, name)

    def _named_by_pod(self, node: str, vertex: Vertex, namespace: str, name: str) -> bool:
        named_by = _NAMED_BY.get(vertex)
        if named_by is None:
            return False  # resource claims: not served here

        def uses(pod: Obj) -> bool:
            bound = (pod.get("spec") or {}).get("nodeName") == node
            return bound and not is_mirror(pod) and name in named_by(pod)

        return bool(self.store.select("pods", uses, namespace))

    def _pv_related(self, node: str, name: str) -> bool:
        pv = self.store.get("persistentvolumes", "", name)
        ref = ((pv or {}).get("spec") or {}).get("claimRef") or {}
        if not ref.get("name"):
            return False
        return self._named_by_pod(node, Vertex.PVC, ref.get("namespace", ""), ref["name"])

    def _secret_of_pv(self, node: str, namespace: str, name: str) -> bool:
        def names_secret(pv: Obj) -> bool:
            csi = (pv.get("spec") or {}).get("csi") or {}
            refs = [csi.get(key) or {} for key in PV_NODE_SECRET_REFS]
            return any((r.get("namespace"), r.get("name")) == (namespace, name) for r in refs)

        pvs = self.store.select("persistentvolumes", names_secret)
        return any(self._pv_related(node, pv["metadata"]["name"]) for pv in pvs)
