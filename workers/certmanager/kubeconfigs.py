"""The kubeconfig the node writes once it has a certificate, from its bootstrap kubeconfig.

As the kubelet's ``writeKubeconfigFromBootstrapping``: cluster ``default-cluster`` with
the server and certificate authority of the bootstrap file's current context, user
``default-auth`` whose client-certificate and client-key are both the current link
(``<cert-dir>/kubelet-client-current.pem``), context ``default-context`` (namespace
``default``) as the current one. A relative CA path is made absolute against the
bootstrap file's directory, so the new file works wherever it is written.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import yaml


class BootstrapConfigError(ValueError):
    """The bootstrap kubeconfig cannot be read or has no usable cluster."""


def bootstrap_cluster(bootstrap: Path) -> dict[str, Any]:
    """The server and certificate authority of the bootstrap kubeconfig's current context."""
    try:
        config = yaml.safe_load(bootstrap.read_text())
        current = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == current)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
    except (OSError, yaml.YAMLError, KeyError, TypeError, StopIteration) as exc:
        raise BootstrapConfigError(f"cannot read bootstrap kubeconfig {bootstrap}: {exc}") from exc
    if not isinstance(cluster, dict) or not cluster.get("server"):
        raise BootstrapConfigError(f"bootstrap kubeconfig {bootstrap} names no server")
    out: dict[str, Any] = {"server": cluster["server"]}
    for key in ("certificate-authority-data", "insecure-skip-tls-verify", "tls-server-name"):
        if key in cluster:
            out[key] = cluster[key]
    if cluster.get("certificate-authority"):
        out["certificate-authority"] = str(bootstrap.parent / cluster["certificate-authority"])
    return out


def write_node_kubeconfig(path: Path, cluster: dict[str, Any], current_pem: Path) -> None:
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "default-cluster", "cluster": cluster}],
        "users": [
            {
                "name": "default-auth",
                "user": {
                    "client-certificate": str(current_pem),
                    "client-key": str(current_pem),
                },
            }
        ],
        "contexts": [
            {
                "name": "default-context",
                "context": {
                    "cluster": "default-cluster",
                    "namespace": "default",
                    "user": "default-auth",
                },
            }
        ],
        "current-context": "default-context",
        "preferences": {},
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + ".tmp")
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o600)
    with open(fd, "w") as out:
        out.write(yaml.safe_dump(config, sort_keys=False))
    os.replace(tmp, path)
