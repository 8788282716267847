"""The pod DNS fields: clusterDNS, clusterDomain and resolvConf (and their flags) read,
checked, no longer warned about, and shown by /configz under their v1beta1 names."""

from __future__ import annotations

from pathlib import Path

import pytest
from pkletd.supervisor import config

from tests.supervisor.test_config import file_error, load, load_error, write


def test_defaults() -> None:
    loaded = load().config
    assert (loaded.cluster_dns, loaded.cluster_domain, loaded.resolv_conf) == (
        (),
        "",
        "/etc/resolv.conf",
    )


def test_file_fields_are_read_not_warned_about(tmp_path: Path) -> None:
    body = (
        "clusterDNS: [10.96.0.10, 'fd00::a']\nclusterDomain: cluster.local\n"
        "resolvConf: /run/systemd/resolve/resolv.conf\n"
    )
    result = load("--config", write(tmp_path, body))
    assert result.warnings == ()
    loaded = result.config
    assert loaded.cluster_dns == ("10.96.0.10", "fd00::a")
    assert loaded.cluster_domain == "cluster.local"
    assert loaded.resolv_conf == "/run/systemd/resolve/resolv.conf"
    shown = config.v1beta1(loaded)
    assert (shown["clusterDNS"], shown["clusterDomain"], shown["resolvConf"]) == (
        ["10.96.0.10", "fd00::a"],
        "cluster.local",
        "/run/systemd/resolve/resolv.conf",
    )


def test_an_empty_resolv_conf_means_none(tmp_path: Path) -> None:
    assert load("--config", write(tmp_path, 'resolvConf: ""\n')).config.resolv_conf == ""
    assert load("--resolv-conf", "").config.resolv_conf == ""


def test_flags_override_the_file(tmp_path: Path) -> None:
    path = write(tmp_path, "clusterDNS: [10.96.0.10]\nclusterDomain: cluster.local\n")
    loaded = load(
        "--config",
        path,
        "--cluster-dns",
        "10.0.0.10, 10.0.0.11",
        "--cluster-domain",
        "k8s.example",
        "--resolv-conf",
        "/etc/alt-resolv.conf",
    ).config
    assert loaded.cluster_dns == ("10.0.0.10", "10.0.0.11")
    assert loaded.cluster_domain == "k8s.example"
    assert loaded.resolv_conf == "/etc/alt-resolv.conf"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            "clusterDNS: [10.96.0.10, kube-dns]\n",
            'field "clusterDNS": must be a list of IP addresses, got "kube-dns" in it',
        ),
        (
            "clusterDNS: 10.96.0.10\n",
            'field "clusterDNS": must be a list of IP addresses, got "10.96.0.10"',
        ),
        (
            "clusterDomain: Cluster.Local\n",
            'field "clusterDomain": must be a DNS domain such as "cluster.local", got '
            '"Cluster.Local"',
        ),
        (
            "resolvConf: resolv.conf\n",
            'field "resolvConf": must be an absolute path, got "resolv.conf"',
        ),
    ],
)
def test_bad_values_name_the_field(tmp_path: Path, body: str, message: str) -> None:
    path, error = file_error(tmp_path, body)
    assert error == f"{path}: {message}"


def test_bad_flag_names_the_flag() -> None:
    assert load_error("--cluster-dns", "10.96.0.300") == (
        '--cluster-dns: must be a list of IP addresses, got "10.96.0.300" in it'
    )
