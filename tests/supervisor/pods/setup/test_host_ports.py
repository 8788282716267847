"""A container port's hostIP reaches the runtime's port mapping, as the kubelet sends it."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pkletd.ipc.apimodel.podspec import InvalidPod, parse_pod
from pkletd.ipc.runtime import cri
from pkletd.supervisor.pods.setup import runtimespec


def pod(**spec: Any) -> Any:
    return parse_pod({"metadata": {"name": "web", "uid": "u-1"}, "spec": spec})


def test_a_host_port_binds_its_host_ip() -> None:
    ports = [
        {"containerPort": 80, "hostPort": 8080, "hostIP": "127.0.0.1"},
        {"containerPort": 81, "hostPort": 8081},
    ]
    p = pod(containers=[{"name": "a", "image": "x", "ports": ports}])
    config = cri._sandbox_config(runtimespec.sandbox_spec(p, 0, Path("/var/log/pods")))
    assert [(m.host_port, m.host_ip) for m in config.port_mappings] == [
        (8080, "127.0.0.1"),
        (8081, ""),
    ]
    bad = [{"containerPort": 80, "hostPort": 8080, "hostIP": "localhost"}]
    with pytest.raises(InvalidPod, match=r"ports\[0\].hostIP: invalid value 'localhost'"):
        pod(containers=[{"name": "a", "image": "x", "ports": bad}])
