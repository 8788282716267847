"""Container log rotation, on files in a temp dir (no containerd)."""

from __future__ import annotations

import gzip
import os
import stat
import time
from pathlib import Path

import pytest
from pkletd.ipc.clock import FakeClock
from pkletd.ipc.runtime.cri import ContainerID, CriError
from pkletd.supervisor.pods.fakeruntime import FakeRuntime
from pkletd.workers.logrotator import (
    RotatePolicy,
    rotate,
    rotate_if_full,
    split_unused,
)

T0 = time.mktime((2024, 3, 5, 14, 7, 9, 0, 0, -1))  # local time, as the kubelet names files


def runtime_for(log: Path) -> FakeRuntime:
    """A runtime whose container ``cid`` logs to ``log``."""
    runtime = FakeRuntime()
    runtime.log_paths[ContainerID("cid")] = str(log)
    return runtime


def reopened(runtime: FakeRuntime) -> list[str]:
    return [c.target for c in runtime.calls if c.method == "ReopenContainerLog"]


def write_log(path: Path, text: str) -> None:
    with path.open("a") as f:
        f.write(text)


def files(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


@pytest.fixture
def log(tmp_path: Path) -> Path:
    path = tmp_path / "0.log"
    write_log(path, "2024-03-05T14:07:00.000000000Z stdout F first\n")
    return path


def test_split_unused_follows_the_kubelet() -> None:
    logs = ["l.1.gz", "l.2", "l.2.gz", "l.3", "l.3.gz.tmp", "l.4.tmp"]
    assert split_unused(logs) == (["l.1.gz", "l.2.gz", "l.3"], ["l.2", "l.3.gz.tmp", "l.4.tmp"])


def test_rotate_renames_the_live_log_and_reopens_it(log: Path) -> None:
    runtime = runtime_for(log)
    rotated = rotate(runtime, "cid", str(log), RotatePolicy(1, 5), clock=FakeClock(wall=T0))
    assert rotated == f"{log}.20240305-140709"
    assert reopened(runtime) == ["cid"]
    assert files(log.parent) == ["0.log", "0.log.20240305-140709"]
    assert log.read_text() == ""  # the runtime writes to a fresh file
    assert "first" in Path(rotated).read_text()  # the latest rotated file stays as it is


def test_older_rotated_files_are_compressed_and_the_excess_removed(log: Path) -> None:
    runtime = runtime_for(log)
    policy = RotatePolicy(max_size=1, max_files=3)
    for i in range(4):
        write_log(log, f"line {i}\n")
        rotate(runtime, "cid", str(log), policy, clock=FakeClock(wall=T0 + 60 * i))
        assert len(os.listdir(log.parent)) <= policy.max_files
    # Live file, the newest rotated file as it was, MaxFiles-2 older ones compressed.
    assert files(log.parent) == ["0.log", "0.log.20240305-140909.gz", "0.log.20240305-141009"]
    with gzip.open(log.parent / "0.log.20240305-140909.gz", "rt") as packed:
        assert packed.read() == "line 2\n"
    assert (log.parent / "0.log.20240305-141009").read_text() == "line 3\n"


def test_max_files_two_keeps_only_the_latest_rotated_file(log: Path) -> None:
    runtime = runtime_for(log)
    for i in range(3):
        rotate(runtime, "cid", str(log), RotatePolicy(1, 2), clock=FakeClock(wall=T0 + i))
    assert files(log.parent) == ["0.log", "0.log.20240305-140711"]


def test_leftovers_of_an_interrupted_rotation_are_cleaned_up(log: Path) -> None:
    d = log.parent
    (d / "0.log.20240101-000000").write_text("old")
    (d / "0.log.20240101-000000.gz").write_bytes(gzip.compress(b"old"))  # compressed, not removed
    (d / "0.log.20240102-000000.gz.tmp").write_text("half")  # a compression cut short
    (d / "1.log.20240101-000000").write_text("another container's")
    rotate(runtime_for(log), "cid", str(log), RotatePolicy(1, 5), clock=FakeClock(wall=T0))
    assert files(d) == [
        "0.log",
        "0.log.20240101-000000.gz",
        "0.log.20240305-140709",
        "1.log.20240101-000000",
    ]


def test_compression_keeps_the_file_mode(log: Path) -> None:
    runtime = runtime_for(log)
    rotate(runtime, "cid", str(log), RotatePolicy(1, 5), clock=FakeClock(wall=T0))
    os.chmod(f"{log}.20240305-140709", 0o600)
    rotate(runtime, "cid", str(log), RotatePolicy(1, 5), clock=FakeClock(wall=T0 + 1))
    mode = stat.S_IMODE(os.stat(f"{log}.20240305-140709.gz").st_mode)
    assert mode == 0o600


def test_a_failed_reopen_puts_the_log_back(log: Path) -> None:
    runtime = runtime_for(log)
    runtime.fail("ReopenContainerLog", "UNKNOWN", "container not running")
    with pytest.raises(CriError):
        rotate(runtime, "cid", str(log), RotatePolicy(1, 5), clock=FakeClock(wall=T0))
    assert files(log.parent) == ["0.log"]
    assert "first" in log.read_text()


def test_rotate_if_full_only_at_the_size_limit(log: Path) -> None:
    runtime = runtime_for(log)
    size = log.stat().st_size
    assert rotate_if_full(runtime, "cid", str(log), RotatePolicy(size + 1, 5)) == ""
    assert reopened(runtime) == []
    assert rotate_if_full(runtime, "cid", str(log), RotatePolicy(size, 5)) != ""
    assert reopened(runtime) == ["cid"]


def test_a_missing_live_log_is_reopened(log: Path) -> None:
    runtime = runtime_for(log)
    log.unlink()
    assert rotate_if_full(runtime, "cid", str(log), RotatePolicy(10, 5)) == ""
    assert reopened(runtime) == ["cid"]
    assert log.exists()
