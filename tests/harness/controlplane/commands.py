"""The command line of the control plane harness (``make binaries``, ``make cluster``)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from tests.harness.containerd import HarnessError
from tests.harness.controlplane import binaries, localcluster
from tests.harness.controlplane.processes import ComponentError

DEFAULT_DIR = Path("/tmp/pkletd-cluster")


def build(args: argparse.Namespace) -> int:
    took = binaries.ensure_built()
    for group in binaries.GROUPS:
        how = f"built in {took[group.name]:.0f}s" if group.name in took else "cached"
        print(f"{group.name}: {how}: {group.cache_dir}", file=sys.stderr)
    return 0


def up(args: argparse.Namespace) -> int:
    admin = localcluster.up(args.dir, args.nodes, args.containerd_dir)
    print(f"cluster up: {args.nodes} pkletd node(s) Ready; logs under {args.dir}", file=sys.stderr)
    print(f"  kubectl: {binaries.path('kubectl')} --kubeconfig {admin}", file=sys.stderr)
    print(admin)
    return 0


def down(args: argparse.Namespace) -> int:
    localcluster.down(args.dir)
    print(f"cluster under {args.dir} stopped", file=sys.stderr)
    return 0


def kubeconfig(args: argparse.Namespace) -> int:
    path = args.dir / "admin.kubeconfig"
    if not path.exists():
        print(f"error: no cluster under {args.dir} (make cluster)", file=sys.stderr)
        return 1
    print(path)
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.controlplane")
    sub = parser.add_subparsers(dest="command", required=True)
    sub.add_parser("build", help="build the Kubernetes, etcd and crictl binaries that are missing")
    for name, text in (
        ("up", "start the control plane and pkletd nodes (what runs is kept)"),
        ("down", "stop the nodes, their containerds and the control plane"),
        ("kubeconfig", "print the admin kubeconfig's path"),
    ):
        command = sub.add_parser(name, help=text)
        command.add_argument("--dir", type=Path, default=DEFAULT_DIR, help="the cluster's dir")
        if name == "up":
            command.add_argument("--nodes", type=int, default=1, help="pkletd nodes (default 1)")
            command.add_argument("--containerd-dir", type=Path, default=Path("/tmp/pkletd-ctr"),
                                 help="node 1's containerd (node N: <dir>-node-N)")  # fmt: skip
    args = parser.parse_args(argv)
    commands = {"build": build, "up": up, "down": down, "kubeconfig": kubeconfig}
    try:
        return commands[args.command](args)
    except (subprocess.CalledProcessError, ComponentError, HarnessError, RuntimeError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
