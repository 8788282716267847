"""Whether a kubeconfig's client credentials can still be used, as the kubelet's TLS
bootstrap decides it (``pkg/kubelet/certificate/bootstrap``): the file exists, parses, and
none of the certificates of its current user has expired. A user with a token (or no
certificate at all) counts as usable: only an expired certificate sends the node back to
its bootstrap credentials. Read by the parent (which workers to hold) and by the
cert-manager worker (whether to bootstrap).
"""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path
from typing import Any

import yaml
from cryptography import x509


def certificate_chain(kubeconfig: Path) -> list[x509.Certificate] | None:
    """The client certificates of the kubeconfig's current user; None if the file is
    missing or unreadable."""
    try:
        config = yaml.safe_load(kubeconfig.read_text())
        user = _current_user(config)
        pem = _client_pem(user, kubeconfig.parent)
        return x509.load_pem_x509_certificates(pem) if pem else []
    except (OSError, ValueError, TypeError, KeyError, AttributeError, yaml.YAMLError):
        return None


def usable(kubeconfig: Path, now: dt.datetime | None = None) -> bool:
    """The kubeconfig exists and no certificate of its current user has expired."""
    chain = certificate_chain(kubeconfig)
    if chain is None:
        return False
    moment = now or dt.datetime.now(dt.UTC)
    return all(cert.not_valid_after_utc > moment for cert in chain)


def _current_user(config: dict[str, Any]) -> dict[str, Any]:
    current = config["current-context"]
    context = next(c["context"] for c in config["contexts"] if c["name"] == current)
    user: dict[str, Any] = next(u["user"] for u in config["users"] if u["name"] == context["user"])
    return user or {}


def _client_pem(user: dict[str, Any], base: Path) -> bytes:
    if user.get("client-certificate-data"):
        return base64.b64decode(str(user["client-certificate-data"]))
    if user.get("client-certificate"):
        return (base / str(user["client-certificate"])).read_bytes()
    return b""
