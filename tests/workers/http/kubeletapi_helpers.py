"""An http worker served in the test process (no bus, no parent): its kubelet API on a free
port with TLS and the test PKI's CA as client CA, a read-only port, and a fake reviewer;
and a small HTTPS client that can show a client certificate or a bearer token. For a real
pkletd: ``join`` makes it a node of a cluster, ``kubelet_get`` and ``kubelet_request`` ask
its kubelet API directly (as a user of the cluster CA), and ``grant_kubelet_api`` lets users
in through the real control plane's RBAC."""

from __future__ import annotations

import http.client
import json
import socket
import ssl
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import kubernetes.client
from pkletd.workers.http import (
    Api,
    AuthOptions,
    AuthorizationMode,
    HttpOptions,
    HttpWorker,
    Listen,
    TlsOptions,
)
from pkletd.workers.http.reviews import FakeReviewer, Reviewer
from pkletd.workers.http.server import Limits

from tests.harness.apiserver import ApiServer
from tests.harness.apiserver.certs import Pki
from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import Pkletd, wait_for

NODE = "node-a"
LIMITS = Limits()


@dataclass
class Reply:
    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    @property
    def text(self) -> str:
        return self.body.decode()

    def json(self) -> Any:
        return json.loads(self.body)


@dataclass
class Served:
    worker: HttpWorker
    pki: Pki
    port: int
    read_only_port: int
    reviewer: Reviewer

    def context(self, cert: tuple[Path, Path] | None = None) -> ssl.SSLContext:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
        if cert is not None:
            context.load_cert_chain(*(str(p) for p in cert))
        return context

    def get(
        self,
        path: str,
        user: str | None = None,
        groups: tuple[str, ...] = (),
        token: str | None = None,
        method: str = "GET",
        headers: dict[str, str] | None = None,
    ) -> Reply:
        cert = self.pki.client_cert(user, groups) if user else None
        connection = http.client.HTTPSConnection(
            "127.0.0.1", self.port, timeout=10, context=self.context(cert)
        )
        sent = dict(headers or {})
        if token is not None:
            sent["Authorization"] = f"Bearer {token}"
        try:
            connection.request(method, path, headers=sent)
            response = connection.getresponse()
            return Reply(response.status, response.read(), dict(response.getheaders()))
        finally:
            connection.close()

    def admin(self, path: str, **kwargs: Any) -> Reply:
        return self.get(path, user="admin", groups=("system:masters",), **kwargs)

    def plain(self, path: str, method: str = "GET") -> Reply:
        connection = http.client.HTTPConnection("127.0.0.1", self.read_only_port, timeout=10)
        try:
            connection.request(method, path)
            response = connection.getresponse()
            return Reply(response.status, response.read(), dict(response.getheaders()))
        finally:
            connection.close()

    def tls_socket(self, user: str | None = None) -> ssl.SSLSocket:
        cert = self.pki.client_cert(user) if user else None
        raw = socket.create_connection(("127.0.0.1", self.port), timeout=10)
        return self.context(cert).wrap_socket(raw)


@contextmanager
def serve(
    tmp_path: Path,
    auth: AuthOptions | None = None,
    reviewer: Reviewer | None = None,
    limits: Limits = LIMITS,
    **options: Any,
) -> Iterator[Served]:
    pki = Pki(tmp_path / "pki")
    auth = auth or AuthOptions(
        anonymous=False,
        client_ca_file=str(pki.ca_cert_path),
        webhook_authn=True,
        mode=AuthorizationMode.WEBHOOK,
    )
    kubelet = Listen("127.0.0.1", 0, Api.KUBELET)
    read_only = Listen("127.0.0.1", 0, Api.READ_ONLY)
    settings = HttpOptions(
        node_name=NODE,
        listens=(kubelet, read_only),
        tls=TlsOptions("", "", str(tmp_path / "root" / "pki")),
        auth=auth,
        pod_logs_dir=str(tmp_path / "pods"),
        node_log_dir=str(tmp_path / "varlog"),
        **options,
    )
    reviewer = reviewer if reviewer is not None else FakeReviewer()
    worker = HttpWorker(settings, reviewer, limits)
    try:
        port = wait_for("kubelet API bound", lambda: worker.server.address(kubelet))[1]
        plain = wait_for("read-only bound", lambda: worker.server.address(read_only))[1]
        yield Served(worker, pki, port, plain, reviewer)
    finally:
        worker.close()


def grant_kubelet_api(kube: Kube, name: str, subjects: list[dict[str, str]]) -> None:
    """Bind ``subjects`` (RBAC subjects: ``{"kind": "User", "name": "ops", "apiGroup":
    "rbac.authorization.k8s.io"}``...) to ``system:kubelet-api-admin``, the role the
    kubelet's webhook authorization asks about (``nodes/proxy`` and the rest); the
    clean-up takes the binding away."""
    body = {
        "metadata": {"name": name},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": "system:kubelet-api-admin",
        },
        "subjects": subjects,
    }
    kubernetes.client.RbacAuthorizationV1Api(kube.api).create_cluster_role_binding(body)


def user_subject(name: str) -> dict[str, str]:
    """An RBAC subject: the user a client certificate's CN names."""
    return {"kind": "User", "name": name, "apiGroup": "rbac.authorization.k8s.io"}


def kubelet_request(
    pkletd: Pkletd,
    apiserver: ApiServer | ControlPlane,
    method: str,
    path: str,
    user: str = "",
    token: str = "",
    headers: dict[str, str] | None = None,
) -> Reply:
    """One request to a real pkletd's kubelet API, as ``user`` (a client certificate of
    the cluster CA, group ``ops``) or with a bearer ``token``, or neither."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    if user:
        context.load_cert_chain(*(str(p) for p in apiserver.client_cert(user, ["ops"])))
    connection = http.client.HTTPSConnection("127.0.0.1", pkletd.port, timeout=10, context=context)
    sent = dict(headers or {})
    if token:
        sent["Authorization"] = f"Bearer {token}"
    try:
        connection.request(method, path, headers=sent)
        response = connection.getresponse()
        return Reply(response.status, response.read(), dict(response.getheaders()))
    finally:
        connection.close()


def kubelet_get(
    pkletd: Pkletd,
    apiserver: ApiServer | ControlPlane,
    path: str,
    user: str = "",
    token: str = "",
) -> tuple[int, str]:
    reply = kubelet_request(pkletd, apiserver, "GET", path, user, token)
    return reply.status, reply.text
