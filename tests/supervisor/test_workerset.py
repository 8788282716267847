"""The table of workers: which run for a configuration, in what order, and what a standalone
node does not import (the official client, the D-Bus client)."""

from __future__ import annotations

import argparse
import dataclasses
import subprocess
import sys

import pytest
from pkletd.ipc.apimodel.podenums import PodSource
from pkletd.ipc.bus.workername import WorkerName
from pkletd.supervisor import config, workerset
from pkletd.supervisor.config import KubeletConfig

ALWAYS = ["pleg", "http", "pod-resources", "prober", "log-rotator", "image-gc", "eviction"]


def load(*flags: str) -> KubeletConfig:
    parser = argparse.ArgumentParser()
    config.add_flags(parser)
    return config.load(parser.parse_args(list(flags))).config


def test_a_standalone_node_runs_the_workers_that_always_run() -> None:
    assert workerset.running(load()) == ALWAYS


@pytest.mark.parametrize(
    ("flags", "fields", "added"),
    [
        (["--pod-manifest-path", "/etc/kubernetes/manifests"], {}, ["file-source"]),
        (["--manifest-url", "http://example.com/pods"], {}, ["http-source"]),
        (
            ["--kubeconfig", "/etc/kubernetes/kubelet.conf"],
            {},
            ["status-manager", "node-lease", "api-watcher", "pod-objects", "plugin-watcher"],
        ),
        ([], {"shutdown_grace_period": 30.0}, ["node-shutdown"]),
        ([], {"shutdown_grace_period_by_pod_priority": ((0, 20),)}, ["node-shutdown"]),
    ],
)
def test_a_worker_runs_when_its_setting_is_given(
    flags: list[str], fields: dict[str, object], added: list[str]
) -> None:
    running = workerset.running(dataclasses.replace(load(*flags), **fields))
    assert sorted(running) == sorted(ALWAYS + added)


def test_workers_start_in_the_order_of_their_names() -> None:
    every = dataclasses.replace(
        load("--pod-manifest-path", "/m", "--manifest-url", "http://h/p", "--kubeconfig", "/k"),
        shutdown_grace_period=30.0,
        bootstrap_kubeconfig="/b",
    )
    assert workerset.running(every) == list(WorkerName)


def test_every_worker_has_a_spec_and_every_pod_source_its_worker() -> None:
    assert list(workerset.WORKERS) == list(WorkerName)
    assert workerset.SOURCE_WORKERS == {
        PodSource.FILE: WorkerName.FILE_SOURCE,
        PodSource.HTTP: WorkerName.HTTP_SOURCE,
        PodSource.API: WorkerName.API_WATCHER,
    }
    assert workerset.sources([WorkerName.PLEG, WorkerName.API_WATCHER]) == [PodSource.API]


CHECK_IMPORTS = """
import argparse, sys
from pkletd.supervisor import config, workerset
parser = argparse.ArgumentParser()
config.add_flags(parser)
entries = workerset.entries(config.load(parser.parse_args(sys.argv[1:])).config)
heavy = sorted({m.split(".")[0] for m in sys.modules} & {"kubernetes", "dbus_fast"})
print(",".join(entries), " ".join(heavy) or "-")
"""


def entries_and_heavy_imports(*flags: str) -> tuple[str, str]:
    """Build the entries in a fresh interpreter: the worker names, and which of the heavy
    clients that cost imported."""
    found = subprocess.run(
        [sys.executable, "-c", CHECK_IMPORTS, *flags],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    names, heavy = found.stdout.split()
    return names, heavy


def test_a_standalone_node_imports_neither_the_api_client_nor_dbus() -> None:
    assert entries_and_heavy_imports() == (",".join(ALWAYS), "-")


def test_a_node_joining_a_cluster_imports_the_api_client() -> None:
    names, heavy = entries_and_heavy_imports("--kubeconfig", "/etc/kubernetes/kubelet.conf")
    assert "api-watcher" in names.split(",")
    assert heavy == "kubernetes"
