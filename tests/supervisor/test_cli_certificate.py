"""``pkletd status``'s client certificate line: its expiry once there is one, the TLS
bootstrap's or rotation's last error while it goes wrong, nothing without a cert-manager."""

from __future__ import annotations

import copy
from typing import Any

from pkletd.supervisor.cli import format_status

from tests.supervisor.test_cli import STATUS


def with_certificate(path: str, not_after: float, error: str) -> dict[str, Any]:
    status = copy.deepcopy(STATUS)
    status["node"]["client_certificate"] = {"path": path, "not_after": not_after, "error": error}
    return status


def second_line(status: dict[str, Any]) -> str:
    return format_status(status, now=1000.0).splitlines()[1]


def test_a_certificate_shows_when_it_expires() -> None:
    assert second_line(with_certificate("/pki/a.pem", 1045.0, "")) == (
        "client certificate: expires in 45s"
    )


def test_a_failing_bootstrap_shows_its_cause() -> None:
    refused = "the API server refused the bootstrap credentials (401 Unauthorized)"
    assert second_line(with_certificate("", 0.0, refused)) == (
        f"client certificate: none yet, error: {refused}"
    )


def test_an_expired_certificate_says_so() -> None:
    assert second_line(with_certificate("/pki/a.pem", 990.0, "")) == "client certificate: EXPIRED"


def test_no_line_without_a_cert_manager() -> None:
    assert not format_status(STATUS, now=1000.0).splitlines()[1].startswith("client certificate")
