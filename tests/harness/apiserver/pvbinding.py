"""What tests play for the controllers the server does not run: the PV controller's binding
of a claim to a volume, and the external-attacher's ``status.attached``. Both write through
the API as those controllers do (``Kube.bind``, ``Kube.set_attached``)::

    bind(kube.core, "default/data", "pv-1")
    set_attached(kube.storage, "csi-5f0c...", True)
"""

from __future__ import annotations

from kubernetes import client

BOUND_BY_CONTROLLER = "pv.kubernetes.io/bound-by-controller"
BIND_COMPLETED = "pv.kubernetes.io/bind-completed"


def bind(core: client.CoreV1Api, claim: str, pv_name: str) -> None:
    """Bind ``namespace/name`` to the volume as the PV controller's ``bind`` does: the volume's
    ``spec.claimRef`` and phase Bound, then the claim's ``spec.volumeName`` (with the
    controller's annotations) and its status (Bound, the volume's capacity and modes)."""
    namespace, name = claim.split("/", 1)
    pvc_meta = core.read_namespaced_persistent_volume_claim(name, namespace).metadata
    pv_spec = core.read_persistent_volume(pv_name).spec
    assert pvc_meta is not None and pv_spec is not None
    claim_ref = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "namespace": namespace,
        "name": name,
        "uid": pvc_meta.uid,
        "resourceVersion": pvc_meta.resource_version,
    }
    core.patch_persistent_volume(
        pv_name,
        {
            "metadata": {"annotations": {BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"claimRef": claim_ref},
        },
    )
    core.patch_persistent_volume_status(pv_name, {"status": {"phase": "Bound"}})
    core.patch_namespaced_persistent_volume_claim(
        name,
        namespace,
        {
            "metadata": {"annotations": {BIND_COMPLETED: "yes", BOUND_BY_CONTROLLER: "yes"}},
            "spec": {"volumeName": pv_name},
        },
    )
    status = {
        "phase": "Bound",
        "accessModes": list(pv_spec.access_modes or []),
        "capacity": dict(pv_spec.capacity or {}),
    }
    core.patch_namespaced_persistent_volume_claim_status(name, namespace, {"status": status})


def set_attached(storage: client.StorageV1Api, attachment: str, attached: bool = True) -> None:
    """The external-attacher's report: ``status.attached`` of a VolumeAttachment."""
    storage.patch_volume_attachment_status(attachment, {"status": {"attached": attached}})
