"""Resources and QoS on the real containerd (cgroup v1, cgroupfs driver): the QoS class in
the status, the limits a container sees in its own cgroup, the pod cgroups on the host
under their QoS level with the pod-level values, and their removal with the pod."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest
from pkletd.supervisor.pods.cgroups.podcgroups import CgroupTree
from pkletd.supervisor.pods.cgroups.resources import CgroupValues

from tests.harness.containerd import PrivateContainerd
from tests.harness.node import Pkletd, api_pod, exec_in, pod_manifest, wait_for
from tests.supervisor.pods.pod_helpers import container_ids, container_status

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(
        Path("/sys/fs/cgroup/cgroup.controllers").exists(), reason="checks cgroup v1 files"
    ),
]

CGROUP = Path("/sys/fs/cgroup")
MI = 2**20
UNLIMITED = 2**62  # what a v1 memory cgroup without a limit reports is above this
GUARANTEED = {"limits": {"cpu": "200m", "memory": "64Mi"}}  # requests default to the limits
# Compared as quantities: 0.3 is 300m, 32Mi is 33554432.
GUARANTEED_TOO = {
    "requests": {"cpu": "0.3", "memory": "32Mi"},
    "limits": {"cpu": "300m", "memory": "33554432"},
}
BURSTABLE = {
    "requests": {"cpu": "100m", "memory": "32Mi"},
    "limits": {"cpu": "500m", "memory": "64Mi"},
}
BURSTABLE_CPU_ONLY = {"requests": {"cpu": "50m"}}


def with_resources(name: str, *per_container: dict[str, Any] | None) -> dict[str, Any]:
    manifest = pod_manifest(name, containers=len(per_container))
    for container, resources in zip(manifest["spec"]["containers"], per_container, strict=True):
        if resources is not None:
            container["resources"] = resources
    return manifest


def inside(agent: Pkletd, container_id: str) -> dict[str, int]:
    """What the container sees of its own cgroups (runc mounts them at /sys/fs/cgroup)."""
    files = {
        "memory": "/sys/fs/cgroup/memory/memory.limit_in_bytes",
        "quota": "/sys/fs/cgroup/cpu/cpu.cfs_quota_us",
        "period": "/sys/fs/cgroup/cpu/cpu.cfs_period_us",
        "shares": "/sys/fs/cgroup/cpu/cpu.shares",
        "oom": "/proc/1/oom_score_adj",
    }
    return {key: int(exec_in(agent, container_id, "cat", path)) for key, path in files.items()}


def on_host(parent: str, uid: str) -> dict[str, int]:
    """The pod cgroup's values on the host; KeyError-free only if it is where expected."""
    cpu = CGROUP / "cpu" / parent / f"pod{uid}"
    return {
        "shares": int((cpu / "cpu.shares").read_text()),
        "quota": int((cpu / "cpu.cfs_quota_us").read_text()),
        "memory": int(
            (CGROUP / "memory" / parent / f"pod{uid}" / "memory.limit_in_bytes").read_text()
        ),
    }


def pod_dirs(uid: str) -> list[Path]:
    """The pod's cgroup directories, in any hierarchy and under any QoS level (looked up
    where they can be, not walked: other pods' cgroups come and go meanwhile)."""
    levels = ("", "burstable/", "besteffort/")
    found = (c / "kubepods" / f"{level}pod{uid}" for c in CGROUP.iterdir() for level in levels)
    return sorted(d for d in found if d.is_dir())


def uid_of(agent: Pkletd, name: str) -> str:
    # From the supervisor itself: /pods is the http worker's copy and may lag a moment.
    found = agent.pod(name)
    assert found is not None
    return str(found["uid"])


def memory_capacity() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no MemTotal")


def test_qos_classes_limits_and_pod_cgroups(pkletd: Pkletd, containerd: PrivateContainerd) -> None:
    pkletd.start()
    pkletd.put("guaranteed", with_resources("guaranteed", GUARANTEED, GUARANTEED_TOO))
    pkletd.put("burstable", with_resources("burstable", BURSTABLE, BURSTABLE_CPU_ONLY))
    pkletd.put("besteffort", with_resources("besteffort", None))
    for name in ("guaranteed", "burstable", "besteffort"):
        pkletd.wait_running(name)
    uids = {name: uid_of(pkletd, name) for name in ("guaranteed", "burstable", "besteffort")}
    classes = {name: (api_pod(pkletd, name) or {})["status"]["qosClass"] for name in uids}
    assert classes == {
        "guaranteed": "Guaranteed",
        "burstable": "Burstable",
        "besteffort": "BestEffort",
    }

    # Guaranteed: -997, but containerd (restrict_oom_score_adj) keeps its own score as a floor.
    pid = containerd.pid()
    assert pid is not None
    floor = max(-997, int(Path(f"/proc/{pid}/oom_score_adj").read_text()))
    ids = container_ids(pkletd, "guaranteed")
    assert inside(pkletd, ids["c0"]) == {
        "memory": 64 * MI, "quota": 20000, "period": 100000, "shares": 204, "oom": floor,
    }  # fmt: skip
    assert inside(pkletd, ids["c1"]) == {
        "memory": 32 * MI, "quota": 30000, "period": 100000, "shares": 307, "oom": floor,
    }  # fmt: skip
    assert on_host("kubepods", uids["guaranteed"]) == {
        "shares": 512, "quota": 50000, "memory": 96 * MI,
    }  # fmt: skip

    ids = container_ids(pkletd, "burstable")
    oom = 1000 - (1000 * 32 * MI) // memory_capacity()
    assert inside(pkletd, ids["c0"]) == {
        "memory": 64 * MI, "quota": 50000, "period": 100000, "shares": 102, "oom": oom,
    }  # fmt: skip
    plain = inside(pkletd, ids["c1"])
    assert plain["memory"] > UNLIMITED
    assert (plain["quota"], plain["shares"], plain["oom"]) == (-1, 51, 999)
    host = on_host("kubepods/burstable", uids["burstable"])
    # c1 has no limits: the pod gets shares from the summed requests and no quota or limit.
    assert (host["shares"], host["quota"]) == (153, -1)
    assert host["memory"] > UNLIMITED

    ids = container_ids(pkletd, "besteffort")
    best = inside(pkletd, ids["c0"])
    assert best["memory"] > UNLIMITED
    assert (best["quota"], best["shares"], best["oom"]) == (-1, 2, 1000)
    host = on_host("kubepods/besteffort", uids["besteffort"])
    assert (host["shares"], host["quota"]) == (2, -1)
    assert host["memory"] > UNLIMITED
    assert int((CGROUP / "cpu/kubepods/besteffort/cpu.shares").read_text()) == 2

    # Each pod's cgroup is at one place only, and the sandbox is in it too.
    for name, uid in uids.items():
        parent = {"guaranteed": "kubepods", "burstable": "kubepods/burstable"}.get(
            name, "kubepods/besteffort"
        )
        assert {p.relative_to(CGROUP).parts[1:] for p in pod_dirs(uid)} == {
            (*parent.split("/"), f"pod{uid}")
        }
        assert len(list((CGROUP / "cpu" / parent / f"pod{uid}").glob("*/cgroup.procs"))) == 1 + (
            2 if name != "besteffort" else 1
        )  # the sandbox and each container

    for name in uids:
        pkletd.remove(name)
    wait_for("the pod cgroups removed", lambda: not any(pod_dirs(uid) for uid in uids.values()))


def test_a_container_over_its_memory_limit_is_oom_killed(pkletd: Pkletd) -> None:
    pkletd.start()
    hog = pod_manifest(
        "hog",
        "x=$(head -c 100000000 /dev/zero | tr '\\0' a); echo survived",
        restart_policy="Never",
    )
    hog["spec"]["containers"][0]["resources"] = {"limits": {"memory": "16Mi"}}
    pkletd.put("hog", hog)

    def terminated() -> dict[str, Any] | None:
        state = (container_status(pkletd, "hog", "c0") or {}).get("state", {})
        return state.get("terminated")

    state = wait_for("hog terminated", terminated, timeout=60)
    assert state["reason"] == "OOMKilled"
    assert state["exitCode"] == 137
    found = api_pod(pkletd, "hog")
    assert found is not None
    assert found["status"]["phase"] == "Failed"
    assert found["status"]["qosClass"] == "Burstable"


def test_a_pod_removed_while_pkletd_was_down_loses_its_cgroup(pkletd: Pkletd) -> None:
    pkletd.start()
    pkletd.put("orphan", with_resources("orphan", {"requests": {"cpu": "10m"}}))
    pkletd.wait_running("orphan")
    uid = uid_of(pkletd, "orphan")
    assert pod_dirs(uid)
    pkletd.stop()  # pods keep running, as they do when a kubelet stops
    pkletd.remove("orphan")
    pkletd.start()
    wait_for("the orphan's pod cgroup removed", lambda: not pod_dirs(uid))


def test_a_pod_cgroup_left_without_its_pod_is_removed(pkletd: Pkletd) -> None:
    """A pod cgroup with nothing in it, no pod and no sandbox (an agent that died between
    making it and the sandbox) goes at housekeeping, as with the kubelet's
    cleanupOrphanedPodCgroups; one with a cgroup below it (a sandbox of a runtime
    pkletd does not see) stays, and nothing in it is killed."""
    empty, used = uuid.uuid4().hex, uuid.uuid4().hex
    tree = CgroupTree()
    tree.create(f"/kubepods/besteffort/pod{empty}", CgroupValues())
    tree.create(f"/kubepods/besteffort/pod{used}/sandbox", CgroupValues())
    try:
        pkletd.start()
        wait_for("the empty pod cgroup removed", lambda: not pod_dirs(empty), timeout=60)
        log = pkletd.log()
        assert f"orphaned pod cgroup found uid={empty}" in log
        assert pod_dirs(used) and used not in log
    finally:
        tree.destroy(f"/kubepods/besteffort/pod{used}")
