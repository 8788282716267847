"""configMap, secret and projected volumes from the API objects ``ApiObjects`` holds:
keys and items, modes, optional, the kubelet's messages, tmpfs for secrets, updates in
place (the ..data swap) and what a subPath mount keeps."""

from __future__ import annotations

import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import mounts
from pkletd.supervisor.pods.setup.volumes import PodVolumes, VolumeError, VolumePending

from tests.supervisor.pods.setup.object_helpers import (
    CM,
    NAMESPACE,
    SECRET,
    config_map,
    missing,
    objects_with,
    secret,
    token,
)

UID = "u-obj"
KUBE_API_ACCESS = {
    "name": "kube-api-access-x1",
    "projected": {
        "defaultMode": 420,
        "sources": [
            {"serviceAccountToken": {"expirationSeconds": 3607, "path": "token"}},
            {
                "configMap": {
                    "name": "kube-root-ca.crt",
                    "items": [{"key": "ca.crt", "path": "ca.crt"}],
                }
            },
            {
                "downwardAPI": {
                    "items": [
                        {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}}
                    ]
                }
            },
        ],
    },
}


def pod_with(*volumes: dict[str, Any], **spec: Any) -> Pod:
    mounts_ = [{"name": v["name"], "mountPath": f"/v/{v['name']}"} for v in volumes]
    return parse_pod(
        {
            "metadata": {"name": "web", "namespace": NAMESPACE, "uid": UID},
            "spec": {
                "containers": [{"name": "c", "image": "x", "volumeMounts": mounts_}],
                "volumes": list(volumes),
                **spec,
            },
        }
    )


@pytest.fixture
def node(tmp_path: Path) -> Iterator[NodeInfo]:
    info = NodeInfo("n", ("10.0.0.1",), tmp_path / "root")
    yield info
    PodVolumes(info, ApiObjects()).teardown(UID)  # unmounts the tmpfs volumes


def volume_dir(node: NodeInfo, plugin: str, name: str) -> Path:
    return node.pods_dir / UID / "volumes" / f"kubernetes.io~{plugin}" / name


def files(root: Path) -> dict[str, bytes]:
    """The volume as a container sees it: each visible name, through the symlinks."""
    found = {}
    for parent, _, names in os.walk(root / "..data"):
        for name in names:
            path = Path(parent) / name
            found[str(path.relative_to(root / "..data"))] = path.read_bytes()
    return found


def test_config_map_all_keys_on_disk(node: NodeInfo) -> None:
    objects = objects_with(config_map("settings", {"a.conf": "x=1\n"}, {"blob": b"\x00\xff"}))
    vols = PodVolumes(node, objects)
    vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings", "defaultMode": 0o440}}))
    root = volume_dir(node, "configmap", "cfg")
    assert files(root) == {"a.conf": b"x=1\n", "blob": b"\x00\xff"}
    assert os.readlink(root / "a.conf") == "..data/a.conf"
    assert stat.S_IMODE((root / "a.conf").stat().st_mode) == 0o440
    assert mounts.fs_type(root) == ""  # on disk, as the kubelet keeps ConfigMaps
    assert stat.S_IMODE(root.stat().st_mode) == 0o777


def test_items_paths_modes_and_missing_keys(node: NodeInfo) -> None:
    objects = objects_with(config_map("settings", {"a": "1", "b": "2"}))
    vols = PodVolumes(node, objects)
    items = [{"key": "a", "path": "conf/a.txt", "mode": 0o400}, {"key": "b", "path": "b"}]
    vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings", "items": items}}))
    root = volume_dir(node, "configmap", "cfg")
    assert files(root) == {"conf/a.txt": b"1", "b": b"2"}
    assert stat.S_IMODE((root / "conf" / "a.txt").stat().st_mode) == 0o400
    assert stat.S_IMODE((root / "b").stat().st_mode) == 0o644

    absent = [{"key": "nope", "path": "n"}, {"key": "a", "path": "a"}]
    with pytest.raises(VolumeError) as error:
        vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings", "items": absent}}))
    assert str(error.value) == (
        'MountVolume.SetUp failed for volume "cfg" : '
        "configmap references non-existent config key: nope"
    )
    optional = {"name": "settings", "items": absent, "optional": True}
    vols.setup(pod_with({"name": "cfg", "configMap": optional}))
    assert files(root) == {"a": b"1"}


def test_missing_objects(node: NodeInfo) -> None:
    vols = PodVolumes(node, objects_with(missing(CM, "settings"), missing(SECRET, "creds")))
    with pytest.raises(VolumeError) as error:
        vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings"}}))
    assert str(error.value) == (
        'MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found'
    )
    vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings", "optional": True}}))
    assert files(volume_dir(node, "configmap", "cfg")) == {}
    with pytest.raises(VolumeError, match='secret "creds" not found'):
        vols.setup(pod_with({"name": "s", "secret": {"secretName": "creds"}}))


def test_an_object_not_yet_read_makes_the_pod_wait(node: NodeInfo) -> None:
    vols = PodVolumes(node, ApiObjects())
    with pytest.raises(VolumePending, match='configmap "settings"'):
        vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings"}}))
    with pytest.raises(VolumePending, match="a service account token"):
        vols.setup(pod_with(KUBE_API_ACCESS))


def test_an_unreadable_object_gives_the_apis_error(node: NodeInfo) -> None:
    refused = config_map("settings")
    refused = type(refused)(CM, NAMESPACE, "settings", error='configmaps "settings" is forbidden')
    vols = PodVolumes(node, objects_with(refused))
    with pytest.raises(VolumeError, match='configmaps "settings" is forbidden'):
        vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings", "optional": True}}))


def test_secrets_live_on_a_tmpfs(node: NodeInfo) -> None:
    objects = objects_with(secret("creds", {"password": b"s3cret", "user": b"me"}))
    vols = PodVolumes(node, objects)
    items = [{"key": "password", "path": "pw", "mode": 0o400}]
    vols.setup(pod_with({"name": "s", "secret": {"secretName": "creds", "items": items}}))
    root = volume_dir(node, "secret", "s")
    assert mounts.fs_type(root) == "tmpfs"
    assert files(root) == {"pw": b"s3cret"}
    assert stat.S_IMODE((root / "pw").stat().st_mode) == 0o400

    absent = [{"key": "token", "path": "t"}]
    with pytest.raises(VolumeError) as error:
        vols.setup(pod_with({"name": "s", "secret": {"secretName": "creds", "items": absent}}))
    assert str(error.value).endswith(" : references non-existent secret key: token")


def test_the_default_service_account_volume(node: NodeInfo) -> None:
    objects = objects_with(
        token(UID, "jwt-1", seconds=3607),
        config_map("kube-root-ca.crt", {"ca.crt": "-----BEGIN CERTIFICATE-----\n"}),
    )
    vols = PodVolumes(node, objects)
    vols.setup(pod_with(KUBE_API_ACCESS))
    root = volume_dir(node, "projected", "kube-api-access-x1")
    assert mounts.fs_type(root) == "tmpfs"
    assert files(root) == {
        "token": b"jwt-1",
        "ca.crt": b"-----BEGIN CERTIFICATE-----\n",
        "namespace": NAMESPACE.encode(),
    }
    assert stat.S_IMODE((root / "token").stat().st_mode) == 0o644  # defaultMode 420

    # A refreshed token is written in place.
    objects.on_token(token(UID, "jwt-2", seconds=3607))
    vols.setup(pod_with(KUBE_API_ACCESS))
    assert (root / "token").read_bytes() == b"jwt-2"


@pytest.mark.parametrize(
    ("security", "mode", "owner"),
    [
        ({}, 0o644, 0),
        ({"runAsUser": 1000}, 0o600, 1000),
        ({"fsGroup": 2000}, 0o640, 0),  # 0600, then the group's read bit from fsGroup
    ],
)
def test_token_mode_follows_fs_user_and_fs_group(
    node: NodeInfo, security: dict[str, int], mode: int, owner: int
) -> None:
    vols = PodVolumes(
        node,
        objects_with(
            token(UID, "jwt", seconds=3607), config_map("kube-root-ca.crt", {"ca.crt": "x"})
        ),
    )
    vols.setup(pod_with(KUBE_API_ACCESS, securityContext=security))
    path = volume_dir(node, "projected", "kube-api-access-x1") / "token"
    assert (stat.S_IMODE(path.stat().st_mode), path.stat().st_uid) == (mode, owner)
    if "fsGroup" in security:
        assert path.stat().st_gid == 2000


def test_projected_failures_are_aggregated(node: NodeInfo) -> None:
    vols = PodVolumes(node, objects_with(missing(CM, "a"), missing(SECRET, "b")))
    projected = {
        "name": "all",
        "projected": {"sources": [{"configMap": {"name": "a"}}, {"secret": {"name": "b"}}]},
    }
    with pytest.raises(VolumeError) as error:
        vols.setup(pod_with(projected))
    assert str(error.value) == (
        'MountVolume.SetUp failed for volume "all" : '
        '[configmap "a" not found, secret "b" not found]'
    )


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("..hidden", "invalid path: must not start with '..': ..hidden"),
        ("k" * 256, "invalid path: filenames must be less than or equal to 255 characters"),
    ],
)
def test_a_key_that_is_no_file_name(node: NodeInfo, key: str, message: str) -> None:
    vols = PodVolumes(node, objects_with(config_map("settings", {key: "x"})))
    with pytest.raises(VolumeError) as error:
        vols.setup(pod_with({"name": "cfg", "configMap": {"name": "settings"}}))
    assert str(error.value) == f'MountVolume.SetUp failed for volume "cfg" : {message}'


def test_an_update_swaps_data_and_a_sub_path_keeps_its_file(node: NodeInfo) -> None:
    objects = objects_with(config_map("settings", {"a": "one", "b": "bee"}))
    vols = PodVolumes(node, objects)
    pod = pod_with({"name": "cfg", "configMap": {"name": "settings"}})
    vols.setup(pod)
    root = volume_dir(node, "configmap", "cfg")
    before = os.readlink(root / "..data")
    # What a subPath mount of "a" binds: the file the symlinks resolve to now.
    sub_path = Path(os.path.realpath(root / "a"))
    held = sub_path.open("rb")

    objects.on_fetched(config_map("settings", {"a": "two"}))
    vols.setup(pod)
    assert os.readlink(root / "..data") != before
    assert files(root) == {"a": b"two"}
    assert not (root / "b").exists()  # a key that is gone leaves the volume
    assert held.read() == b"one"  # the bound file is the old one: not updated
    held.close()

    unchanged = os.readlink(root / "..data")
    vols.setup(pod)  # nothing changed: nothing written
    assert os.readlink(root / "..data") == unchanged


def test_standalone_node_has_no_objects_and_no_tokens(node: NodeInfo) -> None:
    vols = PodVolumes(node, ApiObjects(standalone=True))
    with pytest.raises(VolumeError) as error:
        vols.setup(pod_with(KUBE_API_ACCESS))
    assert str(error.value) == (
        'MountVolume.SetUp failed for volume "kube-api-access-x1" : [failed to fetch token: '
        'cannot use TokenManager when kubelet is in standalone mode, configmap "kube-root-ca.crt" '
        "not found]"
    )


def test_a_remount_updates_only_the_written_volumes(node: NodeInfo) -> None:
    objects = objects_with(config_map("settings", {"a": "1"}))
    vols = PodVolumes(node, objects)
    pod = pod_with(
        {"name": "cfg", "configMap": {"name": "settings"}}, {"name": "e", "emptyDir": {}}
    )
    vols.setup(pod)
    scratch = volume_dir(node, "empty-dir", "e")
    scratch.rmdir()  # what the kubelet set up once, it does not set up again
    objects.on_fetched(config_map("settings", {"a": "2"}))
    vols.setup(pod, remount=True)
    assert files(volume_dir(node, "configmap", "cfg")) == {"a": b"2"}
    assert not scratch.exists()
