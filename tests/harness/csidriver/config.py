"""The driver's settings and its command line (``python -m tests.harness.csidriver``):

--name NAME               the driver's name (GetPluginInfo, the registration)
--endpoint PATH           its CSI socket (Identity and Node services)
--registration-dir DIR    the kubelet's <root-dir>/plugins_registry: the Registration
                          service is served on DIR/<name>-reg.sock
--data-dir DIR            where volumes live: DIR/<volume id>; inline ephemeral ones
                          under DIR/ephemeral/<volume id>
--node-id ID              NodeGetInfo's node id
--max-volumes N           NodeGetInfo's max_volumes_per_node (0: no limit)
--topology KEY=VALUE      a NodeGetInfo topology segment (repeatable)
--no-stage                no STAGE_UNSTAGE_VOLUME capability: publish binds the volume
--calls FILE              every call appended as one JSON line (``calls.py``)
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERSION = "1.0.0"  # the plugin registration API versions it speaks, and its vendor version


@dataclass(frozen=True)
class DriverConfig:
    name: str
    endpoint: Path
    registration_dir: Path
    data_dir: Path
    node_id: str
    calls: Path
    max_volumes: int = 0
    topology: dict[str, str] = field(default_factory=dict)
    stage: bool = True

    @classmethod
    def for_kubelet(
        cls, root_dir: Path, name: str, node_id: str, data_dir: Path, calls: Path, **more: Any
    ) -> DriverConfig:
        """A driver on a node with the kubelet's ``root_dir``, laid out as node-driver-registrar
        lays drivers out: ``<root>/plugins/<name>/csi.sock``, registered in
        ``<root>/plugins_registry``."""
        return cls(
            name=name,
            endpoint=root_dir / "plugins" / name / "csi.sock",
            registration_dir=root_dir / "plugins_registry",
            data_dir=data_dir,
            node_id=node_id,
            calls=calls,
            **more,
        )

    @property
    def registration_socket(self) -> Path:
        return self.registration_dir / f"{self.name}-reg.sock"

    def argv(self) -> list[str]:
        """The command line that gives this config."""
        args = [
            f"--name={self.name}",
            f"--endpoint={self.endpoint}",
            f"--registration-dir={self.registration_dir}",
            f"--data-dir={self.data_dir}",
            f"--node-id={self.node_id}",
            f"--max-volumes={self.max_volumes}",
            f"--calls={self.calls}",
        ]
        args += [f"--topology={key}={value}" for key, value in self.topology.items()]
        return args if self.stage else [*args, "--no-stage"]


def _segment(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"want KEY=VALUE, got {text!r}")
    return key, value


def parse(argv: Sequence[str]) -> DriverConfig:
    parser = argparse.ArgumentParser(
        prog="python -m tests.harness.csidriver", description="a host-path CSI driver for tests"
    )
    parser.add_argument("--name", required=True)
    parser.add_argument("--endpoint", required=True, type=Path)
    parser.add_argument("--registration-dir", required=True, type=Path)
    parser.add_argument("--data-dir", required=True, type=Path)
    parser.add_argument("--node-id", required=True)
    parser.add_argument("--max-volumes", type=int, default=0)
    parser.add_argument("--topology", type=_segment, action="append", default=[])
    parser.add_argument("--no-stage", action="store_true")
    parser.add_argument("--calls", required=True, type=Path)
    args = parser.parse_args(argv)
    return DriverConfig(
        name=args.name,
        endpoint=args.endpoint.absolute(),
        registration_dir=args.registration_dir.absolute(),
        data_dir=args.data_dir.absolute(),
        node_id=args.node_id,
        calls=args.calls,
        max_volumes=args.max_volumes,
        topology=dict(args.topology),
        stage=not args.no_stage,
    )
