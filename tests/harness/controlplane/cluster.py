"""A real control plane as kubeadm sets one up, on loopback, for the tests and ``make cluster``.

``ControlPlane(base_dir)`` runs, from the binaries ``binaries.py`` builds:

- etcd on 127.0.0.1 (its data under ``base_dir/etcd``);
- kube-apiserver with client-certificate auth against the cluster CA,
  ``--authorization-mode=Node,RBAC``, ``--enable-admission-plugins=NodeRestriction``,
  bootstrap-token auth, a service-account issuer and keys, and the kubelet client
  certificate kubeadm gives it (``kubeadm:cluster-admins``);
- the objects ``kubeadm init`` creates (``bootstrap.py``);
- kube-controller-manager with the cluster signing key and its default controllers, plus
  the bootstrap signer and token cleaner, as kubeadm enables them;
- kube-scheduler.

kube-apiserver keeps an audit log of reviews, CSRs, what it proxies to kubelets and
nodes' pod lists and watches (``audit_events``). ``Options`` change a few flags for a
test's own control plane (signing duration, ``--kubelet-certificate-authority``, the watch
cache).

Everything listens on 127.0.0.1 only, on free ports. Nodes must be given ``--node-ip
127.0.0.1``: the API server reaches a kubelet only at its InternalIP
(``--kubelet-preferred-address-types=InternalIP``). Each process logs to
``base_dir/logs/<name>.log``. It answers what a test asks of a cluster the way the test
API server does (``url``, ``ca_path``, ``kubeconfig(...)``, ``bootstrap_kubeconfig``,
``add_bootstrap_token``), so ``Kube`` and ``Pkletd.join_cluster`` take either.
"""

from __future__ import annotations

import base64
import json
import ssl
import time
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from tests.harness.apiserver.certs import Pki
from tests.harness.controlplane import binaries, bootstrap
from tests.harness.controlplane.processes import Component, ComponentError
from tests.harness.node import free_port

START_TIMEOUT = 90.0
# What kube-apiserver's audit log records (``audit_events``): who reviewed whom, who asked
# for certificates, the requests kube-apiserver proxies to kubelets, nodes' lists and
# watches of pods; every other request a node makes of its Node, its Lease, pods (their
# status, mirror pods) and events; and nodes' reads of the objects their pods use
# (Secrets, ConfigMaps, ServiceAccounts and their tokens, RuntimeClasses); nothing else.
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived"],
    "rules": [
        {
            "level": "Metadata",
            "userGroups": ["system:nodes"],
            "verbs": ["list", "watch"],
            "resources": [{"group": "", "resources": ["pods"]}],
        },
        {
            "level": "Metadata",
            "userGroups": ["system:nodes"],
            "resources": [
                {"group": "", "resources": ["secrets", "configmaps", "serviceaccounts/token"]},
                {"group": "node.k8s.io", "resources": ["runtimeclasses"]},
            ],
        },
        {
            "level": "Metadata",
            "resources": [
                {"group": "authentication.k8s.io", "resources": ["tokenreviews"]},
                {"group": "authorization.k8s.io", "resources": ["subjectaccessreviews"]},
                {"group": "certificates.k8s.io", "resources": ["certificatesigningrequests"]},
                {
                    "group": "",
                    "resources": [
                        "nodes/proxy",
                        "pods/log",
                        "pods/exec",
                        "pods/attach",
                        "pods/portforward",
                    ],
                },
            ],
        },
        {
            "level": "Metadata",
            "userGroups": ["system:nodes"],
            "resources": [
                {
                    "group": "",
                    "resources": ["nodes", "nodes/status", "pods", "pods/status", "events"],
                },
                {"group": "coordination.k8s.io", "resources": ["leases"]},
                {"group": "events.k8s.io", "resources": ["events"]},
            ],
        },
        {"level": "None"},
    ],
}
ADMIN_GROUPS = ("system:masters",)
SERVICE_CIDR = "10.96.0.0/12"
# Where each component listens, kept across restarts and read back by `make stop`.
PORTS = ("etcd", "etcd-peer", "apiserver", "controller-manager", "scheduler")


@dataclass(frozen=True)
class Options:
    """What a test may change of the kubeadm-shaped control plane.

    ``signing_duration_s``: kube-controller-manager's ``--cluster-signing-duration`` (the
    lifetime of the certificates it signs; the signer still backdates each one by 5
    minutes, so a short one's rotation deadline may be due at once).
    ``verify_kubelet_serving``: kube-apiserver's ``--kubelet-certificate-authority`` is
    the cluster CA, so logs, exec and the rest verify each kubelet's serving certificate
    (every node then needs one the cluster signed: ``serverTLSBootstrap``).
    ``watch_cache``: off (``--watch-cache=false``), kube-apiserver serves each watch
    from etcd itself, so a watch resumed from a revision ``compact()`` took away ends
    with ``410 Gone`` from etcd, not from the API server's own cache."""

    signing_duration_s: int | None = None
    verify_kubelet_serving: bool = False
    watch_cache: bool = True


class ControlPlane:
    def __init__(self, base_dir: Path, options: Options = Options()) -> None:
        self.base_dir = Path(base_dir)
        self.options = options
        self.base_dir.mkdir(parents=True, exist_ok=True)
        self.pki = Pki(self.base_dir / "pki")
        self.ports = self._ports()
        self.components = {c.name: c for c in self._components()}

    # ----------------------------------------------------------------------- layout

    def _ports(self) -> dict[str, int]:
        path = self.base_dir / "ports.json"
        if path.exists():
            return dict(json.loads(path.read_text()))
        ports = {name: free_port() for name in PORTS}
        path.write_text(json.dumps(ports))
        return ports

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.ports['apiserver']}"

    @property
    def etcd_url(self) -> str:
        return f"http://127.0.0.1:{self.ports['etcd']}"

    @property
    def ca_path(self) -> Path:
        return self.pki.ca_cert_path

    @property
    def kubectl(self) -> Path:
        return binaries.path("kubectl")

    def log_path(self, component: str) -> Path:
        return self.components[component].log_path

    def _components(self) -> list[Component]:
        marker = str(self.base_dir)
        return [
            Component("etcd", self._etcd_argv(), self.base_dir, marker),
            Component("kube-apiserver", self._apiserver_argv(), self.base_dir, marker),
            Component("kube-controller-manager", self._kcm_argv(), self.base_dir, marker),
            Component("kube-scheduler", self._scheduler_argv(), self.base_dir, marker),
        ]

    def _etcd_argv(self) -> list[str]:
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        return [
            str(binaries.path("etcd")),
            "--name=default",
            f"--data-dir={self.base_dir / 'etcd'}",
            f"--listen-client-urls={self.etcd_url}",
            f"--advertise-client-urls={self.etcd_url}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--log-level=warn",
            "--unsafe-no-fsync",  # a test cluster: no fsync per write on a shared disk
        ]

    def _apiserver_argv(self) -> list[str]:
        pki = self.pki
        serving_cert, serving_key = pki.serving_cert
        kubelet_cert, kubelet_key = pki.kubelet_client_cert
        return [
            str(binaries.path("kube-apiserver")),
            "--advertise-address=127.0.0.1",
            "--endpoint-reconciler-type=none",  # a loopback address has no Endpoints
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['apiserver']}",
            "--allow-privileged=true",
            "--authorization-mode=Node,RBAC",
            f"--client-ca-file={pki.ca_cert_path}",
            "--enable-admission-plugins=NodeRestriction",
            "--enable-bootstrap-token-auth=true",
            f"--etcd-servers={self.etcd_url}",
            f"--kubelet-client-certificate={kubelet_cert}",
            f"--kubelet-client-key={kubelet_key}",
            "--kubelet-preferred-address-types=InternalIP",
            "--service-account-issuer=https://kubernetes.default.svc.cluster.local",
            f"--service-account-key-file={pki.sa_key_path}",
            f"--service-account-signing-key-file={pki.sa_key_path}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--tls-cert-file={serving_cert}",
            f"--tls-private-key-file={serving_key}",
            "--profiling=false",
            f"--audit-policy-file={self._audit_policy()}",
            f"--audit-log-path={self.audit_log_path}",
            "--audit-log-maxsize=100",  # MB: a long `make cluster` keeps one old file
            "--audit-log-maxbackup=1",
            *self._kubelet_ca_args(),
            *([] if self.options.watch_cache else ["--watch-cache=false"]),
        ]

    @property
    def audit_log_path(self) -> Path:
        return self.base_dir / "logs" / "audit.log"

    def _audit_policy(self) -> Path:
        path = self.base_dir / "audit-policy.json"
        path.write_text(json.dumps(AUDIT_POLICY))
        return path

    def _kubelet_ca_args(self) -> list[str]:
        if not self.options.verify_kubelet_serving:
            return []
        return [f"--kubelet-certificate-authority={self.pki.ca_cert_path}"]

    def _signing_args(self) -> list[str]:
        if self.options.signing_duration_s is None:
            return []
        return [f"--cluster-signing-duration={self.options.signing_duration_s}s"]

    def _component_kubeconfig(self, user: str) -> Path:
        return self.pki.write_kubeconfig(
            self.base_dir / f"{user.split(':')[-1]}.conf", self.url, user
        )

    def _kcm_argv(self) -> list[str]:
        kubeconfig = self._component_kubeconfig("system:kube-controller-manager")
        ca_key = self.pki.base_dir / "ca.key"
        return [
            str(binaries.path("kube-controller-manager")),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['controller-manager']}",
            f"--client-ca-file={self.pki.ca_cert_path}",
            f"--cluster-signing-cert-file={self.pki.ca_cert_path}",
            f"--cluster-signing-key-file={ca_key}",
            "--controllers=*,bootstrapsigner,tokencleaner",
            "--leader-elect=false",
            f"--root-ca-file={self.pki.ca_cert_path}",
            f"--service-account-private-key-file={self.pki.sa_key_path}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--use-service-account-credentials=true",
            *self._signing_args(),
        ]

    def _scheduler_argv(self) -> list[str]:
        kubeconfig = self._component_kubeconfig("system:kube-scheduler")
        return [
            str(binaries.path("kube-scheduler")),
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['scheduler']}",
            "--leader-elect=false",
        ]

    # ----------------------------------------------------------------------- lifecycle

    def start(self) -> ControlPlane:
        """Start what is not running; returns once the API server is ready and the
        kubeadm objects are there."""
        try:
            self._start("etcd", self._etcd_ready)
            self._start("kube-apiserver", self.apiserver_ready)
            bootstrap.apply(self.kubeconfig(), self.url, self.pki.ca_pem)
            self._start("kube-scheduler", None)
            self._start("kube-controller-manager", self._controllers_ready)
        except Exception:
            self.stop()
            raise
        return self

    def _start(self, name: str, ready: Callable[[], bool] | None) -> None:
        component = self.components[name]
        if component.pid() is None:
            component.start()
        if ready is not None:
            self._wait(component, ready)

    def _wait(self, component: Component, ready: Callable[[], bool]) -> None:
        deadline = time.monotonic() + START_TIMEOUT
        while time.monotonic() < deadline:
            if component.pid() is None:
                raise component.failure("exited while starting")
            if ready():
                return
            time.sleep(0.1)
        raise component.failure(f"not ready after {START_TIMEOUT:.0f}s")

    def stop(self) -> None:
        """Stop every component, the API server's clients first."""
        for component in reversed(list(self.components.values())):
            component.stop()

    def restart_apiserver(self) -> None:
        """Stop kube-apiserver (SIGTERM) and start it again on the same port and etcd."""
        component = self.components["kube-apiserver"]
        component.stop()
        component.start()
        self._wait(component, self.apiserver_ready)

    def running(self) -> list[str]:
        return [name for name, c in self.components.items() if c.pid() is not None]

    def check_running(self) -> None:
        """Fail, with its log, if a component has died (a test's bad luck must show)."""
        for component in self.components.values():
            if component.pid() is None:
                raise component.failure("not running")

    # ----------------------------------------------------------------------- readiness

    def _etcd_ready(self) -> bool:
        try:
            with urllib.request.urlopen(f"{self.etcd_url}/health", timeout=2) as reply:
                return bool(json.load(reply).get("health") == "true")
        except OSError:
            return False

    def _controllers_ready(self) -> bool:
        return bootstrap.controllers_ready(self.kubeconfig())

    def _admin_context(self) -> ssl.SSLContext:
        context = ssl.create_default_context(cafile=str(self.pki.ca_cert_path))
        context.load_cert_chain(*(str(p) for p in self.pki.client_cert("admin", ADMIN_GROUPS)))
        return context

    def apiserver_ready(self) -> bool:
        try:
            with urllib.request.urlopen(
                f"{self.url}/readyz", timeout=2, context=self._admin_context()
            ) as reply:
                return bool(reply.status == 200)
        except OSError:
            return False

    # ----------------------------------------------------------------------- etcd

    def _etcd_call(self, path: str, body: dict[str, object]) -> dict[str, object]:
        request = urllib.request.Request(
            f"{self.etcd_url}{path}", data=json.dumps(body).encode(), method="POST"
        )
        with urllib.request.urlopen(request, timeout=10) as reply:
            return dict(json.load(reply))

    def compact(self) -> int:
        """Compact etcd at its current revision (what the API server does every 5 min):
        a watch resumed from an older resourceVersion then gets ``410 Gone``."""
        key = base64.b64encode(b"/registry/").decode()
        found = self._etcd_call("/v3/kv/range", {"key": key, "count_only": True})
        header = found["header"]
        assert isinstance(header, dict)
        revision = int(header["revision"])
        self._etcd_call("/v3/kv/compaction", {"revision": revision, "physical": True})
        return revision

    # ----------------------------------------------------------------------- audit

    def audit_events(
        self,
        resource: str,
        subresource: str | None = None,
        user: str | None = None,
        verb: str | None = None,
    ) -> list[dict[str, object]]:
        """The completed requests kube-apiserver's audit log holds for ``resource`` (and
        ``subresource``, made by ``user``, with ``verb``), oldest first: the kinds
        ``AUDIT_POLICY`` names. Each is an ``audit.k8s.io/v1`` Event (``verb``, ``user``,
        ``objectRef``, ``responseStatus``...)."""
        try:
            lines = self.audit_log_path.read_text().splitlines()
        except FileNotFoundError:
            return []
        wanted = Wanted(resource, subresource, user, verb)
        return [e for e in _parsed(lines) if wanted.matches(e)]

    # ----------------------------------------------------------------------- access

    def kubeconfig(
        self,
        path: Path | None = None,
        user: str = "admin",
        groups: Sequence[str] | None = None,
        token: str | None = None,
        namespace: str | None = None,
    ) -> Path:
        """A kubeconfig for ``user``: a client cert (CN user, O groups) signed by the
        cluster CA, or a bearer ``token``. The admin is in ``system:masters``."""
        if groups is None:
            groups = ADMIN_GROUPS if user == "admin" else ()
        path = path or self.base_dir / "users" / f"{user.replace(':', '_')}.kubeconfig"
        path.parent.mkdir(exist_ok=True)
        return self.pki.write_kubeconfig(path, self.url, user, groups, token, namespace)

    def bootstrap_kubeconfig(self, path: Path, token: str) -> Path:
        """A kubeconfig as ``kubeadm join`` writes ``bootstrap-kubelet.conf``."""
        return self.pki.write_kubeconfig(path, self.url, "tls-bootstrap-token-user", token=token)

    def add_bootstrap_token(self, token: str, auto_approve: bool = True) -> None:
        """A bootstrap token as ``kubeadm token create`` makes it (``<id>.<secret>``).
        ``auto_approve=False``: its group may ask for certificates, but nobody approves
        them (``kubeadm token create --groups``, a group without the approval binding):
        the test approves or denies them."""
        bootstrap.add_token(self.kubeconfig(), token, auto_approve)

    def client_cert(self, user: str, groups: Sequence[str] = ()) -> tuple[Path, Path]:
        """A client certificate and key for ``user`` in ``groups``, signed by the cluster CA."""
        return self.pki.client_cert(user, groups)


def _parsed(lines: list[str]) -> list[dict[str, object]]:
    """The JSON lines, but a last one still being written."""
    events = []
    for line in lines:
        try:
            events.append(dict(json.loads(line)))
        except ValueError:
            continue
    return events


@dataclass(frozen=True)
class Wanted:
    """Which audit events ``audit_events`` returns (None: any)."""

    resource: str
    subresource: str | None
    user: str | None
    verb: str | None

    def matches(self, event: dict[str, object]) -> bool:
        ref = event.get("objectRef") or {}
        who = event.get("user") or {}
        assert isinstance(ref, dict) and isinstance(who, dict)
        return (
            event.get("stage") == "ResponseComplete"
            and ref.get("resource") == self.resource
            and self.subresource in (None, ref.get("subresource"))
            and self.user in (None, who.get("username"))
            and self.verb in (None, event.get("verb"))
        )


__all__ = ["ComponentError", "ControlPlane", "Options"]
