"""Volumes without a runtime: hostPath type checks, the atomic writer, fsGroup, tmpfs sizes,
subPath, and the API's validation of volumes and mounts."""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Iterator
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.supervisor.pods.nodeinfo import NodeInfo
from pkletd.supervisor.pods.objects import ApiObjects
from pkletd.supervisor.pods.setup import atomicwriter, volumes
from pkletd.supervisor.pods.setup.atomicwriter import FileProjection, PayloadError
from pkletd.supervisor.pods.setup.envvars import ConfigError
from pkletd.supervisor.pods.setup.volumes import PodVolumes, SetupFailure, check_host_path

STANDALONE = ApiObjects(standalone=True)


@pytest.fixture
def paths(tmp_path: Path) -> Iterator[dict[str, Path]]:
    found = {"dir": tmp_path / "dir", "file": tmp_path / "file", "missing": tmp_path / "missing"}
    found["dir"].mkdir()
    found["file"].write_text("x")
    found["socket"] = tmp_path / "sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(found["socket"]))
    found["block"] = tmp_path / "block"
    os.mknod(found["block"], stat.S_IFBLK | 0o600, os.makedev(7, 200))
    found["char"] = Path("/dev/null")
    found["link-to-dir"] = tmp_path / "link"
    found["link-to-dir"].symlink_to(found["dir"])
    yield found
    server.close()


OK = {
    "": ["dir", "file", "missing", "socket", "block", "char", "link-to-dir"],  # no check
    "Directory": ["dir", "link-to-dir"],
    "DirectoryOrCreate": ["dir", "link-to-dir"],
    "File": ["file"],
    "FileOrCreate": ["file"],
    "Socket": ["socket"],
    "CharDevice": ["char"],
    "BlockDevice": ["block"],
}
WHAT = {
    "Directory": "a directory",
    "DirectoryOrCreate": "a directory",
    "File": "a file",
    "FileOrCreate": "a file",
    "Socket": "a socket file",
    "CharDevice": "a character device",
    "BlockDevice": "a block device",
}


@pytest.mark.parametrize("kind", list(OK))
@pytest.mark.parametrize(
    "target", ["dir", "file", "missing", "socket", "block", "char", "link-to-dir"]
)
def test_host_path_type_checks(paths: dict[str, Path], kind: str, target: str) -> None:
    path = str(paths[target])
    if target in OK[kind] or (target == "missing" and kind.endswith("OrCreate")):
        check_host_path(path, kind)
        return
    with pytest.raises(SetupFailure) as failure:
        check_host_path(path, kind)
    assert str(failure.value) == f"hostPath type check failed: {path} is not {WHAT[kind]}"


def test_host_path_created(tmp_path: Path) -> None:
    old = os.umask(0o022)
    try:
        check_host_path(str(tmp_path / "a" / "b"), "DirectoryOrCreate")
        check_host_path(str(tmp_path / "f"), "FileOrCreate")
    finally:
        os.umask(old)
    assert stat.S_IMODE((tmp_path / "a" / "b").stat().st_mode) == 0o755
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o644
    with pytest.raises(SetupFailure, match="No such file or directory"):
        check_host_path(str(tmp_path / "no" / "parent"), "FileOrCreate")  # parents not made


def listing(target: Path) -> dict[str, str]:
    return {p.name: os.readlink(p) for p in target.iterdir() if p.is_symlink()}


def test_atomic_writer_layout_and_update(tmp_path: Path) -> None:
    payload = {
        "name": FileProjection(b"web", 0o644),
        "dir/labels": FileProjection(b'a="1"', 0o400),
        "gone": FileProjection(b"soon", 0o644),
    }
    assert atomicwriter.write(tmp_path, payload)
    links = listing(tmp_path)
    first = links.pop("..data")
    assert first.startswith("..") and first.count(".") == 3 and (tmp_path / first).is_dir()
    assert links == {"name": "..data/name", "dir": "..data/dir", "gone": "..data/gone"}
    assert (tmp_path / "dir" / "labels").read_bytes() == b'a="1"'
    assert stat.S_IMODE((tmp_path / first / "dir" / "labels").stat().st_mode) == 0o400
    assert stat.S_IMODE((tmp_path / first).stat().st_mode) == 0o755

    assert not atomicwriter.write(tmp_path, payload)  # same content: nothing written
    assert os.readlink(tmp_path / "..data") == first

    del payload["gone"]
    payload["name"] = FileProjection(b"web2", 0o644)
    assert atomicwriter.write(tmp_path, payload)
    second = os.readlink(tmp_path / "..data")
    assert second != first and not (tmp_path / first).exists()
    assert not (tmp_path / "gone").is_symlink()
    assert (tmp_path / "name").read_text() == "web2"
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(["..data", second, "name", "dir"])


def test_atomic_writer_removal_only_rewrites(tmp_path: Path) -> None:
    atomicwriter.write(
        tmp_path, {"a": FileProjection(b"1", 0o644), "b": FileProjection(b"2", 0o644)}
    )
    assert atomicwriter.write(tmp_path, {"a": FileProjection(b"1", 0o644)})
    assert [p.name for p in tmp_path.iterdir() if not p.name.startswith("..")] == ["a"]


@pytest.mark.parametrize(
    ("path", "message"),
    [
        ("/abs", "must be relative path"),
        ("a/../b", "must not contain '..'"),
        ("..hidden", "must not start with '..'"),
        ("", "must not be empty"),
        ("x" * 256, "filenames must be less than or equal to 255 characters"),
    ],
)
def test_atomic_writer_refuses_bad_paths(tmp_path: Path, path: str, message: str) -> None:
    with pytest.raises(PayloadError, match=message):
        atomicwriter.write(tmp_path, {path: FileProjection(b"", 0o644)})


def test_fs_group_ownership(tmp_path: Path) -> None:
    (tmp_path / "sub").mkdir(mode=0o700)
    (tmp_path / "sub" / "f").write_text("x")
    (tmp_path / "sub" / "f").chmod(0o600)
    (tmp_path / "link").symlink_to("sub/f")
    volumes.set_ownership(tmp_path, 2345, read_only=False)
    sub = (tmp_path / "sub").stat()
    assert sub.st_gid == 2345 and stat.S_IMODE(sub.st_mode) == 0o2770
    f = (tmp_path / "sub" / "f").stat()
    assert f.st_gid == 2345 and stat.S_IMODE(f.st_mode) == 0o660
    assert (tmp_path / "link").lstat().st_gid == 2345
    assert not volumes.needs_ownership(tmp_path, 2345, False, "OnRootMismatch")
    assert volumes.needs_ownership(tmp_path, 2345, False, "Always")
    assert volumes.needs_ownership(tmp_path, 99, False, "OnRootMismatch")


def test_fs_group_read_only_mask(tmp_path: Path) -> None:
    (tmp_path / "f").write_text("x")
    (tmp_path / "f").chmod(0o400)
    volumes.set_ownership(tmp_path, 2345, read_only=True)
    assert stat.S_IMODE((tmp_path / "f").stat().st_mode) == 0o440


def memory_pod(size_limit: str | None, limits: list[str | None]) -> Any:
    empty_dir: dict[str, Any] = {"medium": "Memory"}
    if size_limit is not None:
        empty_dir["sizeLimit"] = size_limit
    containers = [
        {
            "name": f"c{i}",
            "image": "x",
            "resources": {"limits": {"memory": limit}} if limit is not None else {},
        }
        for i, limit in enumerate(limits)
    ]
    return parse_pod(
        {
            "metadata": {"name": "p", "uid": "u"},
            "spec": {"volumes": [{"name": "m", "emptyDir": empty_dir}], "containers": containers},
        }
    )


NODE = NodeInfo("n", ("192.0.2.1",), Path("/x"), memory=Fraction(1024 * 2**20))


@pytest.mark.parametrize(
    ("size_limit", "limits", "expected_mi"),
    [
        (None, [None], 1024),  # the node's allocatable memory
        ("64Mi", [None], 64),
        (None, ["100Mi", "28Mi"], 128),  # the pod's limit: every container has one
        (None, ["100Mi", None], 1024),  # not every container: no pod limit
        ("512Mi", ["100Mi"], 100),  # sizeLimit only lowers
        ("2Gi", [None], 1024),
        ("0", [None], 1024),
    ],
)
def test_tmpfs_size(size_limit: str | None, limits: list[str | None], expected_mi: int) -> None:
    pod = memory_pod(size_limit, limits)
    assert volumes.tmpfs_size(pod, pod.volumes[0], NODE) == expected_mi * 2**20


def sub_path_pod(mount: dict[str, Any], env: list[dict[str, Any]] | None = None) -> Any:
    return parse_pod(
        {
            "metadata": {"name": "p", "uid": "uid-1"},
            "spec": {
                "volumes": [{"name": "v", "emptyDir": {}}],
                "containers": [
                    {
                        "name": "c",
                        "image": "x",
                        "env": env or [],
                        "volumeMounts": [{"name": "v", "mountPath": "/m", **mount}],
                    }
                ],
            },
        }
    )


def test_sub_path_created_and_confined(tmp_path: Path) -> None:
    vols = PodVolumes(NodeInfo("n", (), tmp_path), STANDALONE)
    pod = sub_path_pod({"subPath": "a/b"})
    vols.setup(pod)
    (mount,) = vols.mounts(pod, pod.containers[0], [])
    base = tmp_path / "pods" / "uid-1" / "volumes" / "kubernetes.io~empty-dir" / "v"
    assert mount.host_path == str(base / "a" / "b") and (base / "a" / "b").is_dir()
    assert stat.S_IMODE((base / "a").stat().st_mode) == 0o777  # the volume's own mode
    assert (mount.container_path, mount.readonly, mount.propagation) == ("/m", False, "private")

    (base / "escape").symlink_to("/etc")
    pod = sub_path_pod({"subPath": "escape"})
    with pytest.raises(ConfigError, match='failed to prepare subPath for volumeMount "v"'):
        vols.mounts(pod, pod.containers[0], [])


def test_sub_path_expr(tmp_path: Path) -> None:
    vols = PodVolumes(NodeInfo("n", (), tmp_path), STANDALONE)
    pod = sub_path_pod({"subPathExpr": "logs/$(POD)"})
    vols.setup(pod)
    (mount,) = vols.mounts(pod, pod.containers[0], [("POD", "web-1")])
    assert mount.host_path.endswith("/v/logs/web-1")
    with pytest.raises(ConfigError, match="missing value for POD"):
        vols.mounts(pod, pod.containers[0], [("POD", "")])


def test_teardown_removes_the_pod_dir(tmp_path: Path) -> None:
    vols = PodVolumes(NodeInfo("n", (), tmp_path), STANDALONE)
    pod = sub_path_pod({})
    vols.setup(pod)
    assert (tmp_path / "pods" / "uid-1").is_dir()
    vols.teardown("uid-1")
    assert not (tmp_path / "pods" / "uid-1").exists()
    vols.teardown("uid-1")  # nothing left: no error


def spec_with(volumes_: list[dict[str, Any]], mounts: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "metadata": {"name": "p"},
        "spec": {
            "volumes": volumes_,
            "containers": [{"name": "c", "image": "x", "volumeMounts": mounts}],
        },
    }


@pytest.mark.parametrize(
    ("volumes_", "mounts", "field"),
    [
        (
            [{"name": "a", "emptyDir": {}}, {"name": "a", "emptyDir": {}}],
            [],
            "spec.volumes[1].name: duplicate value",
        ),
        ([{"name": "a"}], [], "spec.volumes[0]: required value: must specify a volume type"),
        (
            [{"name": "a", "emptyDir": {}, "hostPath": {"path": "/x"}}],
            [],
            "spec.volumes[0].hostPath: forbidden: may not specify more than 1 volume type",
        ),
        ([{"name": "A_b", "emptyDir": {}}], [], "spec.volumes[0].name: invalid value"),
        (
            [{"name": "a", "hostPath": {"path": "/x", "type": "Dir"}}],
            [],
            "spec.volumes[0].hostPath.type: unsupported value 'Dir'",
        ),
        (
            [{"name": "a", "hostPath": {"path": "/x/../etc"}}],
            [],
            "spec.volumes[0].hostPath.path: invalid value '/x/../etc': must not contain '..'",
        ),
        (
            [{"name": "a", "emptyDir": {"sizeLimit": "lots"}}],
            [],
            "spec.volumes[0].emptyDir.sizeLimit: invalid value: quantities must match",
        ),
        (
            [{"name": "a", "emptyDir": {"medium": "Disk"}}],
            [],
            "spec.volumes[0].emptyDir.medium: unsupported value 'Disk'",
        ),
        (
            [{"name": "a", "downwardAPI": {"items": [{"path": "x"}]}}],
            [],
            "spec.volumes[0].downwardAPI.items[0]: required value",
        ),
        (
            [
                {
                    "name": "a",
                    "downwardAPI": {
                        "items": [{"path": "../x", "fieldRef": {"fieldPath": "metadata.name"}}]
                    },
                }
            ],
            [],
            "spec.volumes[0].downwardAPI.items[0].path: invalid value '../x'",
        ),
        (
            [
                {
                    "name": "a",
                    "downwardAPI": {
                        "items": [{"path": "x", "fieldRef": {"fieldPath": "status.podIP"}}]
                    },
                }
            ],
            [],
            "spec.volumes[0].downwardAPI.items[0].fieldRef.fieldPath: unsupported value",
        ),
        (
            [
                {
                    "name": "a",
                    "downwardAPI": {
                        "items": [{"path": "x", "resourceFieldRef": {"resource": "limits.cpu"}}]
                    },
                }
            ],
            [],
            "spec.volumes[0].downwardAPI.items[0].resourceFieldRef.containerName: required value",
        ),
        (
            [{"name": "a", "downwardAPI": {"defaultMode": 0o1777, "items": []}}],
            [],
            "spec.volumes[0].downwardAPI.defaultMode: invalid value 1023",
        ),
        (
            [
                {
                    "name": "a",
                    "projected": {
                        "sources": [
                            {
                                "downwardAPI": {
                                    "items": [
                                        {"path": "x", "fieldRef": {"fieldPath": "metadata.name"}}
                                    ]
                                }
                            },
                            {
                                "downwardAPI": {
                                    "items": [
                                        {"path": "x", "fieldRef": {"fieldPath": "metadata.uid"}}
                                    ]
                                }
                            },
                        ]
                    },
                }
            ],
            [],
            "spec.volumes[0].projected.sources[1]: invalid value 'x': conflicting duplicate",
        ),
        (
            [{"name": "a", "projected": {"sources": [{"serviceAccountToken": {}}]}}],
            [],
            "spec.volumes[0].projected.sources[0].serviceAccountToken.path: required value",
        ),
        (
            [
                {
                    "name": "a",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"path": "t", "expirationSeconds": 599}}
                        ]
                    },
                }
            ],
            [],
            "expirationSeconds: invalid value 599: may not specify a duration less than 10 min",
        ),
        (
            [
                {
                    "name": "a",
                    "projected": {
                        "sources": [
                            {"serviceAccountToken": {"path": "t", "expirationSeconds": 2**32 + 1}}
                        ]
                    },
                }
            ],
            [],
            "may not specify a duration larger than 2^32 seconds",
        ),
        (
            [{"name": "a", "emptyDir": {}}],
            [{"name": "b", "mountPath": "/b"}],
            "spec.containers[0].volumeMounts[0].name: not found: 'b'",
        ),
        (
            [{"name": "a", "emptyDir": {}}],
            [{"name": "a"}],
            "spec.containers[0].volumeMounts[0].mountPath: required value",
        ),
        (
            [{"name": "a", "emptyDir": {}}],
            [{"name": "a", "mountPath": "/a"}, {"name": "a", "mountPath": "/a"}],
            "spec.containers[0].volumeMounts[1].mountPath: invalid value '/a': must be unique",
        ),
        (
            [{"name": "a", "emptyDir": {}}],
            [{"name": "a", "mountPath": "/a", "subPath": "/abs"}],
            "spec.containers[0].volumeMounts[0].subPath: invalid value '/abs'",
        ),
        (
            [{"name": "a", "emptyDir": {}}],
            [{"name": "a", "mountPath": "/a", "subPath": "x", "subPathExpr": "y"}],
            "subPathExpr and subPath are mutually exclusive",
        ),
        (
            [{"name": "a", "emptyDir": {}}],
            [{"name": "a", "mountPath": "/a", "mountPropagation": "Shared"}],
            "spec.containers[0].volumeMounts[0].mountPropagation: unsupported value 'Shared'",
        ),
        (
            [{"name": "a", "emptyDir": {}}],
            [{"name": "a", "mountPath": "/a", "mountPropagation": "Bidirectional"}],
            "Bidirectional mount propagation is available only to privileged containers",
        ),
    ],
)
def test_volume_validation_names_the_field(
    volumes_: list[dict[str, Any]], mounts: list[dict[str, Any]], field: str
) -> None:
    with pytest.raises(InvalidPod) as error:
        parse_pod(spec_with(volumes_, mounts))
    assert field in str(error.value)


def test_mounts_of_written_volumes_are_read_only(tmp_path: Path) -> None:
    raw = spec_with(
        [
            {"name": "d", "downwardAPI": {"items": []}},
            {"name": "h", "hostPath": {"path": str(tmp_path / "host")}},
        ],
        [
            {"name": "d", "mountPath": "/d"},
            {"name": "h", "mountPath": "h", "mountPropagation": "HostToContainer"},
        ],
    )
    raw["metadata"]["uid"] = "u"
    pod = parse_pod(raw)
    # The host path is not under the root dir: nothing is made rshared.
    found = PodVolumes(NodeInfo("n", (), tmp_path / "root"), STANDALONE).mounts(
        pod, pod.containers[0], []
    )
    assert [(m.container_path, m.readonly, m.propagation) for m in found] == [
        ("/d", True, "private"),
        ("/h", False, "host-to-container"),
    ]
    assert found[1].host_path == str(tmp_path / "host")


def test_token_and_object_projections_parse() -> None:
    sources = [
        {
            "serviceAccountToken": {
                "path": "vault/token",
                "audience": "vault",
                "expirationSeconds": 600,
            }
        },
        {"serviceAccountToken": {"path": "token"}},
        {
            "secret": {
                "name": "s",
                "items": [{"key": "k", "path": "p", "mode": 0o400}],
                "optional": True,
            }
        },
    ]
    pod = parse_pod(spec_with([{"name": "a", "projected": {"sources": sources}}], []))
    vault, default, secret = pod.volumes[0].projections
    assert (vault.items[0].path, vault.audience, vault.expiration_seconds) == (
        "vault/token",
        "vault",
        600,
    )
    assert (default.items[0].path, default.audience, default.expiration_seconds) == (
        "token",
        "",
        3600,
    )
    assert (secret.name, secret.optional) == ("s", True)
    assert [(i.key, i.path, i.mode) for i in secret.items] == [("k", "p", 0o400)]
