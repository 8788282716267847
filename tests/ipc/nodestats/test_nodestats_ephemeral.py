"""A pod's ``ephemeral-storage`` in /stats/summary, what its ephemeral-storage limit is
enforced against: as the kubelet's ``calcEphemeralStorage`` counts it, the writable
layers, the logs, the local ephemeral volumes (on disk), the pod's own log files and its
etc-hosts; not a memory-backed volume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pkletd.ipc.nodestats.summary import local_ephemeral_volumes

from tests.ipc.nodestats.nodestats_helpers import (
    CID,
    UID,
    FakeClock,
    FakeStatsRuntime,
    Node,
    api_pod,
    write,
)

VOLUMES = [
    {"name": "scratch", "emptyDir": {}},
    {"name": "cache", "emptyDir": {"medium": "Memory", "sizeLimit": "64Mi"}},
    {"name": "settings", "configMap": {"name": "app"}},
    {"name": "token", "secret": {"secretName": "app"}},
    {"name": "facts", "downwardAPI": {"items": []}},
    {"name": "repo", "gitRepo": {"repository": "https://example.com/r.git"}},
    {"name": "host", "hostPath": {"path": "/srv"}},
]


def test_local_ephemeral_volumes_are_the_kubelets() -> None:
    assert local_ephemeral_volumes({"volumes": VOLUMES}) == {"scratch", "settings", "repo"}
    assert local_ephemeral_volumes({}) == frozenset()


def ephemeral_of(tmp_path: Path, pod: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    node = Node(tmp_path).standard()
    volumes = node.root_dir / "pods" / UID / "volumes"
    write(volumes / "kubernetes.io~empty-dir" / "cache" / "data", "m" * 50_000)
    write(volumes / "kubernetes.io~secret" / "token" / "token", "s" * 20_000)
    write(volumes / "kubernetes.io~configmap" / "settings" / "app.conf", "c" * 30_000)
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    [stats] = node.provider(FakeClock(), runtime).summary([pod])["pods"]
    return stats["ephemeral-storage"]["usedBytes"], stats


def used(stats: dict[str, Any], *volumes: str) -> int:
    parts = [v["usedBytes"] for v in stats["volume"] if v["name"] in volumes]
    container = stats["containers"][0]
    return sum(parts) + container["rootfs"]["usedBytes"] + container["logs"]["usedBytes"]


def test_memory_backed_and_secret_volumes_are_left_out(tmp_path: Path) -> None:
    pod = api_pod()
    pod["spec"]["volumes"] = VOLUMES
    total, stats = ephemeral_of(tmp_path, pod)
    assert {v["name"] for v in stats["volume"]} == {"scratch", "cache", "token", "settings"}
    assert total == used(stats, "scratch", "settings")


def test_a_volume_the_spec_does_not_name_is_left_out(tmp_path: Path) -> None:
    pod = api_pod()
    pod["spec"]["volumes"] = []
    total, stats = ephemeral_of(tmp_path, pod)
    assert total == used(stats)


def test_the_pods_own_log_files_and_etc_hosts_count(tmp_path: Path) -> None:
    node = Node(tmp_path).standard()
    runtime = FakeStatsRuntime(str(node.images), {CID: 4096})
    provider = node.provider(FakeClock(), runtime)
    [before] = provider.summary([api_pod()])["pods"]
    pod_log = node.pod_logs / f"default_web_{UID}" / "app.log"  # beside the container dirs
    etc_hosts = node.root_dir / "pods" / UID / "etc-hosts"
    write(pod_log, "l" * 40_000)
    write(etc_hosts, "127.0.0.1\tlocalhost\n" * 500)
    [after] = provider.summary([api_pod()])["pods"]
    grown = after["ephemeral-storage"]["usedBytes"] - before["ephemeral-storage"]["usedBytes"]
    assert grown == (pod_log.stat().st_blocks + etc_hosts.stat().st_blocks) * 512
    assert after["ephemeral-storage"]["inodesUsed"] == before["ephemeral-storage"]["inodesUsed"] + 2
