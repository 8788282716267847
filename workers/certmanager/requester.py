"""Ask the API server to sign a request and wait for the certificate.

Create the CertificateSigningRequest (a bootstrap request of the same name that exists
already is ours: the same key gives the same name), then read it every second until it
has a certificate, is Denied or Failed, or ``CSR_WAIT_S`` passed. Every failure is a
``RequestFailed`` whose text is the log and status line: a refused credential (401), a
forbidden request (403), an unreachable server, a denied request with its reason.
"""

from __future__ import annotations

import base64
import threading
import time
from typing import Any

import kubernetes
import urllib3
from kubernetes.client.exceptions import ApiException
from pkletd.workers.certmanager import csr

CSR_WAIT_S = 15 * 60.0  # client-go's wait for one request
POLL_S = 1.0


class RequestFailed(Exception):
    """Why no certificate came back: the text names the cause for an operator."""


def obtain(client: Any, request: csr.Request, name: str, stop: threading.Event, who: str) -> bytes:
    """The signed client certificate (PEM) for ``request``; ``name`` "" for a generated name."""
    return obtain_body(client, csr.body(request, name), stop, who)


def obtain_body(client: Any, body: dict[str, Any], stop: threading.Event, who: str) -> bytes:
    """The signed certificate (PEM) for the CertificateSigningRequest ``body``."""
    api = kubernetes.client.CertificatesV1Api(client)
    try:
        created = _create(api, body)
        return _wait(api, created, stop)
    except ApiException as exc:
        raise RequestFailed(_api_error(exc, who)) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise RequestFailed(f"API server unreachable: {exc}") from exc


def _create(api: Any, body: dict[str, Any]) -> str:
    name = str(body["metadata"].get("name", ""))
    try:
        made = api.create_certificate_signing_request(body)
    except ApiException as exc:
        if exc.status == 409 and name:
            return name
        raise
    return str(made.metadata.name)


def _wait(api: Any, name: str, stop: threading.Event) -> bytes:
    deadline = time.monotonic() + CSR_WAIT_S
    while time.monotonic() < deadline:
        found = api.read_certificate_signing_request(name)
        for condition in (found.status and found.status.conditions) or []:
            if condition.type in ("Denied", "Failed") and condition.status == "True":
                raise RequestFailed(
                    f"certificate signing request {name} {condition.type.lower()}: "
                    f"reason={condition.reason or ''} message={condition.message or ''}"
                )
        if found.status is not None and found.status.certificate:
            return base64.b64decode(found.status.certificate)
        if stop.wait(POLL_S):
            raise RequestFailed("stopping")
    raise RequestFailed(f"certificate signing request {name} not signed within {CSR_WAIT_S:.0f}s")


def _api_error(exc: ApiException, who: str) -> str:
    if exc.status == 401:
        return f"the API server refused the {who} credentials (401 Unauthorized)"
    if exc.status == 403:
        return f"the API server forbade the {who} request (403 Forbidden): {exc.body}"
    return f"API error {exc.status} {exc.reason}: {exc.body}"
