"""Claims, generic ephemeral and inline CSI volumes set up through a driver that records
its calls: what is staged and published where, once, what waits and what fails with the
kubelet's words, what teardown and a restart of pkletd do."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel import persistentvolumes as pv
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.ipc.apimodel.references import ObjectKind
from pkletd.ipc.bus.messages import ObjectFetched
from pkletd.ipc.csi.client import CsiError, VolumeAccess
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup.csivolumes import CsiVolumes
from pkletd.supervisor.pods.setup.volumes import PodVolumes, VolumeError, VolumePending

from tests.supervisor.pods.setup.object_helpers import NAMESPACE, secret

DRIVER = "hostpath.csi.test"
PVC, PV = ObjectKind.PERSISTENT_VOLUME_CLAIM, ObjectKind.PERSISTENT_VOLUME
CSI_DRIVER, ATTACHMENT = ObjectKind.CSI_DRIVER, ObjectKind.VOLUME_ATTACHMENT
STAGE = "STAGE_UNSTAGE_VOLUME"


class FakeDriver:
    """A driver's Node service that records each call (and mounts nothing)."""

    def __init__(self, capabilities: frozenset[str] = frozenset({STAGE})) -> None:
        self.capabilities = capabilities
        self.calls: list[tuple[str, dict[str, Any]]] = []
        self.fail: str = ""

    def _record(self, method: str, **args: Any) -> None:
        if method == self.fail:
            raise CsiError(method, "UNAVAILABLE", "driver away")
        self.calls.append((method, args))

    def node_capabilities(self) -> frozenset[str]:
        return self.capabilities

    def stage_volume(self, volume_id: str, staging_path: str, *rest: Any) -> None:
        self._record("NodeStageVolume", volume_id=volume_id, path=staging_path, rest=rest)

    def unstage_volume(self, volume_id: str, staging_path: str) -> None:
        self._record("NodeUnstageVolume", volume_id=volume_id, path=staging_path)

    def publish_volume(
        self,
        volume_id: str,
        staging_path: str,
        target_path: str,
        access: VolumeAccess,
        readonly: bool,
        publish_context: dict[str, str],
        volume_context: dict[str, str],
        secrets: dict[str, str],
    ) -> None:
        Path(target_path).mkdir(exist_ok=True)
        self._record(
            "NodePublishVolume",
            volume_id=volume_id,
            staging=staging_path,
            path=target_path,
            access=access,
            readonly=readonly,
            publish_context=publish_context,
            volume_context=volume_context,
            secrets=secrets,
        )

    def unpublish_volume(self, volume_id: str, target_path: str) -> None:
        Path(target_path).rmdir()
        self._record("NodeUnpublishVolume", volume_id=volume_id, path=target_path)

    def methods(self) -> list[str]:
        return [method for method, _ in self.calls]


class Registry:
    def __init__(self) -> None:
        self.drivers = {DRIVER: "/run/csi.sock"}

    def endpoint(self, name: str) -> str | None:
        return self.drivers.get(name)


class Storage:
    """A node's volumes with one fake driver and the objects the worker would send."""

    def __init__(self, root: Path) -> None:
        self.node = NodeInfo("node-a", ("10.0.0.1",), root)
        self.objects = ApiObjects(node="node-a")
        self.driver = FakeDriver()
        self.registry = Registry()
        self.volumes = self.restarted()

    def restarted(self) -> PodVolumes:
        """A new pkletd's volumes: what is mounted it reads back from the files."""
        volumes = PodVolumes(self.node, self.objects, self.registry)
        volumes.csi = CsiVolumes(self.node, self.registry, lambda endpoint: self.driver)  # type: ignore[arg-type,return-value]
        volumes.csi.reconstruct()
        return volumes

    def put(self, kind: ObjectKind, name: str, body: dict[str, Any] | None) -> None:
        namespace = NAMESPACE if kind is PVC else ""
        if body is None:
            found = ObjectFetched(kind, namespace, name, error="not found", missing=True)
        else:
            found = ObjectFetched(kind, namespace, name, body=body)
        self.objects.on_fetched(found)

    def bound(self, claim: str = "data", volume: str = "pv-1", **csi: Any) -> None:
        self.put(PVC, claim, claim_body(volume))
        self.put(PV, volume, volume_body(**csi))
        self.put(CSI_DRIVER, DRIVER, {"spec": {"attachRequired": False}})


def claim_body(volume: str = "pv-1", phase: str = "Bound", **meta: Any) -> dict[str, Any]:
    return {
        "metadata": {"uid": "claim-uid", **meta},
        "spec": {"volumeName": volume},
        "status": {"phase": phase},
    }


def volume_body(**csi: Any) -> dict[str, Any]:
    source = {"driver": DRIVER, "volumeHandle": "vol-1", "fsType": "ext4", **csi}
    return {
        "spec": {
            "csi": source,
            "claimRef": {"uid": "claim-uid"},
            "accessModes": ["ReadWriteOnce"],
            "mountOptions": ["noatime"],
        }
    }


def pod_with(volume: dict[str, Any], uid: str = "pod-1", name: str = "db", **spec: Any) -> Pod:
    mount = {"name": volume["name"], "mountPath": "/data"}
    return parse_pod(
        {
            "metadata": {"name": name, "namespace": NAMESPACE, "uid": uid},
            "spec": {
                "containers": [{"name": "c", "image": "x", "volumeMounts": [mount]}],
                "volumes": [volume],
                **spec,
            },
        }
    )


CLAIM = {"name": "data", "persistentVolumeClaim": {"claimName": "data"}}


@pytest.fixture
def storage(tmp_path: Path) -> Storage:
    return Storage(tmp_path / "root")


def test_a_claim_is_staged_once_and_published_per_pod(storage: Storage) -> None:
    storage.bound()
    first, second = pod_with(CLAIM), pod_with(CLAIM, uid="pod-2", name="db2")
    storage.volumes.setup(first)
    storage.volumes.setup(second)
    assert storage.driver.methods() == ["NodeStageVolume", "NodePublishVolume", "NodePublishVolume"]
    staging = storage.node.root_dir / "plugins/kubernetes.io/csi" / DRIVER
    staging = staging / pv.staging_dir_name("vol-1") / "globalmount"
    _, stage = storage.driver.calls[0]
    assert stage["path"] == str(staging) and staging.is_dir()
    assert json.loads((staging.parent / "vol_data.json").read_text()) == {
        "volumeHandle": "vol-1",
        "driverName": DRIVER,
    }
    _, publish = storage.driver.calls[1]
    target = storage.node.pods_dir / "pod-1/volumes/kubernetes.io~csi/data/mount"
    assert (publish["path"], publish["staging"]) == (str(target), str(staging))
    access = publish["access"]
    assert (access.fs_type, access.mount_flags, access.access_mode) == (
        "ext4",
        ("noatime",),
        "SINGLE_NODE_WRITER",
    )
    data = json.loads((target.parent / "vol_data.json").read_text())
    assert data == {
        "specVolID": "pv-1",
        "volumeHandle": "vol-1",
        "driverName": DRIVER,
        "nodeName": "node-a",
        "attachmentID": "",
        "volumeLifecycleMode": "Persistent",
    }
    mounts = storage.volumes.mounts(first, first.containers[0], [])
    assert [(m.container_path, m.host_path) for m in mounts] == [("/data", str(target))]
    assert storage.volumes.csi.in_use() == [f"kubernetes.io/csi/{DRIVER}^vol-1"]


def test_the_last_pod_to_go_unstages(storage: Storage) -> None:
    storage.bound()
    storage.volumes.setup(pod_with(CLAIM))
    storage.volumes.setup(pod_with(CLAIM, uid="pod-2", name="db2"))
    storage.driver.calls.clear()
    storage.volumes.teardown("pod-1")
    assert storage.driver.methods() == ["NodeUnpublishVolume"]
    assert not (storage.node.pods_dir / "pod-1").exists()
    storage.volumes.teardown("pod-2")
    assert storage.driver.methods() == ["NodeUnpublishVolume"] * 2 + ["NodeUnstageVolume"]
    assert storage.volumes.csi.in_use() == []


def test_a_restarted_pkletd_tears_down_what_the_one_before_mounted(storage: Storage) -> None:
    storage.bound()
    storage.volumes.setup(pod_with(CLAIM))
    storage.driver.calls.clear()
    after = storage.restarted()
    assert after.csi.in_use() == [f"kubernetes.io/csi/{DRIVER}^vol-1"]
    after.teardown("pod-1")  # a pod deleted while pkletd was away
    assert storage.driver.methods() == ["NodeUnpublishVolume", "NodeUnstageVolume"]


def test_a_driver_away_at_teardown_keeps_the_pod_for_another_try(storage: Storage) -> None:
    storage.bound()
    storage.volumes.setup(pod_with(CLAIM))
    storage.registry.drivers.clear()
    with pytest.raises(VolumeError, match="not found in the list of registered CSI drivers"):
        storage.volumes.teardown("pod-1")
    assert (storage.node.pods_dir / "pod-1/volumes/kubernetes.io~csi/data/vol_data.json").exists()
    storage.registry.drivers[DRIVER] = "/run/csi.sock"
    storage.volumes.teardown("pod-1")
    assert not (storage.node.pods_dir / "pod-1").exists()


def test_a_claim_not_read_yet_waits_quietly(storage: Storage) -> None:
    with pytest.raises(VolumePending, match='volume "data" waits for persistentvolumeclaim'):
        storage.volumes.setup(pod_with(CLAIM))
    assert storage.driver.calls == []


@pytest.mark.parametrize(
    ("claim", "message"),
    [
        (
            claim_body(phase="Pending", volume=""),
            "error processing PVC shop/data: PVC is not bound",
        ),
        (None, 'failed to fetch PVC from API server: persistentvolumeclaims "data" not found'),
        (
            claim_body(deletionTimestamp="2026-11-27T00:00:00Z"),
            "can't start pod because PVC shop/data is being deleted",
        ),
    ],
)
def test_a_claim_that_cannot_be_used_fails_as_the_volume_manager_says(
    storage: Storage, claim: dict[str, Any] | None, message: str
) -> None:
    storage.put(PVC, "data", claim)
    with pytest.raises(VolumeError) as failed:
        storage.volumes.setup(pod_with(CLAIM))
    text = str(failed.value)
    assert text.startswith(
        "Unable to attach or mount volumes: unmounted volumes=[data], unattached volumes=[data], "
        "failed to process volumes=[data]: error processing PVC shop/data: "
    )
    assert message in text


def test_volumes_pkletd_does_not_serve_are_refused_by_name(storage: Storage) -> None:
    storage.put(PVC, "data", claim_body())
    storage.put(PV, "pv-1", {"spec": {"nfs": {"server": "x"}, "claimRef": {"uid": "claim-uid"}}})
    with pytest.raises(VolumeError, match="pkletd does not serve persistent volumes of type nfs"):
        storage.volumes.setup(pod_with(CLAIM))
    block = volume_body()
    block["spec"]["volumeMode"] = "Block"
    storage.put(PV, "pv-1", block)
    with pytest.raises(VolumeError, match=r"raw block volumes \(volumeMode: Block\)"):
        storage.volumes.setup(pod_with(CLAIM))


def test_a_host_path_volume_is_its_path(storage: Storage, tmp_path: Path) -> None:
    storage.put(PVC, "data", claim_body())
    local = {"local": {"path": str(tmp_path)}, "claimRef": {"uid": "claim-uid"}}
    storage.put(PV, "pv-1", {"spec": local})
    pod = pod_with({**CLAIM, "persistentVolumeClaim": {"claimName": "data", "readOnly": True}})
    storage.volumes.setup(pod)
    (mount,) = storage.volumes.mounts(pod, pod.containers[0], [])
    assert (mount.host_path, mount.readonly) == (str(tmp_path), True)


def test_an_ephemeral_volume_needs_the_claim_the_pod_owns(storage: Storage) -> None:
    scratch = {"name": "scratch", "ephemeral": {"volumeClaimTemplate": {"spec": {}}}}
    storage.put(
        PVC, "db-scratch", claim_body(ownerReferences=[{"uid": "other", "controller": True}])
    )
    storage.put(PV, "pv-1", volume_body())
    storage.put(CSI_DRIVER, DRIVER, {"spec": {"attachRequired": False}})
    with pytest.raises(
        VolumeError, match=r"PVC was not created for pod shop/db \(pod is not owner\)"
    ):
        storage.volumes.setup(pod_with(scratch))
    owned = claim_body(ownerReferences=[{"uid": "pod-1", "controller": True}])
    storage.put(PVC, "db-scratch", owned)
    storage.volumes.setup(pod_with(scratch))
    assert storage.driver.methods()[-1] == "NodePublishVolume"


def test_an_attaching_driver_waits_for_its_attachment(storage: Storage) -> None:
    storage.bound()
    storage.put(CSI_DRIVER, DRIVER, None)  # no CSIDriver: the driver attaches
    name = pv.attachment_name("vol-1", DRIVER, "node-a")
    with pytest.raises(VolumePending, match=f"volume attachment {name}"):
        storage.volumes.setup(pod_with(CLAIM))
    storage.put(
        ATTACHMENT, name, {"status": {"attached": True, "attachmentMetadata": {"lun": "3"}}}
    )
    storage.volumes.setup(pod_with(CLAIM))
    _, publish = storage.driver.calls[-1]
    assert publish["publish_context"] == {"lun": "3"}
    failed = {"status": {"attached": False, "attachError": {"message": "disk busy"}}}
    storage.put(ATTACHMENT, name, failed)
    with pytest.raises(
        VolumeError, match='MountVolume.WaitForAttach failed for volume "data" : disk busy'
    ):
        storage.volumes.setup(pod_with(CLAIM, uid="pod-2"))


def test_an_inline_volume_needs_a_driver_that_allows_it(storage: Storage) -> None:
    inline = {"name": "cache", "csi": {"driver": DRIVER, "volumeAttributes": {"size": "1"}}}
    storage.put(CSI_DRIVER, DRIVER, {"spec": {"attachRequired": False}})
    with pytest.raises(VolumeError, match=r'volume mode "Ephemeral" not supported by driver'):
        storage.volumes.setup(pod_with(inline))
    modes = {"volumeLifecycleModes": ["Ephemeral"], "podInfoOnMount": True}
    storage.put(CSI_DRIVER, DRIVER, {"spec": modes})
    storage.volumes.setup(pod_with(inline, serviceAccountName="robot"))
    assert storage.driver.methods() == ["NodePublishVolume"]  # an inline volume is not staged
    _, publish = storage.driver.calls[-1]
    assert (publish["volume_id"], publish["staging"]) == (pv.inline_handle("pod-1", "cache"), "")
    assert publish["volume_context"] == {
        "size": "1",
        "csi.storage.k8s.io/pod.name": "db",
        "csi.storage.k8s.io/pod.namespace": NAMESPACE,
        "csi.storage.k8s.io/pod.uid": "pod-1",
        "csi.storage.k8s.io/serviceAccount.name": "robot",
        "csi.storage.k8s.io/ephemeral": "true",
    }


def test_secrets_and_driver_failures_reach_the_driver_and_the_event(storage: Storage) -> None:
    ref = {"name": "creds", "namespace": NAMESPACE}
    storage.bound(nodePublishSecretRef=ref)
    storage.objects.on_fetched(secret("creds", {"password": b"s3cret"}))
    storage.driver.fail = "NodePublishVolume"
    with pytest.raises(VolumeError, match="rpc error: code = UNAVAILABLE desc = driver away"):
        storage.volumes.setup(pod_with(CLAIM))
    storage.driver.fail = ""
    storage.volumes.setup(pod_with(CLAIM))
    _, publish = storage.driver.calls[-1]
    assert publish["secrets"] == {"password": "s3cret"}


def test_an_attachment_the_api_forbids_is_one_not_made_yet(storage: Storage) -> None:
    storage.bound()
    storage.put(CSI_DRIVER, DRIVER, None)
    name = pv.attachment_name("vol-1", DRIVER, "node-a")
    forbidden = 'volumeattachments.storage.k8s.io "x" is forbidden: no relationship found'
    storage.objects.on_fetched(ObjectFetched(ATTACHMENT, "", name, error=forbidden))
    with pytest.raises(VolumePending, match=f"volume attachment {name}"):
        storage.volumes.setup(pod_with(CLAIM))
