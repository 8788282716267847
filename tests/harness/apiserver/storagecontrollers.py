"""kube-controller-manager's storage controllers, run inline on writes (``controllers.py``
calls ``written``/``deleted``):

* ephemeral volume controller: a pod with a generic ``ephemeral:`` volume gets the claim
  ``<pod>-<volume>`` in its namespace, made from ``volumeClaimTemplate`` (its labels,
  annotations and spec) with the pod as controlling owner; a claim of that name not owned by
  the pod is left alone (the kubelet then refuses the pod).
* garbage collector (for claims): a claim owned by a pod goes when the pod is gone.
* PV controller, the parts tests do not play: a new volume with no ``claimRef`` turns
  ``Available``; a Bound volume whose claim is deleted turns ``Released``. Binding is the
  test's (``Kube.bind``).
* attach/detach controller, for nodes annotated
  ``volumes.kubernetes.io/controller-managed-attach-detach``: a pod bound to such a node,
  not terminated, using a Bound claim whose volume has a ``csi`` source of a driver that
  attaches (no CSIDriver, or ``attachRequired: true``) gets VolumeAttachment
  ``csi-<hex sha256(volumeHandle + driver + node)>``; once its ``status.attached`` is true
  (the external-attacher's job; ``Kube.set_attached`` in tests) the node's
  ``status.volumesAttached`` lists ``kubernetes.io/csi/<driver>^<volumeHandle>``. When no
  such pod is left and the node's ``status.volumesInUse`` no longer has the volume, the entry
  is removed and the VolumeAttachment deleted.
"""

from __future__ import annotations

import copy
import hashlib
import logging
from dataclasses import dataclass
from typing import Any

from tests.harness.apiserver import errors
from tests.harness.apiserver.auth import UserInfo
from tests.harness.apiserver.calls import Call, Query
from tests.harness.apiserver.kinds.storage import attach_required
from tests.harness.apiserver.nodegraph import claim_names
from tests.harness.apiserver.resources import ResourceTable, ResourceType, status_strategy
from tests.harness.apiserver.rest import Registry

log = logging.getLogger(__name__)
Obj = dict[str, Any]
CMAD_ANNOTATION = "volumes.kubernetes.io/controller-managed-attach-detach"
EPHEMERAL = UserInfo(
    "system:serviceaccount:kube-system:ephemeral-volume-controller", ("system:authenticated",)
)
PV_BINDER = UserInfo(
    "system:serviceaccount:kube-system:persistent-volume-binder", ("system:authenticated",)
)
ATTACHER = UserInfo(
    "system:serviceaccount:kube-system:attachdetach-controller", ("system:authenticated",)
)
GC = UserInfo(
    "system:serviceaccount:kube-system:generic-garbage-collector", ("system:authenticated",)
)
# what the attach/detach controller's desired and actual state are made of
ATTACH_INPUTS = {
    ("", "pods"),
    ("", "nodes"),
    ("", "persistentvolumeclaims"),
    ("", "persistentvolumes"),
    ("storage.k8s.io", "csidrivers"),
    ("storage.k8s.io", "volumeattachments"),
}


def attachment_name(volume_handle: str, driver: str, node: str) -> str:
    """The VolumeAttachment of a CSI volume on a node (``getAttachmentName``)."""
    digest = hashlib.sha256(f"{volume_handle}{driver}{node}".encode()).hexdigest()
    return f"csi-{digest}"


def unique_volume_name(driver: str, volume_handle: str) -> str:
    """How ``volumesInUse``/``volumesAttached`` name a CSI volume."""
    return f"kubernetes.io/csi/{driver}^{volume_handle}"


@dataclass(frozen=True)
class Attachment:
    node: str
    pv: str
    driver: str
    handle: str

    @property
    def name(self) -> str:
        return attachment_name(self.handle, self.driver, self.node)

    @property
    def volume(self) -> str:
        return unique_volume_name(self.driver, self.handle)


def is_terminated(pod: Obj) -> bool:
    """``IsPodTerminated``: Succeeded/Failed, or deleted with nothing running."""
    status = pod.get("status") or {}
    if status.get("phase") in ("Succeeded", "Failed"):
        return True
    if not pod["metadata"].get("deletionTimestamp"):
        return False
    statuses = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
        *(status.get("ephemeralContainerStatuses") or []),
    ]
    return not any((s.get("state") or {}).get("running") is not None for s in statuses)


class StorageControllers:
    def __init__(self, table: ResourceTable, registry: Registry, deleter: Any) -> None:
        self.table = table
        self.registry = registry
        self.store = registry.store
        self.deleter = deleter  # deletion.Deleter
        self._syncing = False
        self._again = False

    def _call(self, plural: str, user: UserInfo, namespace: str = "", name: str = "") -> Call:
        group = "storage.k8s.io" if plural in ("volumeattachments", "csidrivers") else ""
        resource = self.table.find(group, "v1", plural)
        assert resource is not None
        return Call(resource, namespace, name, user, Query())

    # ----------------------------------------------------------------------- hooks

    def written(self, resource: ResourceType, obj: Obj) -> None:
        key = (resource.group, resource.plural)
        if key == ("", "pods"):
            self._create_ephemeral_claims(obj)
        if key == ("", "persistentvolumes"):
            self._make_available(obj)
        if key in ATTACH_INPUTS:
            self.sync_attachments()

    def deleted(self, resource: ResourceType, obj: Obj) -> None:
        key = (resource.group, resource.plural)
        if key == ("", "pods"):
            self._collect_claims(obj)
        if key == ("", "persistentvolumeclaims"):
            self._release(obj)
        if key in ATTACH_INPUTS:
            self.sync_attachments()

    # ----------------------------------------------------------------------- ephemeral

    def _create_ephemeral_claims(self, pod: Obj) -> None:
        meta = pod["metadata"]
        if meta.get("deletionTimestamp"):
            return
        for volume in (pod.get("spec") or {}).get("volumes") or []:
            template = (volume.get("ephemeral") or {}).get("volumeClaimTemplate")
            if template is None:
                continue
            name = f"{meta['name']}-{volume.get('name', '')}"
            if self.store.get("persistentvolumeclaims", meta["namespace"], name) is not None:
                continue  # ours already, or someone else's: the kubelet checks the owner
            template_meta = template.get("metadata") or {}
            claim = {
                "metadata": {
                    "name": name,
                    "labels": dict(template_meta.get("labels") or {}),
                    "annotations": dict(template_meta.get("annotations") or {}),
                    "ownerReferences": [
                        {
                            "apiVersion": "v1",
                            "kind": "Pod",
                            "name": meta["name"],
                            "uid": meta["uid"],
                            "controller": True,
                            "blockOwnerDeletion": True,
                        }
                    ],
                },
                "spec": dict(template.get("spec") or {}),
            }
            call = self._call("persistentvolumeclaims", EPHEMERAL, meta["namespace"])
            try:
                self.registry.create(call, claim)
            except errors.ApiError as exc:
                log.info("ephemeral claim not created claim=%s error=%s", name, exc)

    def _collect_claims(self, pod: Obj) -> None:
        uid, namespace = pod["metadata"].get("uid"), pod["metadata"].get("namespace", "")

        def owned(claim: Obj) -> bool:
            owners = claim["metadata"].get("ownerReferences") or []
            return any(o.get("uid") == uid for o in owners)

        for claim in self.store.select("persistentvolumeclaims", owned, namespace):
            call = self._call("persistentvolumeclaims", GC, namespace, claim["metadata"]["name"])
            try:
                self.deleter.delete(call, {"propagationPolicy": "Background"})
            except errors.ApiError as exc:
                log.info("owned claim not deleted claim=%s error=%s", call.name, exc)

    # ----------------------------------------------------------------------- PV phases

    def _set_pv_phase(self, stored: Obj, phase: str) -> None:
        pv = copy.deepcopy(stored)
        pv.setdefault("status", {})["phase"] = phase
        call = self._call("persistentvolumes", PV_BINDER, "", pv["metadata"]["name"])
        call.subresource = "status"
        self.registry.update(call, pv, status_strategy(call.resource))

    def _make_available(self, pv: Obj) -> None:
        status, spec = pv.get("status") or {}, pv.get("spec") or {}
        if status.get("phase") == "Pending" and not spec.get("claimRef"):
            if not pv["metadata"].get("deletionTimestamp"):
                self._set_pv_phase(pv, "Available")

    def _release(self, claim: Obj) -> None:
        uid = claim["metadata"].get("uid")

        def bound_to_it(pv: Obj) -> bool:
            ref = (pv.get("spec") or {}).get("claimRef") or {}
            return ref.get("uid") == uid and (pv.get("status") or {}).get("phase") == "Bound"

        for pv in self.store.select("persistentvolumes", bound_to_it):
            self._set_pv_phase(pv, "Released")

    # ----------------------------------------------------------------------- attach/detach

    def sync_attachments(self) -> None:
        """Attach what should be, detach what should not; again if a write of ours asked."""
        with self.store.lock:
            if self._syncing:
                self._again = True
                return
            self._syncing = True
            try:
                self._again = True
                while self._again:
                    self._again = False
                    self._sync_once()
            finally:
                self._syncing = False

    def _sync_once(self) -> None:
        nodes = {
            n["metadata"]["name"]: n
            for n in self.store.items("nodes")
            if CMAD_ANNOTATION in (n["metadata"].get("annotations") or {})
        }
        if not nodes:
            return
        wanted = {a.name: a for a in self._desired(set(nodes))}
        for attachment in wanted.values():
            self._attach(attachment, nodes[attachment.node])
        for existing in self.store.items("volumeattachments"):
            spec = existing.get("spec") or {}
            node = nodes.get(spec.get("nodeName", ""))
            if node is not None and existing["metadata"]["name"] not in wanted:
                self._detach(existing, node)

    def _desired(self, nodes: set[str]) -> list[Attachment]:
        found = []
        for pod in self.store.items("pods"):
            node = (pod.get("spec") or {}).get("nodeName", "")
            if node not in nodes or is_terminated(pod):
                continue
            for claim in sorted(claim_names(pod)):
                source = self._csi_source(pod["metadata"]["namespace"], claim)
                if source is not None:
                    pv, csi = source
                    found.append(Attachment(node, pv, csi["driver"], csi["volumeHandle"]))
        return found

    def _csi_source(self, namespace: str, claim_name: str) -> tuple[str, Obj] | None:
        """The bound volume's name and csi source, when its driver attaches."""
        claim = self.store.get("persistentvolumeclaims", namespace, claim_name)
        if claim is None or (claim.get("status") or {}).get("phase") != "Bound":
            return None
        pv_name = (claim.get("spec") or {}).get("volumeName") or ""
        pv = self.store.get("persistentvolumes", "", pv_name) if pv_name else None
        spec = (pv or {}).get("spec") or {}
        if (spec.get("claimRef") or {}).get("uid") != claim["metadata"]["uid"]:
            return None
        csi = spec.get("csi")
        if not csi or not attach_required(self.store.get("csidrivers", "", csi["driver"])):
            return None
        return pv_name, csi

    def _attach(self, want: Attachment, node: Obj) -> None:
        existing = self.store.get("volumeattachments", "", want.name)
        if existing is None:
            body = {
                "metadata": {"name": want.name},
                "spec": {
                    "attacher": want.driver,
                    "nodeName": want.node,
                    "source": {"persistentVolumeName": want.pv},
                },
            }
            self.registry.create(self._call("volumeattachments", ATTACHER), body)
            return
        if (existing.get("status") or {}).get("attached") is True:
            self._report(node, want.volume, attached=True)

    def _detach(self, attachment: Obj, node: Obj) -> None:
        pv_name = ((attachment.get("spec") or {}).get("source") or {}).get("persistentVolumeName")
        pv = self.store.get("persistentvolumes", "", pv_name or "") if pv_name else None
        csi = ((pv or {}).get("spec") or {}).get("csi") or {}
        volume = unique_volume_name(csi.get("driver", ""), csi.get("volumeHandle", ""))
        if volume in ((node.get("status") or {}).get("volumesInUse") or []):
            return  # the kubelet still has it mounted
        self._report(node, volume, attached=False)
        name = attachment["metadata"]["name"]
        try:
            self.deleter.delete(self._call("volumeattachments", ATTACHER, "", name), {})
        except errors.ApiError as exc:
            log.info("volume attachment not deleted name=%s error=%s", name, exc)

    def _report(self, node: Obj, volume: str, attached: bool) -> None:
        """Add or remove ``volume`` in the node's ``status.volumesAttached``."""
        status = node.setdefault("status", {})
        listed = list(status.get("volumesAttached") or [])
        present = any(v.get("name") == volume for v in listed)
        if present == attached:
            return
        if attached:
            listed.append({"name": volume, "devicePath": ""})
        else:
            listed = [v for v in listed if v.get("name") != volume]
        status["volumesAttached"] = listed
        call = self._call("nodes", ATTACHER, "", node["metadata"]["name"])
        call.subresource = "status"
        stored = self.registry.update(call, node, status_strategy(call.resource))[1]
        node["metadata"]["resourceVersion"] = stored["metadata"]["resourceVersion"]
