"""Volumes a node serves by itself, on the real containerd: emptyDir, tmpfs, downward API,
projected, hostPath type checks, subPath, read-only mounts, and teardown."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.containerd import mounts_under
from tests.harness.node import Pkletd, exec_in, wait_for
from tests.supervisor.pods.pod_helpers import container_ids, manifest, wait_waiting

pytestmark = pytest.mark.slow


@pytest.fixture
def host_dir() -> Iterator[Path]:
    path = Path(tempfile.mkdtemp(prefix="pk-host-", dir="/tmp"))
    yield path
    for root, dirs, files in os.walk(path, topdown=False):
        for name in files:
            (Path(root) / name).unlink()
        for name in dirs:
            (Path(root) / name).rmdir()
    path.rmdir()


def refused(agent: Pkletd, container_id: str, *command: str) -> str:
    """Run a command that must fail; its error output."""
    with pytest.raises(AssertionError) as failure:
        exec_in(agent, container_id, *command)
    return str(failure.value)


def pod_dir(agent: Pkletd, name: str) -> Path:
    pod = agent.pod(name)
    assert pod is not None
    return agent.root_dir / "pods" / pod["uid"]


def test_empty_dirs_sub_path_read_only_and_teardown(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("shared", manifest("volumes-shared"))
    pkletd.wait_running("shared")
    ids = container_ids(pkletd, "shared")
    volumes = pod_dir(pkletd, "shared") / "volumes" / "kubernetes.io~empty-dir"

    # One emptyDir, two containers: what one writes the other reads.
    message = wait_for(
        "the writer's file seen by the reader",
        lambda: exec_in(pkletd, ids["reader"], "cat", "/data/message"),
    )
    assert message == "from-writer\n"
    assert (volumes / "shared" / "message").read_text() == "from-writer\n"
    assert stat.S_IMODE((volumes / "shared").stat().st_mode) == 0o777

    # readOnly mount: writes refused.
    assert "Read-only file system" in refused(pkletd, ids["reader"], "touch", "/data/nope")

    # subPath: created inside the volume, mounted on its own.
    exec_in(pkletd, ids["writer"], "sh", "-c", "echo deep > /nested/file")
    assert exec_in(pkletd, ids["reader"], "cat", "/data/deep/er/file") == "deep\n"

    # medium: Memory is a tmpfs of sizeLimit.
    mounts = exec_in(pkletd, ids["writer"], "cat", "/proc/mounts")
    (line,) = [m for m in mounts.splitlines() if m.split()[1] == "/memory"]
    assert line.split()[2] == "tmpfs"
    assert "size=65536k" in line.split()[3].split(",")
    memory = volumes / "memory"
    assert [str(memory)] == mounts_under(memory)

    # Removing the pod unmounts the tmpfs and removes the pod's directory.
    directory = pod_dir(pkletd, "shared")
    pkletd.remove("shared")
    wait_for("pod directory removed", lambda: not directory.exists(), timeout=30)
    assert mounts_under(directory) == []


def test_downward_api_and_projected_files(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("podinfo", manifest("volumes-downward"))
    pkletd.wait_running("podinfo")
    (cid,) = container_ids(pkletd, "podinfo").values()

    def read(path: str) -> str:
        return exec_in(pkletd, cid, "cat", path)

    assert read("/etc/podinfo/labels") == 'app="podinfo"\nzone="z1"'
    assert read("/etc/podinfo/name") == "podinfo-testnode"
    assert read("/etc/podinfo/meta/build") == "42"
    assert read("/etc/podinfo/memory_limit") == "48"
    assert read("/etc/projected/namespace") == "default"

    # The AtomicWriter layout: visible names link into ..data, a timestamped directory.
    assert exec_in(pkletd, cid, "readlink", "/etc/podinfo/labels") == "..data/labels\n"
    assert exec_in(pkletd, cid, "readlink", "/etc/podinfo/meta") == "..data/meta\n"
    data = exec_in(pkletd, cid, "readlink", "/etc/podinfo/..data").strip()
    assert data.startswith("..20") and len(data.split(".")) == 4, data
    modes = exec_in(
        pkletd, cid, "stat", "-L", "-c", "%a %n", "/etc/podinfo/labels", "/etc/podinfo/meta/build"
    )
    assert modes.split() == ["640", "/etc/podinfo/labels", "400", "/etc/podinfo/meta/build"]

    # Downward API volumes are always mounted read-only.
    assert "Read-only file system" in refused(pkletd, cid, "touch", "/etc/podinfo/x")


def test_host_path_types(pkletd: Pkletd, host_dir: Path) -> None:
    pkletd.start()
    pkletd.put("hostpaths", manifest("volumes-hostpath", HOSTDIR=str(host_dir)))
    pkletd.wait_running("hostpaths")
    (cid,) = container_ids(pkletd, "hostpaths").values()

    made = host_dir / "made" / "here"
    assert made.is_dir() and stat.S_IMODE(made.stat().st_mode) == 0o755
    assert (host_dir / "made.txt").is_file()
    wait_for("file written through the hostPath", (made / "from-container").exists)
    assert exec_in(pkletd, cid, "ls", "/host/made/here") == "from-container\n"
    assert "Read-only file system" in refused(pkletd, cid, "touch", "/host/x")


@pytest.mark.parametrize(
    ("kind", "target", "what"),
    [
        ("Directory", "missing", "a directory"),
        ("Directory", "file", "a directory"),
        ("File", "dir", "a file"),
        ("Socket", "file", "a socket file"),
        ("CharDevice", "file", "a character device"),
        ("BlockDevice", "file", "a block device"),
    ],
)
def test_host_path_type_check_fails(
    pkletd: Pkletd, host_dir: Path, kind: str, target: str, what: str
) -> None:
    (host_dir / "file").write_text("x")
    (host_dir / "dir").mkdir()
    path = host_dir / target
    pod = manifest("volumes-hostpath", HOSTDIR=str(host_dir))
    pod["spec"]["volumes"] = [{"name": "data", "hostPath": {"path": str(path), "type": kind}}]
    pod["spec"]["containers"][0]["volumeMounts"] = [{"name": "data", "mountPath": "/data"}]
    pkletd.start()
    pkletd.put("hostpaths", pod)
    waiting = wait_waiting(pkletd, "hostpaths", "app", "ContainerCreating")
    assert waiting["message"] == (
        f'MountVolume.SetUp failed for volume "data" : '
        f"hostPath type check failed: {path} is not {what}"
    )
    assert pkletd.pod("hostpaths")["phase"] == "Pending"  # type: ignore[index]


def test_volumes_that_need_an_api_server(pkletd: Pkletd) -> None:
    pkletd.start()
    token = manifest("volumes-downward")
    token["metadata"]["name"] = "token"
    token["spec"]["volumes"] = [
        {
            "name": "token",
            "projected": {"sources": [{"serviceAccountToken": {"path": "token"}}]},
        }
    ]
    token["spec"]["containers"][0]["volumeMounts"] = [{"name": "token", "mountPath": "/var/run"}]
    config = manifest("volumes-downward")
    config["metadata"]["name"] = "config"
    config["spec"]["volumes"] = [{"name": "cfg", "configMap": {"name": "settings"}}]
    config["spec"]["containers"][0]["volumeMounts"] = [{"name": "cfg", "mountPath": "/cfg"}]
    pkletd.put("token", token)
    pkletd.put("config", config)
    waiting = wait_waiting(pkletd, "token", "app", "ContainerCreating")
    assert waiting["message"] == (
        'MountVolume.SetUp failed for volume "token" : failed to fetch token: '
        "cannot use TokenManager when kubelet is in standalone mode"
    )
    waiting = wait_waiting(pkletd, "config", "app", "ContainerCreating")
    assert waiting["message"] == (
        'MountVolume.SetUp failed for volume "cfg" : configmap "settings" not found'
    )


def test_mount_propagation(pkletd: Pkletd) -> None:
    """Bidirectional from a privileged container, HostToContainer into another."""
    pkletd.start()
    pod = manifest("volumes-shared")
    pod["metadata"]["name"] = "propagation"
    pod["spec"]["volumes"] = [{"name": "shared", "emptyDir": {}}]
    writer, reader = pod["spec"]["containers"]
    writer["securityContext"] = {"privileged": True}
    writer["command"] = [
        "sh",
        "-c",
        "mkdir -p /shared/sub && mount -t tmpfs tmpfs /shared/sub && touch /shared/sub/marker;"
        " trap 'exit 0' TERM; while true; do sleep 1; done",
    ]
    writer["volumeMounts"] = [
        {"name": "shared", "mountPath": "/shared", "mountPropagation": "Bidirectional"}
    ]
    reader["volumeMounts"] = [
        {"name": "shared", "mountPath": "/data", "mountPropagation": "HostToContainer"}
    ]
    pkletd.put("propagation", pod)
    pkletd.wait_running("propagation")
    ids = container_ids(pkletd, "propagation")
    directory = pod_dir(pkletd, "propagation")
    wait_for(
        "the writer's tmpfs seen by the reader",
        lambda: "marker" in exec_in(pkletd, ids["reader"], "ls", "/data/sub"),
    )
    sub = directory / "volumes" / "kubernetes.io~empty-dir" / "shared" / "sub"
    assert str(sub) in mounts_under(directory)  # on the host too

    pkletd.remove("propagation")
    wait_for("pod directory removed", lambda: not directory.exists(), timeout=30)
    assert mounts_under(directory) == []
