"""Pod and QoS cgroups written into a temporary directory laid out as a cgroupfs."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import Pod, parse_pod
from pkletd.supervisor.pods.cgroups import podcgroups
from pkletd.supervisor.pods.cgroups.podcgroups import CgroupTree, PodCgroups

MI = 2**20
GI = 2**30
V1_HIERARCHIES = ("cpu", "cpuacct", "cpuset", "memory", "pids", "devices", "freezer")


def pod(uid: str, *containers: Any) -> Pod:
    return parse_pod(
        {
            "metadata": {"name": f"p-{uid}", "uid": uid},
            "spec": {
                "containers": [
                    {"name": f"c{i}", "image": "busybox", "resources": r}
                    for i, r in enumerate(containers)
                ]
            },
        }
    )


GUARANTEED = {"limits": {"cpu": "500m", "memory": "64Mi"}}
BURSTABLE = {"requests": {"cpu": "250m"}}
BEST_EFFORT: dict[str, Any] = {}


def fake_rmdir(path: Path) -> None:
    """cgroupfs removes a cgroup with its interface files; a plain directory needs them gone."""
    for entry in path.iterdir():
        if entry.is_file():
            entry.unlink()
    os.rmdir(path)


class Killed(list[int]):
    def __call__(self, pid: int) -> None:
        self.append(pid)


@pytest.fixture
def v1(tmp_path: Path) -> Path:
    mount = tmp_path / "v1"
    for name in V1_HIERARCHIES:
        (mount / name).mkdir(parents=True)
    (mount / "cpuset" / "cpuset.cpus").write_text("0-3\n")
    (mount / "cpuset" / "cpuset.mems").write_text("0\n")
    return mount


def manager(mount: Path, v2: bool = False, killed: Killed | None = None) -> PodCgroups:
    tree = CgroupTree(
        mount, v2=v2, kill=killed if killed is not None else Killed(), rmdir=fake_rmdir
    )
    return PodCgroups(tree, node_milli_cpu=4000, node_memory=8 * GI, pid_max=4194304)


def read(path: Path) -> str:
    return path.read_text().strip()


def test_names() -> None:
    assert podcgroups.pod_cgroup_name(pod("g", GUARANTEED)) == "/kubepods/podg"
    assert podcgroups.pod_cgroup_name(pod("b", BURSTABLE)) == "/kubepods/burstable/podb"
    assert podcgroups.pod_cgroup_name(pod("e", BEST_EFFORT)) == "/kubepods/besteffort/pode"


def test_v1_start_makes_the_node_and_qos_levels(v1: Path) -> None:
    manager(v1).start()
    assert read(v1 / "cpu/kubepods/cpu.shares") == "4096"
    assert read(v1 / "memory/kubepods/memory.limit_in_bytes") == str(8 * GI)
    assert read(v1 / "pids/kubepods/pids.max") == "4194304"
    assert read(v1 / "cpu/kubepods/burstable/cpu.shares") == "2"
    assert read(v1 / "cpu/kubepods/besteffort/cpu.shares") == "2"
    assert not (v1 / "cpu/kubepods/cpu.cfs_quota_us").exists()  # the node level has no quota
    for level in ("kubepods", "kubepods/burstable", "kubepods/besteffort"):
        assert read(v1 / "cpuset" / level / "cpuset.cpus") == "0-3"  # copied down, as runc needs
        assert read(v1 / "cpuset" / level / "cpuset.mems") == "0"
        assert (v1 / "cpuacct" / level).is_dir()
    assert not (v1 / "devices/kubepods").exists()  # only the controllers pkletd sets


def test_v1_pod_cgroups_by_class(v1: Path) -> None:
    pods = manager(v1).start()
    assert pods.ensure(pod("g", GUARANTEED, GUARANTEED)) is None
    g = v1 / "cpu/kubepods/podg"
    assert (read(g / "cpu.shares"), read(g / "cpu.cfs_period_us")) == ("1024", "100000")
    assert read(g / "cpu.cfs_quota_us") == "100000"
    assert read(v1 / "memory/kubepods/podg/memory.limit_in_bytes") == str(128 * MI)
    assert not (v1 / "pids/kubepods/podg/pids.max").exists()  # podPidsLimit unset

    assert pods.ensure(pod("b", BURSTABLE)) is None
    b = v1 / "cpu/kubepods/burstable/podb"
    assert read(b / "cpu.shares") == "256"
    assert not (b / "cpu.cfs_quota_us").exists()
    assert not (v1 / "memory/kubepods/burstable/podb/memory.limit_in_bytes").exists()
    assert read(v1 / "cpu/kubepods/burstable/cpu.shares") == "256"  # the burstable pods' sum

    assert pods.ensure(pod("e", BEST_EFFORT)) is None
    assert read(v1 / "cpu/kubepods/besteffort/pode/cpu.shares") == "2"
    for name in ("cpu", "cpuacct", "cpuset", "memory", "pids"):
        assert (v1 / name / "kubepods/besteffort/pode").is_dir()
    assert read(v1 / "cpuset/kubepods/besteffort/pode/cpuset.cpus") == "0-3"


def test_v1_pods_pids_limit(v1: Path) -> None:
    tree = CgroupTree(v1, v2=False, kill=Killed(), rmdir=fake_rmdir)
    pods = PodCgroups(tree, 1000, GI, pods_pids_limit=256).start()
    pods.ensure(pod("e", BEST_EFFORT))
    assert read(v1 / "pids/kubepods/besteffort/pode/pids.max") == "256"


def test_an_existing_pod_cgroup_is_left_as_it_is(v1: Path) -> None:
    pods = manager(v1).start()
    pods.ensure(pod("g", GUARANTEED))
    (v1 / "cpu/kubepods/podg/cpu.shares").write_text("777")
    assert pods.ensure(pod("g", GUARANTEED)) is None
    assert read(v1 / "cpu/kubepods/podg/cpu.shares") == "777"


def test_remove_kills_leftovers_and_removes_every_hierarchy(v1: Path) -> None:
    killed = Killed()
    pods = manager(v1, killed=killed).start()
    pods.ensure(pod("b", BURSTABLE))
    pods.ensure(pod("b2", {"requests": {"cpu": "1"}}))
    assert read(v1 / "cpu/kubepods/burstable/cpu.shares") == "1280"
    # What the runtime leaves: the pod's directory in other hierarchies, a container's below.
    (v1 / "devices/kubepods/burstable/podb/ctr").mkdir(parents=True)
    (v1 / "cpu/kubepods/burstable/podb/ctr").mkdir()
    (v1 / "cpu/kubepods/burstable/podb/ctr/cgroup.procs").write_text("4242\n")
    pods.remove("b")
    assert killed == [4242]
    for name in V1_HIERARCHIES:
        assert not (v1 / name / "kubepods/burstable/podb").exists()
        assert (v1 / name / "kubepods/burstable/podb2").exists() == (
            name in podcgroups.V1_CONTROLLERS
        )
    assert read(v1 / "cpu/kubepods/burstable/cpu.shares") == "1024"  # b's share is gone
    pods.remove("b")  # gone already: nothing to do
    pods.remove("b2")
    assert read(v1 / "cpu/kubepods/burstable/cpu.shares") == "2"
    assert (v1 / "cpu/kubepods/burstable").is_dir()  # the QoS levels stay


def test_unused_pod_cgroups_and_removal_without_killing(v1: Path) -> None:
    killed = Killed()
    pods = manager(v1, killed=killed).start()
    for uid in ("empty", "ours", "used"):
        pods.ensure(pod(uid, BEST_EFFORT))
    (v1 / "cpu/kubepods/besteffort/podused/sandbox").mkdir()  # a runtime made it
    (v1 / "cpu/kubepods/besteffort/podused/sandbox/cgroup.procs").write_text("4242\n")
    (v1 / "cpu/kubepods/besteffort/not-a-pod").mkdir()
    assert pods.unused(skip=lambda uid: uid == "ours") == {"empty"}
    pods.remove("empty", kill=False)
    assert not pods.tree.any_exists("/kubepods/besteffort/podempty")
    pods.remove("used", kill=False)
    assert killed == []  # what runs there is left alone (cgroupfs refuses the rmdir: EBUSY)


def test_a_cgroup_that_cannot_be_made_is_the_reason(v1: Path) -> None:
    pods = manager(v1).start()
    (v1 / "cpu/kubepods/besteffort").rename(v1 / "cpu/kubepods/gone")
    (v1 / "cpu/kubepods/besteffort").write_text("not a directory")
    reason = pods.ensure(pod("e", BEST_EFFORT))
    assert reason is not None
    assert reason.startswith(
        "unable to ensure pod container exists: failed to create container for "
        "/kubepods/besteffort/pode: "
    )


def test_a_busy_cgroup_is_retried_then_reported(v1: Path, caplog: pytest.LogCaptureFixture) -> None:
    calls: list[Path] = []

    def busy(path: Path) -> None:
        calls.append(path)
        raise OSError(16, "Device or resource busy")

    tree = CgroupTree(v1, v2=False, kill=Killed(), rmdir=busy)
    pods = PodCgroups(tree, 1000, GI).start()
    pods.ensure(pod("e", BEST_EFFORT))
    pods.remove("e")  # logged, not raised: the pod is gone from the runtime either way
    assert len(calls) == podcgroups.REMOVE_ATTEMPTS
    assert "pod cgroup removal failed uid=e" in caplog.text


@pytest.fixture
def v2(tmp_path: Path) -> Path:
    mount = tmp_path / "v2"
    mount.mkdir()
    (mount / "cgroup.controllers").write_text("cpuset cpu io memory hugetlb pids rdma\n")
    (mount / "cgroup.subtree_control").write_text("\n")
    return mount


def test_v2_detection(v1: Path, v2: Path) -> None:
    assert CgroupTree(v2).v2
    assert not CgroupTree(v1).v2


def test_v2_values(v2: Path) -> None:
    pods = manager(v2, v2=True).start()
    # cgroupfs takes "+cpu" as a change; in a plain file it is what was written last.
    assert read(v2 / "cgroup.subtree_control") == "+cpu +cpuset +memory +pids"
    assert read(v2 / "kubepods/cpu.weight") == "157"  # 4096 shares
    assert read(v2 / "kubepods/memory.max") == str(8 * GI)
    assert read(v2 / "kubepods/pids.max") == "4194304"
    assert read(v2 / "kubepods/besteffort/cpu.weight") == "1"
    pods.ensure(pod("g", GUARANTEED))
    assert read(v2 / "kubepods/podg/cpu.weight") == "20"  # 512 shares
    assert read(v2 / "kubepods/podg/cpu.max") == "50000 100000"
    assert read(v2 / "kubepods/podg/memory.max") == str(64 * MI)
    pods.ensure(pod("b", BURSTABLE))
    assert read(v2 / "kubepods/burstable/podb/cpu.weight") == "10"
    assert not (v2 / "kubepods/burstable/podb/cpu.max").exists()
    assert not (v2 / "kubepods/burstable/podb/memory.max").exists()
    pods.remove("g")
    pods.remove("b")
    assert not (v2 / "kubepods/podg").exists()
    assert not (v2 / "kubepods/burstable/podb").exists()
