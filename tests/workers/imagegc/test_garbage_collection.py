"""Image and container garbage collection on the real containerd (issue 12): what goes,
what stays, and a SIGKILLed image-gc worker that leaves nothing half done."""

from __future__ import annotations

import http.client
import json
import os
import re
import signal
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.harness.containerd import (
    PrivateContainerd,
    cri_has_images,
    list_containers,
    list_pod_sandboxes,
)
from tests.harness.images import (
    ALL_IMAGES,
    PAUSE_IMAGE,
    import_busybox_copy,
    import_images,
    remove_image,
)
from tests.harness.node import BUSYBOX, NODE, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

UNUSED = ("pkletd.local/gc-unused-a:1", "pkletd.local/gc-unused-b:1")
USED = "pkletd.local/gc-used:1"
# Each instance says who it is, then fails: CrashLoopBackOff restarts it at once, then
# after 10 s, then after 20 s.
CRASHER = "cat /proc/sys/kernel/random/uuid; exit 3"
KILLS = 4  # a fifth quick death in a row would be reported as flapping
OPEN_API = {"authentication": {"anonymous": {"enabled": True}, "webhook": {"enabled": False}},
            "authorization": {"mode": "AlwaysAllow"}}  # fmt: skip


@pytest.fixture
def gc_images(containerd: PrivateContainerd) -> Iterator[None]:
    """Three images of their own; afterwards, the harness's images are all there again."""
    for name in (*UNUSED, USED):
        import_busybox_copy(containerd.ctr_address, name, containerd.image_cache_dir)
    yield
    for name in (*UNUSED, USED):
        remove_image(containerd.ctr_address, name)
    if not cri_has_images(containerd.address, ALL_IMAGES):
        import_images(containerd.ctr_address, containerd.image_cache_dir)


def present(pkletd: Pkletd, image: str) -> bool:
    return cri_has_images(pkletd.endpoint, (image,))


def node_events(pkletd: Pkletd, reason: str) -> list[dict[str, Any]]:
    return [e for e in pkletd.events() if e["reason"] == reason and e["object"] == NODE]


def image_pod(name: str, image: str) -> dict[str, Any]:
    manifest = pod_manifest(name)
    manifest["spec"]["containers"][0].update(image=image, imagePullPolicy="Never")
    return manifest


def test_image_gc_removes_exactly_the_unused_images_old_enough(
    pkletd: Pkletd, gc_images: None
) -> None:
    # Thresholds this machine crosses: 1% used means GC, down to 0% (all it can free).
    pkletd.write_config(
        imageGCHighThresholdPercent=1, imageGCLowThresholdPercent=0, imageMinimumGCAge="1ms"
    )
    pkletd.extra_args = ["--image-gc-period", "1s"]
    pkletd.put("user", image_pod("user", USED))
    pkletd.put("keeper", image_pod("keeper", BUSYBOX))
    pkletd.start()
    pkletd.wait_running("user")
    pkletd.wait_running("keeper")

    wait_for("the unused images removed", lambda: not any(present(pkletd, i) for i in UNUSED))
    for kept in (USED, BUSYBOX, PAUSE_IMAGE):  # in use, in use, the sandbox image
        assert present(pkletd, kept), kept
    log = pkletd.log()
    assert len(re.findall(r"removing image to free bytes image=sha256:\w+", log)) == 2

    # It could not free down to 0%: the kubelet's warning each time, and ImageGCFailed from
    # the second failure in a row on.
    failed = wait_for("ImageGCFailed", lambda: node_events(pkletd, "ImageGCFailed"))
    assert failed[0]["type"] == "Warning"
    short = node_events(pkletd, "FreeDiskSpaceFailed")[0]["message"]
    assert re.fullmatch(
        r"Failed to garbage collect required amount of images\. Attempted to free \d+ bytes, "
        r"but only found \d+ bytes eligible to free\.",
        short,
    )
    gc = pkletd.status()["gc"]
    assert (gc["image_fs"]["high_threshold_percent"], gc["image_fs"]["low_threshold_percent"]) == (
        1,
        0,
    )
    assert 0 < gc["image_fs"]["usage_percent"] <= 100
    table = pkletd.cli("status").stdout
    assert re.search(
        r"^image fs: \d+% used of [\d.]+\wi \(image GC at 1%, down to 0%\)$", table, re.M
    )
    gc_line = r"^image GC \d+s ago: \d+ images removed, [\d.]+(B|Ki|Mi) freed; error: Failed to"
    assert re.search(gc_line, table, re.M)
    assert all(p["phase"] == "Running" for p in pkletd.status()["pods"])


def crasher_instances(pkletd: Pkletd, uid: str) -> list[int]:
    """The attempts of the crasher's container the runtime still has."""
    found = [
        c.metadata.attempt
        for c in list_containers(pkletd.endpoint)
        if c.labels.get("io.kubernetes.pod.uid") == uid
    ]
    return sorted(found)


def restarted(pkletd: Pkletd) -> dict[str, Any] | None:
    pod = pkletd.pod("crasher")
    return pod if pod and pod["containers"][0]["restart_count"] >= 1 else None


def waiting_after(pkletd: Pkletd, restarts: int) -> dict[str, Any] | None:
    """The crasher waiting out its back-off after ``restarts`` restarts."""
    pod = pkletd.pod("crasher")
    container = pod["containers"][0] if pod else None
    if container and (container["state"], container["restart_count"]) == (
        "CrashLoopBackOff",
        restarts,
    ):
        return pod
    return None


def previous_log(pkletd: Pkletd) -> str:
    """``/containerLogs?previous=true`` of the crasher, from the kubelet API."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    connection = http.client.HTTPSConnection("127.0.0.1", pkletd.port, timeout=10, context=context)
    try:
        connection.request("GET", f"/containerLogs/default/crasher-{NODE}/c0?previous=true")
        reply = connection.getresponse()
        assert reply.status == 200
        return reply.read().decode()
    finally:
        connection.close()


def logged_line(path: Path) -> str:
    """The message of a CRI log file's one line."""
    return path.read_text().split(" ", 3)[3]


def test_container_gc_keeps_the_dead_containers_the_policy_and_the_status_want(
    pkletd: Pkletd,
) -> None:
    pkletd.write_config(**OPEN_API)
    pkletd.extra_args = [
        "--container-gc-period=1s",
        "--maximum-dead-containers-per-container=2",
    ]
    stray = pkletd.pod_logs / "default_ghost-testnode_0123456789abcdef0123456789abcdef"
    (stray / "c0").mkdir(parents=True)
    (stray / "c0" / "0.log").write_text("left by a pod long gone\n")
    other = pkletd.pod_logs / "not-a-pod-dir"
    other.mkdir()
    pkletd.put("crasher", pod_manifest("crasher", CRASHER))
    pkletd.put("goner", pod_manifest("goner"))
    pkletd.start()
    goner = pkletd.wait_running("goner")
    pod = wait_for("three instances, the last dead", lambda: waiting_after(pkletd, 2), timeout=120)
    uid = pod["uid"]
    logs = pkletd.pod_logs / f"default_crasher-{NODE}_{uid}" / "c0"

    # Three dead instances, two kept: the newest two, each with its log.
    wait_for("the oldest instance removed", lambda: crasher_instances(pkletd, uid) == [1, 2])
    assert sorted(p.name for p in logs.iterdir()) == ["1.log", "2.log"]
    assert previous_log(pkletd) == logged_line(logs / "2.log")  # lastState: the newest
    wait_for("the stray pod log dir removed", lambda: not stray.exists())
    assert other.is_dir()  # not a pod's log dir: never touched

    goner_dir = pkletd.pod_logs / f"default_goner-{NODE}_{goner['uid']}"
    assert goner_dir.is_dir()
    pkletd.remove("goner")
    wait_for(
        "goner's sandbox removed",
        lambda: (
            not [s for s in list_pod_sandboxes(pkletd.endpoint) if s.metadata.uid == goner["uid"]]
        ),
    )
    wait_for("goner's log dir removed", lambda: not goner_dir.exists())
    assert f"removed pod log dir path={goner_dir}" in pkletd.log()
    status = json.loads(pkletd.cli("status", "--json").stdout)["gc"]["container_gc"]
    assert status["error"] == "" and status["at"] > 0


def test_a_sigkilled_gc_worker_leaves_nothing_half_done(pkletd: Pkletd) -> None:
    # Every dead container is a candidate: the parent keeps the one the status shows.
    pkletd.write_config(**OPEN_API)
    pkletd.extra_args = [
        "--container-gc-period=200ms",
        "--maximum-dead-containers-per-container=0",
    ]
    pkletd.put("crasher", pod_manifest("crasher", CRASHER))
    pkletd.put("steady", pod_manifest("steady"))
    pkletd.start()
    steady = pkletd.wait_running("steady")
    first = wait_for(
        "two instances",
        lambda: (p := pkletd.pod("crasher")) and p["containers"][0]["restart_count"] >= 1 and p,
    )
    uid = first["uid"]

    # The first kill lands while the parent removes what the worker just proposed; the
    # others at the next collection, wherever the worker is then.
    wait_for("a proposal", lambda: "garbage found collection=containers" in pkletd.log("image-gc"))
    kill_gc_worker(pkletd)
    for _ in range(KILLS - 1):
        after_a_round(pkletd)
        kill_gc_worker(pkletd)

    pod = wait_for(
        "the crasher waiting after its third instance", lambda: waiting_after(pkletd, 2), timeout=60
    )
    logs = pkletd.pod_logs / f"default_crasher-{NODE}_{uid}" / "c0"
    wait_for("only the instance the status shows", lambda: crasher_instances(pkletd, uid) == [2])
    assert sorted(p.name for p in logs.iterdir()) == ["2.log"]
    assert previous_log(pkletd) == logged_line(logs / "2.log")
    worker = pkletd.workers()["image-gc"]
    assert worker["restarts"] == KILLS and "SIGKILL" in worker["last_exit"]
    now = pkletd.pod("steady")
    assert (
        now is not None
        and now["containers"][0]["container_id"] == steady["containers"][0]["container_id"]
    )
    assert pod["containers"][0]["restart_count"] == 2  # counted on: the newest was never removed
    assert not re.search(r" ERROR .* pkletd\.supervisor\.pods\.|Traceback", pkletd.log())


def rounds(pkletd: Pkletd) -> float:
    """When the parent last finished a container collection."""
    last = pkletd.status()["gc"]["container_gc"]
    return float(last["at"]) if last else 0.0


def after_a_round(pkletd: Pkletd) -> None:
    done = rounds(pkletd)
    wait_for("a collection carried out", lambda: rounds(pkletd) > done)


def running_again(pkletd: Pkletd, old_pid: int) -> bool:
    worker = pkletd.workers()["image-gc"]
    return worker["state"] == "running" and worker["pid"] != old_pid


def kill_gc_worker(pkletd: Pkletd) -> None:
    pid = pkletd.workers()["image-gc"]["pid"]
    os.kill(pid, signal.SIGKILL)
    wait_for("image-gc back", lambda: running_again(pkletd, pid))
