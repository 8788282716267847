"""Graceful node shutdown's fields: parsed, checked as the kubelet checks them, off by
default, and shown by /configz under their v1beta1 names."""

from __future__ import annotations

from pathlib import Path

import pytest
from pkletd.supervisor import config

from tests.supervisor.test_config import file_error, load, write


def test_off_by_default() -> None:
    loaded = load().config
    assert loaded.shutdown_grace_period == 0.0
    assert loaded.shutdown_grace_period_critical_pods == 0.0
    assert loaded.shutdown_grace_period_by_pod_priority == ()


def test_periods_and_priority_groups(tmp_path: Path) -> None:
    path = write(tmp_path, "shutdownGracePeriod: 30s\nshutdownGracePeriodCriticalPods: 10s\n")
    loaded = load("--config", path).config
    assert (loaded.shutdown_grace_period, loaded.shutdown_grace_period_critical_pods) == (30, 10)
    body = """
shutdownGracePeriodByPodPriority:
  - {priority: 100000, shutdownGracePeriodSeconds: 10}
  - {priority: -5, shutdownGracePeriodSeconds: 3}
"""
    loaded = load("--config", write(tmp_path, body)).config
    assert loaded.shutdown_grace_period_by_pod_priority == ((100000, 10), (-5, 3))
    shown = config.v1beta1(loaded)["shutdownGracePeriodByPodPriority"]
    assert shown == [
        {"priority": 100000, "shutdownGracePeriodSeconds": 10},
        {"priority": -5, "shutdownGracePeriodSeconds": 3},
    ]
    assert load("--logind-conf-dir", "/tmp/x").config.logind_conf_dir == "/tmp/x"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "shutdownGracePeriod: 500ms\n",
            'field "shutdownGracePeriod": must be either zero or otherwise >= 1 sec, got "500ms"',
        ),
        (
            "shutdownGracePeriodByPodPriority: [{priority: 1, seconds: 3}]\n",
            'field "shutdownGracePeriodByPodPriority": {"priority": 1, "seconds": 3}: '
            'unknown field ["seconds"]',
        ),
        (
            "shutdownGracePeriodByPodPriority: [{priority: x, shutdownGracePeriodSeconds: 3}]\n",
            'field "shutdownGracePeriodByPodPriority": {"priority": "x", '
            '"shutdownGracePeriodSeconds": 3}: must be an integer in -2147483648..2147483647, '
            'got "x"',
        ),
        (
            "shutdownGracePeriodByPodPriority: {priority: 1}\n",
            'field "shutdownGracePeriodByPodPriority": must be a list of {priority, '
            'shutdownGracePeriodSeconds}, got {"priority": 1}',
        ),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, body: str, message: str) -> None:
    path, error = file_error(tmp_path, body)
    assert error == f"{path}: {message}"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "shutdownGracePeriod: 10s\nshutdownGracePeriodCriticalPods: 20s\n",
            "shutdownGracePeriodCriticalPods 20s must be <= shutdownGracePeriod 10s",
        ),
        (
            "shutdownGracePeriodCriticalPods: 5s\n",
            "shutdownGracePeriodCriticalPods 5s must be <= shutdownGracePeriod 0s",
        ),
        (
            "shutdownGracePeriod: 10s\n"
            "shutdownGracePeriodByPodPriority: [{priority: 0, shutdownGracePeriodSeconds: 3}]\n",
            "Cannot specify both shutdownGracePeriodByPodPriority and shutdownGracePeriod at "
            "the same time",
        ),
    ],
)
def test_the_kubelets_cross_checks(tmp_path: Path, body: str, message: str) -> None:
    _, error = file_error(tmp_path, body)
    assert error == message
