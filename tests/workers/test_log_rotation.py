"""Container log rotation on the real containerd."""

from __future__ import annotations

import gzip
import re
from pathlib import Path

import pytest

from tests.harness.node import NODE, Pkletd, pod_manifest, wait_for

pytestmark = pytest.mark.slow

MAX_FILES = 3
ROTATED = re.compile(r"0\.log\.(\d{8}-\d{6})(\.gz)?")  # the kubelet's "20060102-150405"
CRI_LINE = re.compile(r"\S+ (stdout|stderr) [FP] .*")
# About 1 MB a second of numbered lines: over 1Mi between two checks 3 s apart.
WRITER = (
    "trap 'exit 0' TERM; n=0; while true; do n=$((n+1)); "
    'yes "line-$n-$(head -c 100 /dev/zero | tr "\\0" x)" | head -n 2000; sleep 0.2; done'
)


def in_use(directory: Path) -> list[str]:
    """The container's log files as the kubelet counts them (GetAllLogs): a temporary
    file, or an uncompressed file whose .gz already exists, is a rotation in flight."""
    names = {p.name for p in directory.iterdir()}
    return sorted(
        n
        for n in names
        if n.startswith("0.log")
        and not n.endswith(".tmp")
        and not (not n.endswith(".gz") and n + ".gz" in names)
    )


def highest_line(text: str) -> int:
    found = [int(m) for m in re.findall(r"line-(\d+)-", text)]
    return max(found, default=0)


def test_container_logs_are_rotated_like_the_kubelet(pkletd: Pkletd) -> None:
    pkletd.write_config(
        containerLogMaxSize="1Mi",
        containerLogMaxFiles=MAX_FILES,
        containerLogMonitorInterval="3s",
    )
    pkletd.start()
    pkletd.put("chatty", pod_manifest("chatty", WRITER))
    pod = pkletd.wait_running("chatty")
    container_id = pod["containers"][0]["container_id"]
    logs = pkletd.pod_logs / f"default_chatty-{NODE}_{pod['uid']}" / "c0"

    seen: set[str] = set()

    def rotated_three_times() -> bool:
        files = in_use(logs)
        assert len(files) <= MAX_FILES, files  # never more than containerLogMaxFiles
        rotated = [f for f in files if f != "0.log"]
        for name in rotated:
            assert ROTATED.fullmatch(name), name
        assert len([f for f in rotated if not f.endswith(".gz")]) <= 1  # only the latest
        seen.update(ROTATED.fullmatch(f).group(1) for f in rotated)  # type: ignore[union-attr]
        return len(seen) >= 3 and any(f.endswith(".gz") for f in rotated)

    wait_for("three rotations", rotated_three_times, timeout=60, every=0.02)
    # between a rename and the runtime's reopen there is no 0.log, as under the kubelet
    files = wait_for("0.log reopened", lambda: "0.log" in (f := in_use(logs)) and f)
    assert len(files) == MAX_FILES
    assert files[0] == "0.log"
    compressed, latest = files[1], files[2]
    assert compressed.endswith(".gz") and not latest.endswith(".gz")
    assert ROTATED.fullmatch(compressed).group(1) < ROTATED.fullmatch(latest).group(1)  # type: ignore[union-attr]

    # The rotated files hold the CRI log lines, compressed or not.
    with gzip.open(logs / compressed, "rt") as packed:
        old_lines = packed.read().splitlines()
    assert old_lines and all(CRI_LINE.fullmatch(line) for line in old_lines)
    latest_text = (logs / latest).read_text()
    assert all(CRI_LINE.fullmatch(line) for line in latest_text.splitlines())
    assert highest_line("\n".join(old_lines)) <= highest_line(latest_text)

    # After ReopenContainerLog the same container goes on writing to a fresh 0.log.
    wait_for(
        "newer lines in the live log",
        lambda: highest_line((logs / "0.log").read_text()) > highest_line(latest_text),
    )
    now = pkletd.pod("chatty")
    assert now is not None and now["containers"][0]["container_id"] == container_id
    assert now["containers"][0]["restart_count"] == 0
    assert "rotated container log" in pkletd.log("log-rotator")
