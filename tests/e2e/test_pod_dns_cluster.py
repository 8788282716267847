"""Pod DNS on a pkletd joined to the real control plane, as on a real node: an API pod's
resolv.conf and hosts file, and the kubelet's DNSConfigForming warning in the API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.harness.apiserver.client import Kube
from tests.harness.controlplane import ControlPlane
from tests.harness.node import BUSYBOX, Pkletd, exec_in, join, wait_for

pytestmark = pytest.mark.slow


@pytest.fixture
def kube(cluster_kube: Kube) -> Kube:
    return cluster_kube


@pytest.fixture
def node(pkletd: Pkletd, control_plane: ControlPlane) -> Iterator[Pkletd]:
    resolv = pkletd.base / "resolv.conf"
    resolv.write_text("nameserver 192.0.2.1\nsearch corp.example\n")
    dns = {"clusterDNS": ["10.96.0.10"], "clusterDomain": "cluster.local"}
    yield join(pkletd, control_plane, resolvConf=str(resolv), **dns)


def default_service_account(kube: Kube, namespace: str) -> bool:
    accounts = kube.core.list_namespaced_service_account(namespace).items
    return any(a.metadata.name == "default" for a in accounts)


def test_an_api_pods_dns_and_its_warning_in_the_api(node: Pkletd, kube: Kube) -> None:
    spec = {
        "nodeName": node.node,
        "terminationGracePeriodSeconds": 1,
        "hostname": "db-0",
        "subdomain": "db",
        "dnsConfig": {"nameservers": ["192.0.2.51", "192.0.2.52", "192.0.2.53"]},
        "containers": [
            {
                "name": "app",
                "image": BUSYBOX,
                "imagePullPolicy": "Never",
                "command": ["sh", "-c", "trap 'exit 0' TERM; while true; do sleep 1; done"],
            }
        ],
    }
    kube.core.create_namespace({"metadata": {"name": "shop"}})
    # admission refuses a pod until the service-account controller made the namespace's
    wait_for("shop's default ServiceAccount", lambda: default_service_account(kube, "shop"))
    kube.core.create_namespaced_pod("shop", {"metadata": {"name": "db-0"}, "spec": spec})
    running = node.wait_api_pod("db-0")
    container_id = running["containers"][0]["container_id"]
    ip = wait_for("pod IP", lambda: kube.core.read_namespaced_pod("db-0", "shop").status.pod_ip)

    assert exec_in(node, container_id, "cat", "/etc/resolv.conf") == (
        "search shop.svc.cluster.local svc.cluster.local cluster.local corp.example\n"
        "nameserver 10.96.0.10\nnameserver 192.0.2.51\nnameserver 192.0.2.52\n"
        "options ndots:5\n"
    )
    hosts = exec_in(node, container_id, "cat", "/etc/hosts")
    assert hosts.endswith(f"{ip}\tdb-0.db.shop.svc.cluster.local\tdb-0\n")

    def warning() -> list[object]:
        events = kube.core.list_namespaced_event(
            "shop", field_selector="involvedObject.name=db-0"
        ).items
        return [e for e in events if e.reason == "DNSConfigForming"]

    (event,) = wait_for("DNSConfigForming in the API", warning)
    assert (event.type, event.source.component, event.source.host) == (
        "Warning",
        "kubelet",
        node.node,
    )
    assert event.message == (
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
        "nameserver line is: 10.96.0.10 192.0.2.51 192.0.2.52"
    )
