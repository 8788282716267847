"""`pkletd status`: the table an operator reads, and the JSON scripts read; `--version`."""

from __future__ import annotations

import json
import tomllib

import pytest
from pkletd.supervisor.cli import format_status, main

from tests.harness.node import REPO, Pkletd, pod_manifest

STATUS = {
    "node": {
        "name": "node-1",
        "joined": True,
        "registered": True,
        "lease_renewed_at": 1000.0,
        "status_reported_at": 990.0,
        "api_error": "",
        "conditions": {"Ready": "True"},
    },
    "workers": [
        {
            "name": "pleg",
            "pid": 42,
            "state": "running",
            "restarts": 1,
            "uptime_s": 75.2,
            "last_exit": "killed by SIGKILL; not expected",
        },
        {
            "name": "prober",
            "pid": 0,
            "state": "backoff",
            "restarts": 5,
            "uptime_s": 0,
            "last_exit": "exit status 1; not expected",
        },
    ],
    "pods": [
        {
            "namespace": "default",
            "name": "web-node",
            "uid": "u",
            "phase": "Running",
            "containers": [
                {
                    "name": "httpd",
                    "state": "running",
                    "ready": False,
                    "restart_count": 2,
                    "container_id": "c",
                    "probes": {},
                },
                {
                    "name": "side",
                    "state": "CrashLoopBackOff",
                    "ready": False,
                    "restart_count": 0,
                    "container_id": "d",
                    "probes": {},
                },
            ],
        },
    ],
}


def test_table_shows_workers_and_pods() -> None:
    lines = format_status(STATUS, now=1004.0).splitlines()
    assert lines[0] == "node node-1: registered, Ready, lease renewed 4s ago, API ok"
    lines = lines[2:]
    assert lines[0].split() == ["WORKER", "PID", "STATE", "RESTARTS", "UPTIME", "LAST", "EXIT"]
    assert lines[1].split()[:5] == ["pleg", "42", "running", "1", "1m15s"]
    assert lines[1].endswith("killed by SIGKILL; not expected")
    assert lines[2].split()[:5] == ["prober", "-", "backoff", "5", "-"]
    pod_line = lines[-1]
    assert pod_line.startswith("default/web-node")
    assert "httpd=running (not ready, restarts 2), side=CrashLoopBackOff" in pod_line


def test_status_names_a_standalone_node_and_an_api_error() -> None:
    standalone = {**STATUS, "node": {**STATUS["node"], "joined": False}}
    assert format_status(standalone).splitlines()[0] == (
        "node node-1: standalone (static pods only)"
    )
    down = {
        **STATUS,
        "node": {**STATUS["node"], "api_error": "cannot reach the API server: refused"},
    }
    assert (
        format_status(down, now=1004.0)
        .splitlines()[0]
        .endswith("API error: cannot reach the API server: refused")
    )


def test_status_shows_the_signals_against_their_thresholds() -> None:
    pressure = {
        "observed_at": 1000.0,
        "conditions": ["MemoryPressure"],
        "signals": [
            {
                "signal": "memory.available",
                "available": 90 * 2**20,
                "capacity": 8 * 2**30,
                "thresholds": [
                    {"value": "100Mi", "quantity": 100 * 2**20, "grace_s": 0.0, "met": True},
                    {"value": "10%", "quantity": 858993459, "grace_s": 90.0, "met": True},
                ],
            },
            {"signal": "pid.available", "available": 32000, "capacity": 32768, "thresholds": []},
        ],
    }
    lines = format_status({**STATUS, "pressure": pressure}, now=1004.0).splitlines()
    assert lines[2].split() == ["SIGNAL", "AVAILABLE", "CAPACITY", "THRESHOLDS"]
    assert lines[3].split() == [
        "memory.available",
        "90.0Mi",
        "8.0Gi",
        "hard",
        "<100Mi",
        "MET,",
        "soft",
        "<10%",
        "(819.2Mi)",
        "for",
        "1m30s",
        "MET",
    ]
    assert lines[4].split() == ["pid.available", "32000", "32768", "-"]
    assert lines[5] == "pressure: MemoryPressure"


@pytest.mark.slow
def test_status_json_has_the_documented_shape(pkletd: Pkletd) -> None:
    pkletd.put("shape", pod_manifest("shape"))
    pkletd.start()
    pkletd.wait_running("shape")
    result = pkletd.cli("status", "--json")
    assert result.returncode == 0
    status = json.loads(result.stdout)
    assert {"node", "workers", "pods", "events"} <= status.keys()
    assert status["node"]["name"] == "testnode" and status["node"]["joined"] is False
    assert [e["reason"] for e in status["events"]] == ["Pulled", "Created", "Started"]
    assert "events" not in pkletd.status()  # asked for by --json only: polling stays cheap
    assert set(status["workers"][0]) == {
        "name",
        "pid",
        "state",
        "restarts",
        "uptime_s",
        "last_exit",
    }
    pod = status["pods"][0]
    assert {"namespace", "name", "uid", "phase", "containers"} <= pod.keys()
    assert {"name", "state", "restart_count", "container_id"} <= pod["containers"][0].keys()
    table = pkletd.cli("status")
    assert table.returncode == 0 and "default/shape-testnode  Running  c0=running" in table.stdout


def test_version_is_the_packages(capsys: pytest.CaptureFixture[str]) -> None:
    version = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["version"]
    with pytest.raises(SystemExit) as exited:
        main(["--version"])
    assert exited.value.code == 0
    assert capsys.readouterr().out == f"pkletd {version}\n"
