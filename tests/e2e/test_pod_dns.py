"""Pod DNS and /etc/hosts on the real containerd, read inside the containers as a workload
reads them: resolv.conf under each dnsPolicy, the kubelet-managed hosts file, ``hostname``
and ``hostname -f``; the kubelet's events for a missing clusterDNS, a dnsConfig over the
limits and a sandbox config it cannot make; and manifests the API would refuse."""

from __future__ import annotations

import socket
from pathlib import Path
from typing import Any

import pytest

from tests.harness.containerd import list_pod_sandboxes
from tests.harness.node import NODE, Pkletd, api_pod, exec_in, pod_manifest, wait_for
from tests.supervisor.pods.pod_helpers import container_ids

pytestmark = pytest.mark.slow

NODE_RESOLV = "nameserver 192.0.2.1\nsearch corp.example.\noptions edns0\n"
LOCALHOST = (
    "# Kubernetes-managed hosts file.\n"
    "127.0.0.1\tlocalhost\n"
    "::1\tlocalhost ip6-localhost ip6-loopback\n"
    "fe00::0\tip6-localnet\n"
    "fe00::0\tip6-mcastprefix\n"
    "fe00::1\tip6-allnodes\n"
    "fe00::2\tip6-allrouters\n"
)
ALIASES = [{"ip": "10.1.2.3", "hostnames": ["foo.local", "bar.local"]}]
ALIAS_BLOCK = "\n# Entries added by HostAliases.\n10.1.2.3\tfoo.local\tbar.local\n"
MISSING = (
    'kubelet does not have ClusterDNS IP configured and cannot create Pod using "ClusterFirst" '
    'policy. Falling back to "Default" policy.'
)


def start(agent: Pkletd, **fields: Any) -> Pkletd:
    """Start with the node resolver file ``NODE_RESOLV`` and these config fields."""
    resolv = agent.base / "resolv.conf"
    resolv.write_text(NODE_RESOLV)
    agent.write_config(resolvConf=str(resolv), **fields)
    return agent.start()


def put(agent: Pkletd, name: str, host_network: bool = False, **spec: Any) -> None:
    manifest = pod_manifest(name, host_network=host_network)
    manifest["spec"].update(spec)
    agent.put(name, manifest)


def read(agent: Pkletd, name: str, *command: str) -> str:
    """What the command prints in the pod's container, once it runs."""
    agent.wait_running(name)
    return exec_in(agent, container_ids(agent, name)["c0"], *command)


def pod_ip(agent: Pkletd, name: str) -> str:
    def check() -> str | None:
        found = api_pod(agent, name)
        return found["status"].get("podIP") if found else None

    return wait_for(f"{name} pod IP", check)


def events_of(agent: Pkletd, reason: str) -> list[tuple[str, str]]:
    return [(e["object"], e["message"]) for e in agent.events() if e["reason"] == reason]


def uid(agent: Pkletd, name: str) -> str:
    found = agent.pod(name)
    assert found is not None
    return str(found["uid"])


def test_resolv_conf_under_each_dns_policy(pkletd: Pkletd) -> None:
    start(pkletd, clusterDNS=["10.96.0.10"], clusterDomain="cluster.local")
    put(pkletd, "cf")
    put(pkletd, "df", dnsPolicy="Default")
    none_config = {
        "nameservers": ["192.0.2.53"],
        "searches": ["a.example"],
        "options": [{"name": "ndots", "value": "2"}],
    }
    put(pkletd, "none", dnsPolicy="None", dnsConfig=none_config)
    put(pkletd, "hostnet", host_network=True)
    put(pkletd, "hostnet-cluster", host_network=True, dnsPolicy="ClusterFirstWithHostNet")

    cluster = (
        "search default.svc.cluster.local svc.cluster.local cluster.local corp.example\n"
        "nameserver 10.96.0.10\noptions ndots:5\n"
    )
    node = "search corp.example\nnameserver 192.0.2.1\noptions edns0\n"
    assert read(pkletd, "cf", "cat", "/etc/resolv.conf") == cluster
    assert read(pkletd, "df", "cat", "/etc/resolv.conf") == node
    assert read(pkletd, "none", "cat", "/etc/resolv.conf") == (
        "search a.example\nnameserver 192.0.2.53\noptions ndots:2\n"
    )
    assert read(pkletd, "hostnet", "cat", "/etc/resolv.conf") == node
    assert read(pkletd, "hostnet-cluster", "cat", "/etc/resolv.conf") == cluster
    assert events_of(pkletd, "MissingClusterDNS") == []
    assert events_of(pkletd, "DNSConfigForming") == []


def test_hosts_file_hostname_and_missing_cluster_dns(pkletd: Pkletd) -> None:
    start(pkletd, clusterDomain="cluster.local")
    put(pkletd, "plain")
    put(pkletd, "named", hostname="db-0", subdomain="db", hostAliases=ALIASES)
    put(pkletd, "fqdn", hostname="db-1", subdomain="db", setHostnameAsFQDN=True)
    put(pkletd, "hostnet", host_network=True, hostAliases=ALIASES)

    ip = pod_ip(pkletd, "plain")
    assert read(pkletd, "plain", "cat", "/etc/hosts") == LOCALHOST + f"{ip}\tplain-{NODE}\n"
    assert read(pkletd, "plain", "hostname") == f"plain-{NODE}\n"
    etc_hosts = pkletd.root_dir / "pods" / uid(pkletd, "plain") / "etc-hosts"
    assert etc_hosts.read_text() == LOCALHOST + f"{ip}\tplain-{NODE}\n"

    ip = pod_ip(pkletd, "named")
    fqdn = "db-0.db.default.svc.cluster.local"
    assert read(pkletd, "named", "cat", "/etc/hosts") == (
        LOCALHOST + f"{ip}\t{fqdn}\tdb-0\n" + ALIAS_BLOCK
    )
    assert read(pkletd, "named", "hostname") == "db-0\n"
    assert read(pkletd, "named", "hostname", "-f") == f"{fqdn}\n"
    assert read(pkletd, "fqdn", "hostname") == "db-1.db.default.svc.cluster.local\n"

    node_hosts = Path("/etc/hosts").read_text()
    assert read(pkletd, "hostnet", "cat", "/etc/hosts") == (
        "# Kubernetes-managed hosts file (host network).\n" + node_hosts + ALIAS_BLOCK
    )
    assert read(pkletd, "hostnet", "hostname") == f"{socket.gethostname()}\n"

    # No clusterDNS: pods on the pod network fall back to the node's resolver, with the
    # kubelet's warning on the node and on each of them; hostNetwork pods had Default anyway.
    assert read(pkletd, "plain", "cat", "/etc/resolv.conf") == (
        "search corp.example\nnameserver 192.0.2.1\noptions edns0\n"
    )
    warned = events_of(pkletd, "MissingClusterDNS")
    assert (NODE, MISSING) in warned
    where = f"plain-{NODE}_default({uid(pkletd, 'plain')})"
    assert (f"default/plain-{NODE}", f'pod: "{where}". {MISSING}') in warned
    assert not [o for o, _ in warned if o == f"default/hostnet-{NODE}"]


def test_fqdn_too_long_is_failed_create_pod_sandbox(pkletd: Pkletd) -> None:
    start(pkletd, clusterDomain="cluster.local")
    put(pkletd, "long", hostname="h" * 40, subdomain="s" * 20, setHostnameAsFQDN=True)
    put(pkletd, "fine")
    pkletd.wait_running("fine")
    fqdn = f"{'h' * 40}.{'s' * 20}.default.svc.cluster.local"
    message = (
        "Failed to create pod sandbox: failed to construct FQDN from pod hostname and cluster "
        f"domain, FQDN {fqdn} is too long (64 characters is the max, {len(fqdn)} characters "
        "requested)"
    )
    wait_for(
        "FailedCreatePodSandBox",
        lambda: (f"default/long-{NODE}", message) in events_of(pkletd, "FailedCreatePodSandBox"),
    )
    found = pkletd.pod("long")
    assert found is not None and found["phase"] == "Pending"
    names = [s.metadata.name for s in list_pod_sandboxes(pkletd.endpoint)]
    assert f"long-{NODE}" not in names


def test_dns_config_over_the_limits_is_cut_and_the_pod_runs(pkletd: Pkletd) -> None:
    start(pkletd, clusterDNS=["10.96.0.10"], clusterDomain="cluster.local")
    searches = [f"s{i}.example" for i in range(32)]  # as many as the API takes
    config = {"nameservers": ["192.0.2.51", "192.0.2.52", "192.0.2.53"], "searches": searches}
    put(pkletd, "over", dnsConfig=config)
    resolv = read(pkletd, "over", "cat", "/etc/resolv.conf")
    kept = [
        "default.svc.cluster.local",
        "svc.cluster.local",
        "cluster.local",
        "corp.example",
        *searches[:28],
    ]
    assert resolv == (
        f"search {' '.join(kept)}\n"
        "nameserver 10.96.0.10\nnameserver 192.0.2.51\nnameserver 192.0.2.52\n"
        "options ndots:5\n"
    )
    where = f"default/over-{NODE}"
    forming = events_of(pkletd, "DNSConfigForming")
    assert (
        where,
        "Nameserver limits were exceeded, some nameservers have been omitted, the applied "
        "nameserver line is: 10.96.0.10 192.0.2.51 192.0.2.52",
    ) in forming
    assert (
        where,
        "Search Line limits were exceeded, some search paths have been omitted, the applied "
        f"search line is: {' '.join(kept)}",
    ) in forming


@pytest.mark.parametrize(
    ("spec", "reason"),
    [
        (
            {"dnsPolicy": "ClusterLast"},
            "spec.dnsPolicy: unsupported value 'ClusterLast': supported values: "
            "'ClusterFirst', 'ClusterFirstWithHostNet', 'Default', 'None'",
        ),
        (
            {"dnsPolicy": "None"},
            "spec.dnsConfig: required value: must provide `dnsConfig` when `dnsPolicy` is None",
        ),
    ],
)
def test_a_pod_the_api_would_refuse_is_rejected_naming_the_field(
    pkletd: Pkletd, spec: dict[str, Any], reason: str
) -> None:
    put(pkletd, "good")
    put(pkletd, "bad", **spec)
    start(pkletd)
    pkletd.wait_running("good")
    line = wait_for(
        "rejection logged",
        lambda: [line for line in pkletd.log().splitlines() if "manifest rejected" in line],
    )
    assert f"path={pkletd.manifests / 'bad.yaml'}" in line[0] and reason in line[0]
    assert list(pkletd.pods()) == [f"good-{NODE}"]
