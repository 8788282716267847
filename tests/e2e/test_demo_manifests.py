"""The demo manifests in etc/ (what `make run` starts) are valid and run."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml
from pkletd.ipc.apimodel.podspec import parse_pod

from tests.harness.node import Pkletd, api_pod, condition, wait_for

MANIFESTS = sorted((Path(__file__).resolve().parents[2] / "etc" / "manifests").glob("*.yaml"))


@pytest.mark.parametrize("path", MANIFESTS, ids=lambda p: p.name)
def test_demo_manifest_parses(path: Path) -> None:
    parse_pod(yaml.safe_load(path.read_text()))


@pytest.mark.slow
def test_demo_pods_run_and_become_ready(pkletd: Pkletd) -> None:
    for path in MANIFESTS:
        pkletd.put(path.stem, path.read_text())
    pkletd.start()
    for name in (path.stem for path in MANIFESTS):
        wait_for(
            f"{name} Ready", lambda n=name: condition(api_pod(pkletd, n), "Ready") == "True", 60
        )
