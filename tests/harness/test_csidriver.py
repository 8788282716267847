"""The test CSI driver (``tests/harness/csidriver``) as pkletd will see it: a separate
process driven through pkletd's own ``CsiClient`` and ``RegistrationClient``, making
real bind mounts (the tests run as root), registering as node-driver-registrar does,
surviving SIGKILL and restart, and recording every call."""

from __future__ import annotations

import errno
import shutil
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.csi.client import CsiClient, CsiError, NodeInfo, RegistrationClient, VolumeAccess

from tests.harness.csidriver import CsiDriverProcess, DriverConfig, mounts

NAME = "hostpath.csi.pkletd.test"
RW = VolumeAccess("ext4")


class Node:
    """A kubelet root dir and a driver on it, with clients; everything mounted under
    ``base`` is unmounted at the end."""

    def __init__(self, base: Path) -> None:
        self.base = base
        self.root = base / "root"
        self.processes: list[CsiDriverProcess] = []
        self.clients: list[Any] = []

    def driver(self, **settings: Any) -> CsiDriverProcess:
        config = DriverConfig.for_kubelet(
            self.root, NAME, "node-a", self.base / "data", self.base / "calls.jsonl", **settings
        )
        process = CsiDriverProcess(config)
        self.processes.append(process)
        process.start()
        return process

    def csi(self, driver: CsiDriverProcess) -> CsiClient:
        self.clients.append(CsiClient(str(driver.config.endpoint)))
        return self.clients[-1]

    def registration(self, driver: CsiDriverProcess) -> RegistrationClient:
        self.clients.append(RegistrationClient(str(driver.config.registration_socket)))
        return self.clients[-1]

    def staging(self, volume: str) -> Path:
        return self.root / "plugins/kubernetes.io/csi" / NAME / volume / "globalmount"

    def target(self, pod: str, volume: str = "data") -> Path:
        return self.root / "pods" / pod / "volumes/kubernetes.io~csi" / volume / "mount"

    def mounts(self) -> list[Path]:
        """What is mounted under ``base``, in mount order."""
        found = []
        for line in Path("/proc/self/mountinfo").read_text().splitlines():
            point = Path(line.split()[4])
            if point.is_relative_to(self.base):
                found.append(point)
        return found

    def close(self) -> None:
        for client in self.clients:
            client.close()
        for process in self.processes:
            process.stop()
        for point in reversed(self.mounts()):
            mounts.unmount(point)


@pytest.fixture
def node() -> Iterator[Node]:
    base = Path(tempfile.mkdtemp(prefix="csid-", dir="/tmp"))  # sockets want short paths
    made = Node(base)
    try:
        yield made
    finally:
        made.close()
        shutil.rmtree(base)


def refused(call: Callable[[], object]) -> CsiError:
    with pytest.raises(CsiError) as failed:
        call()
    return failed.value


def reconnected(client: CsiClient, timeout: float = 5.0) -> None:
    deadline = time.monotonic() + timeout
    while True:
        try:
            client.node_capabilities()
            return
        except CsiError as exc:
            if exc.code != "UNAVAILABLE" or time.monotonic() >= deadline:
                raise
        time.sleep(0.05)


# --- registration and identity -------------------------------------------------------------


def test_registers_as_node_driver_registrar_does(node: Node) -> None:
    driver = node.driver()
    assert driver.config.registration_socket == node.root / "plugins_registry" / f"{NAME}-reg.sock"
    registration = node.registration(driver)
    info = registration.get_info()
    assert (info.type, info.name, info.versions) == ("CSIPlugin", NAME, ("1.0.0",))
    assert info.endpoint == str(node.root / "plugins" / NAME / "csi.sock")
    registration.notify(False, "no supported version")
    registration.notify(True)
    assert driver.registration_status() == [(False, "no supported version"), (True, "")]


def test_sigterm_removes_both_sockets(node: Node) -> None:
    driver = node.driver()
    assert driver.stop() == 0
    assert not driver.config.registration_socket.exists()
    assert not driver.config.endpoint.exists()


def test_node_info_and_capabilities(node: Node) -> None:
    driver = node.driver(max_volumes=3, topology={"topology.pkletd.test/zone": "z1"})
    client = node.csi(driver)
    assert client.plugin_info() == (NAME, "1.0.0")
    assert client.node_info() == NodeInfo("node-a", 3, {"topology.pkletd.test/zone": "z1"})
    assert client.node_capabilities() == {
        "STAGE_UNSTAGE_VOLUME",
        "GET_VOLUME_STATS",
        "VOLUME_CONDITION",
    }


def test_a_driver_without_staging_says_so(node: Node) -> None:
    client = node.csi(node.driver(stage=False))
    assert "STAGE_UNSTAGE_VOLUME" not in client.node_capabilities()
    error = refused(lambda: client.stage_volume("v", str(node.staging("v")), RW, {}, {}, {}))
    assert error.code == "UNIMPLEMENTED"


# --- volumes -------------------------------------------------------------------------------


def test_stage_and_publish_share_the_volume_dir(node: Node) -> None:
    client = node.csi(node.driver())
    staging, target = node.staging("v1"), node.target("pod-1")
    for _ in range(2):  # a second call of each is a no-op
        client.stage_volume("v1", str(staging), RW, {}, {}, {})
        client.publish_volume("v1", str(staging), str(target), RW, False, {}, {}, {})
    assert node.mounts() == [staging, target]
    (target / "written-by-pod").write_text("kept")
    assert (node.base / "data" / "v1" / "written-by-pod").read_text() == "kept"

    for _ in range(2):
        client.unpublish_volume("v1", str(target))
        client.unstage_volume("v1", str(staging))
    assert node.mounts() == []
    assert not target.exists()  # the driver removes what it made
    assert (node.base / "data" / "v1" / "written-by-pod").read_text() == "kept"


def test_read_only_publish(node: Node) -> None:
    client = node.csi(node.driver())
    staging, target = node.staging("v2"), node.target("pod-2")
    client.stage_volume("v2", str(staging), RW, {}, {}, {})
    client.publish_volume("v2", str(staging), str(target), RW, True, {}, {}, {})
    with pytest.raises(OSError) as denied:
        (target / "f").write_text("x")
    assert denied.value.errno == errno.EROFS
    (staging / "f").write_text("through the staging mount")  # the volume itself is writable
    assert (target / "f").read_text() == "through the staging mount"

    again = refused(
        lambda: client.publish_volume("v2", str(staging), str(target), RW, False, {}, {}, {})
    )
    assert again.code == "ALREADY_EXISTS"


def test_without_staging_publish_binds_the_volume(node: Node) -> None:
    client = node.csi(node.driver(stage=False))
    target = node.target("pod-3")
    client.publish_volume("v3", "", str(target), RW, False, {}, {}, {})
    (target / "f").write_text("direct")
    assert (node.base / "data" / "v3" / "f").read_text() == "direct"
    client.unpublish_volume("v3", str(target))
    assert node.mounts() == []


def test_an_inline_ephemeral_volume_is_fresh_and_goes(node: Node) -> None:
    client = node.csi(node.driver())
    target = node.target("pod-4", "scratch")
    context = {"csi.storage.k8s.io/ephemeral": "true", "csi.storage.k8s.io/pod.name": "p"}
    client.publish_volume("csi-abc", "", str(target), RW, False, {}, context, {})
    (target / "f").write_text("temporary")
    ephemeral = node.base / "data" / "ephemeral" / "csi-abc"
    assert (ephemeral / "f").read_text() == "temporary"
    client.unpublish_volume("csi-abc", str(target))
    assert not ephemeral.exists()
    assert node.mounts() == []


def test_arguments_are_checked_as_a_real_driver_does(node: Node) -> None:
    client = node.csi(node.driver())
    staging, target = str(node.staging("v5")), str(node.target("pod-5"))
    checks = {
        "no volume id": lambda: client.stage_volume("", staging, RW, {}, {}, {}),
        "no staging path": lambda: client.stage_volume("v5", "", RW, {}, {}, {}),
        "no target path": lambda: client.publish_volume("v5", staging, "", RW, False, {}, {}, {}),
        "no unpublish id": lambda: client.unpublish_volume("", target),
        "no stats path": lambda: client.volume_stats("v5", ""),
    }
    codes = {what: refused(call).code for what, call in checks.items()}
    assert set(codes.values()) == {"INVALID_ARGUMENT"}, codes
    not_staged = refused(lambda: client.publish_volume("v5", "", target, RW, False, {}, {}, {}))
    assert not_staged.code == "FAILED_PRECONDITION"
    block = refused(
        lambda: client.stage_volume("v5", staging, VolumeAccess(block=True), {}, {}, {})
    )
    assert block.code == "FAILED_PRECONDITION"
    assert node.mounts() == []


def test_volume_stats_and_condition(node: Node) -> None:
    client = node.csi(node.driver())
    staging, target = node.staging("v6"), node.target("pod-6")
    client.stage_volume("v6", str(staging), RW, {}, {}, {})
    client.publish_volume("v6", str(staging), str(target), RW, False, {}, {}, {})
    stats = client.volume_stats("v6", str(target))
    assert stats.capacity_bytes > 0 and stats.inodes > 0
    assert stats.used_bytes + stats.available_bytes <= stats.capacity_bytes
    assert not stats.abnormal

    (node.base / "data" / "v6.abnormal").write_text("disk is failing\n")
    assert client.volume_stats("v6", str(target)).message == "disk is failing"
    assert client.volume_stats("v6", str(target)).abnormal
    gone = refused(lambda: client.volume_stats("v6", str(node.target("no-such-pod"))))
    assert gone.code == "NOT_FOUND"


# --- crashes and the record ----------------------------------------------------------------


def test_killed_and_restarted_the_driver_carries_on(node: Node) -> None:
    driver = node.driver()
    client = node.csi(driver)
    staging, target = node.staging("v7"), node.target("pod-7")
    client.stage_volume("v7", str(staging), RW, {}, {}, {})
    client.publish_volume("v7", str(staging), str(target), RW, False, {}, {}, {})

    driver.kill()
    assert driver.config.registration_socket.exists()  # left behind, as a crash leaves it
    assert refused(client.node_capabilities).code == "UNAVAILABLE"
    driver.restart()
    assert node.registration(driver).get_info().name == NAME
    reconnected(client)  # the same client: its channel comes back within a second
    client.publish_volume("v7", str(staging), str(target), RW, False, {}, {}, {})  # idempotent
    assert node.mounts() == [staging, target]
    client.unpublish_volume("v7", str(target))
    client.unstage_volume("v7", str(staging))
    assert node.mounts() == []
    methods = [call["method"] for call in driver.calls() if call["method"].endswith("Volume")]
    assert methods == [
        "NodeStageVolume",
        "NodePublishVolume",
        "NodePublishVolume",
        "NodeUnpublishVolume",
        "NodeUnstageVolume",
    ]


def test_calls_are_recorded_without_secret_values(node: Node) -> None:
    driver = node.driver()
    client = node.csi(driver)
    staging, target = node.staging("v8"), node.target("pod-8")
    access = VolumeAccess("xfs", ("noatime",), "SINGLE_NODE_READER_ONLY")
    client.stage_volume("v8", str(staging), access, {"dev": "/dev/x"}, {"k": "v"}, {"pw": "s3cr3t"})
    client.publish_volume("v8", str(staging), str(target), access, True, {}, {"k": "v"}, {})
    stage = driver.wait_for_call("NodeStageVolume")
    assert stage == {
        "method": "NodeStageVolume",
        "volume_id": "v8",
        "staging_path": str(staging),
        "publish_context": {"dev": "/dev/x"},
        "volume_context": {"k": "v"},
        "secret_keys": ["pw"],
        "fs_type": "xfs",
        "mount_flags": ["noatime"],
        "mount_group": "",
        "access_mode": "SINGLE_NODE_READER_ONLY",
        "block": False,
        "outcome": "OK",
        "detail": "",
    }
    publish = driver.wait_for_call("NodePublishVolume")
    assert (publish["target_path"], publish["readonly"]) == (str(target), True)
    assert "s3cr3t" not in driver.config.calls.read_text()
    refused(lambda: client.unstage_volume("", str(staging)))
    failed = driver.wait_for_call("NodeUnstageVolume")
    assert (failed["outcome"], failed["detail"]) == (
        "INVALID_ARGUMENT",
        "Volume ID missing in request",
    )
