"""What a test talks to an ``ApiServer`` with: the official Python client and real kubectl.

``Kube(server)`` holds clients for one user (admin by default); ``kube.as_user(...)`` gives
another. ``kubectl`` runs ``/usr/bin/kubectl`` (or ``$KUBECTL``) with that user's kubeconfig
and a private discovery cache::

    kube = Kube(server)
    kube.core.list_namespace()
    kube.kubectl("get", "nodes").stdout
    node = kube.as_user("system:node:n1", ["system:nodes"])
    kube.bind("default/data", "pv-1")        # as the PV controller binds (``pvbinding.py``)
    kube.set_attached("csi-5f0c...")         # as the external-attacher reports
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from kubernetes import client, config
from kubernetes.client.exceptions import ApiException

from tests.harness.apiserver import pvbinding
from tests.harness.apiserver.server import ApiServer

if TYPE_CHECKING:
    from tests.harness.controlplane import ControlPlane

KUBECTL = os.environ.get("KUBECTL") or shutil.which("kubectl") or "/usr/bin/kubectl"
T = TypeVar("T")


class Kube:
    def __init__(
        self,
        server: ApiServer | ControlPlane,
        user: str = "admin",
        groups: Sequence[str] | None = None,
        token: str | None = None,
        retries: int | bool | None = None,
    ) -> None:
        """``retries=False`` turns urllib3's connection retries off (a client that rides out
        a server restart itself, without retry warnings holding dead connections)."""
        self.server = server
        self.user = user
        self.kubeconfig_path: Path = server.kubeconfig(user=user, groups=groups, token=token)
        configuration = client.Configuration()
        configuration.retries = retries
        self.api: client.ApiClient = config.new_client_from_config(  # type: ignore[no-untyped-call]
            config_file=str(self.kubeconfig_path), client_configuration=configuration
        )
        self.core = client.CoreV1Api(self.api)
        self.coordination = client.CoordinationV1Api(self.api)
        self.events = client.EventsV1Api(self.api)
        self.authn = client.AuthenticationV1Api(self.api)
        self.authz = client.AuthorizationV1Api(self.api)
        self.storage = client.StorageV1Api(self.api)
        self.apps = client.AppsV1Api(self.api)
        self.certificates = client.CertificatesV1Api(self.api)
        # the real control plane's own kubectl, of its release; else the machine's
        self.kubectl_path = str(getattr(server, "kubectl", KUBECTL))
        self._others: list[Kube] = []

    def as_user(self, user: str, groups: Sequence[str] = (), token: str | None = None) -> Kube:
        """The same server as ``user`` (a client cert in ``groups``, or ``token``)."""
        other = Kube(self.server, user, groups, token)
        self._others.append(other)
        return other

    def close(self) -> None:
        for other in self._others:
            other.close()
        self.api.close()  # type: ignore[no-untyped-call]

    def bind(self, claim: str, pv: str) -> None:
        """Bind the claim ``namespace/name`` to the volume ``pv``, as the PV controller does."""
        pvbinding.bind(self.core, claim, pv)

    def set_attached(self, attachment: str, attached: bool = True) -> None:
        """Set a VolumeAttachment's ``status.attached``, as the external-attacher does."""
        pvbinding.set_attached(self.storage, attachment, attached)

    def raw(
        self,
        method: str,
        path: str,
        body: Any = None,
        content_type: str = "application/json",
        accept: str = "application/json",
    ) -> tuple[int, Any, dict[str, str]]:
        """One request outside the typed API (for bodies the client would refuse)."""
        headers = {"Accept": accept}
        if body is not None:
            headers["Content-Type"] = content_type
        url = self.api.configuration.host + path
        rest = self.api.rest_client
        response = rest.request(method, url, headers=headers, body=body)  # type: ignore[no-untyped-call]
        data = response.read()
        try:
            parsed: Any = json.loads(data)
        except ValueError:
            parsed = data.decode(errors="replace")
        return response.status, parsed, dict(response.headers)

    def kubectl(
        self, *args: str, input: str | None = None, check: bool = True, timeout: float = 30.0
    ) -> subprocess.CompletedProcess[str]:
        result = subprocess.run(
            self.kubectl_command(*args),
            input=input,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if check and result.returncode != 0:
            raise AssertionError(
                f"kubectl {' '.join(args)} exited {result.returncode}:\n"
                f"{result.stdout}\n{result.stderr}"
            )
        return result

    def kubectl_command(self, *args: str) -> list[str]:
        cache = self.server.base_dir / "kubectl-cache"
        return [
            self.kubectl_path,
            "--kubeconfig",
            str(self.kubeconfig_path),
            "--cache-dir",
            str(cache),
            *args,
        ]


def eventually(probe: Callable[[], T | None], timeout: float = 10.0, what: str = "condition") -> T:
    """Poll ``probe`` until it returns something truthy; fail with ``what`` at the deadline."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value:
            return value
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.02)


def found_or_none(read: Callable[..., T], *args: Any) -> T | None:
    """``read(*args)``, or None when the API answers 404 (any other error is raised)."""
    try:
        return read(*args)
    except ApiException as exc:
        if exc.status != 404:
            raise
        return None


def expect_failure(call: Callable[..., Any], *args: Any, **kwargs: Any) -> dict[str, Any]:
    """Call an API method that must fail; the Status body the server sent.

    The exception is dropped before returning: its traceback would keep the client's
    connection alive until the next garbage collection."""
    try:
        call(*args, **kwargs)
    except ApiException as exc:
        body = dict(json.loads(exc.body or "{}"))
        assert body["code"] == exc.status, body
        return body
    raise AssertionError(f"{getattr(call, '__name__', call)} did not fail")
