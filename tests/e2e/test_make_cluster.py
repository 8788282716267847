"""``make cluster`` as a user runs it: the real control plane and a pkletd node come up,
a Deployment's pods run, ``kubectl logs`` and ``exec`` reach them, and ``down`` leaves
no process, mount or directory behind."""

from __future__ import annotations

import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tests.harness.containerd import mounts_under
from tests.harness.controlplane import binaries
from tests.harness.node import REPO, wait_for

pytestmark = pytest.mark.slow


def harness(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "tests.harness.controlplane", *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )


def processes_naming(path: Path) -> list[str]:
    found = []
    for cmdline in Path("/proc").glob("[0-9]*/cmdline"):
        try:
            text = cmdline.read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if str(path) in text:
            found.append(text)
    return found


def test_a_cluster_comes_up_runs_a_deployment_and_goes_down() -> None:
    short = Path(tempfile.mkdtemp(prefix="mc-", dir="/tmp"))  # bus socket paths: 107 bytes
    base, containerd = short / "cluster", short / "ctr"
    up = harness("up", "--dir", str(base), "--nodes", "1", "--containerd-dir", str(containerd))
    try:
        assert up.returncode == 0, up.stderr
        kubeconfig = up.stdout.strip()
        assert kubeconfig == str(base / "admin.kubeconfig")
        assert harness("kubeconfig", "--dir", str(base)).stdout.strip() == kubeconfig

        def kubectl(*args: str) -> str:
            command = [str(binaries.path("kubectl")), "--kubeconfig", kubeconfig, *args]
            done = subprocess.run(command, capture_output=True, text=True, timeout=120)
            assert done.returncode == 0, (args, done.stderr)
            return done.stdout

        assert kubectl("get", "node", "node-1", "-o", "name") == "node/node-1\n"
        kubectl("create", "deployment", "hello", "--image=pkletd.local/busybox:1",
                "--", "sh", "-c", "echo hello from pkletd; exec sleep 3600")  # fmt: skip
        kubectl("wait", "--for=condition=Available", "deployment/hello", "--timeout=90s")
        wait_for("the pod's log", lambda: "hello from pkletd" in kubectl("logs", "deploy/hello"))
        assert kubectl("exec", "deploy/hello", "--", "echo", "exec ok") == "exec ok\n"
    finally:
        down = harness("down", "--dir", str(base))
        subprocess.run(
            [sys.executable, "tests/harness/containerd.py", "down", "--dir", str(containerd)],
            cwd=REPO,
            check=False,
            capture_output=True,
        )
    assert down.returncode == 0, down.stderr
    assert processes_naming(base) == [] and processes_naming(containerd) == []
    assert mounts_under(base) == [] and not base.exists()
    shutil.rmtree(short)
