"""``make cluster``: the real control plane with pkletd nodes, left running until ``make stop``.

Everything lives under one directory (``/tmp/pkletd-cluster`` by default)::

    control-plane/          the ControlPlane: PKI, etcd data, logs/<component>.log
    admin.kubeconfig        the cluster's admin (system:masters)
    node-1/ node-2/ ...     each pkletd's run, log and root dirs (log/<process>.log)
    nodes.json              what ``down`` stops: each node's name, run dir and containerd

Node 1 runs on the private containerd ``make run`` uses; node N > 1 on one of its own
(``<containerd dir>-node-N``). Each node joins with its own client certificate
(``system:node:<name>``) and ``--node-ip 127.0.0.1``, its kubelet API trusting the cluster
CA, as ``kubeadm join`` leaves a kubelet.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

from tests.harness.containerd import PrivateContainerd, ensure_installed, unmount_all
from tests.harness.controlplane.cluster import ControlPlane
from tests.harness.node import PKLETD, Pkletd, join

READY_TIMEOUT = 120.0


def node_names(count: int) -> list[str]:
    return [f"node-{i}" for i in range(1, count + 1)]


def containerd_dir(base: Path, node: int) -> Path:
    return base if node == 1 else base.with_name(f"{base.name}-node-{node}")


def up(base: Path, nodes: int, containerd_base: Path) -> Path:
    """Bring the cluster up (what runs already is kept); the admin kubeconfig's path."""
    ensure_installed()
    base.mkdir(parents=True, exist_ok=True)
    plane = ControlPlane(base / "control-plane").start()
    admin = plane.kubeconfig(base / "admin.kubeconfig")
    joined = _read_nodes(base)
    for number, name in enumerate(node_names(nodes), start=1):
        if name in joined:
            continue
        daemon = PrivateContainerd(containerd_dir(containerd_base, number))
        daemon.start()
        agent = Pkletd(daemon.address, node=name, base=base / name)
        join(agent, plane)
        joined[name] = {"run_dir": str(agent.run_dir), "containerd": str(daemon.base_dir)}
        _write_nodes(base, joined)
    _wait_ready(plane, list(joined))
    return admin


def _wait_ready(plane: ControlPlane, names: list[str]) -> None:
    kubectl = [str(plane.kubectl), "--kubeconfig", str(plane.kubeconfig())]
    deadline = time.monotonic() + READY_TIMEOUT
    while time.monotonic() < deadline:
        found = subprocess.run(
            [
                *kubectl,
                "wait",
                "--for=condition=Ready",
                "--timeout=5s",
                *(f"node/{n}" for n in names),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if found.returncode == 0:
            return
    raise RuntimeError(f"nodes not Ready after {READY_TIMEOUT:.0f}s: {found.stderr.strip()}")


def down(base: Path) -> None:
    """Stop every node, its containerd (and so its pods) and the control plane; remove
    the directory, its mounts first."""
    for node in _read_nodes(base).values():
        # returns once its processes are gone; its pods go with its containerd
        subprocess.run([str(PKLETD), "stop", "--run-dir", node["run_dir"]], check=False,
                       capture_output=True)  # fmt: skip
        PrivateContainerd(Path(node["containerd"])).stop()
    if (base / "control-plane").exists():
        ControlPlane(base / "control-plane").stop()
    unmount_all(base)  # the pods' memory-backed volumes (a stopped pkletd leaves them)
    shutil.rmtree(base, ignore_errors=True)


def _read_nodes(base: Path) -> dict[str, dict[str, str]]:
    path = base / "nodes.json"
    return dict(json.loads(path.read_text())) if path.exists() else {}


def _write_nodes(base: Path, nodes: dict[str, dict[str, str]]) -> None:
    (base / "nodes.json").write_text(json.dumps(nodes, indent=2))
